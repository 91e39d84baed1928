#pragma once
// The unfused modes' collectives as simulator steps (sim.hpp): one rank's part of the algorithm
// the library's default table picks (collectives/default_thresholds.hpp), step by step.
//  - AllReduce, ReduceOrder::Canonical (what GemvAllReduce's sequential and shaped modes ask):
//    one node: one_shot (payload <= 4 KiB on a node of <= 2 ranks, 8 KiB above) or two_shot
//    through the segment; across nodes: hierarchical (a node-local reduce-scatter, the slices
//    all-reduced between the nodes by the ranks of the same local rank in eager pieces: one round
//    up to allreduce_cross_one_round_max_for(nodes), else a direct reduce-scatter + all-gather,
//    then a node-local all-gather).
//  - ReduceScatter, ReduceOrder::Canonical (GemmReduceScatter): reduce_scatter_steps.
//  - All-to-Allv: on one node the segment (each rank copies its blocks into the peers'), across
//    nodes MPI_Alltoallv as linear Isend/Irecv to every peer (Open MPI's basic linear).
#include <cstdint>
#include <vector>

#include "collectives/topology.hpp"
#include "ops/model/profile.hpp"
#include "ops/model/sim.hpp"

namespace tilecomm::model {

/// Appends rank topo.rank's steps of an AllReduce of `bytes` per rank; messages keyed from `base`
/// (the caller keeps bases of different collectives apart by at least 16).
void allreduce_steps(std::vector<SimStep>& steps, const detail::Topology& topo, double bytes,
                     const Profile& p, std::uint64_t base);
/// Appends rank topo.rank's steps of a ReduceScatter of `bytes` per rank (every rank ends with
/// bytes / p of the sum), ReduceOrder::Canonical: one node: through the segment (read the p - 1
/// peers' parts of my slice, add); across nodes: hierarchical (a node-local reduce-scatter, then a
/// direct reduce-scatter of each node slice between the ranks of the same local rank, in messages
/// of ~256 KiB posted at once and folded one by one as they arrive, as the collective does).
void reduce_scatter_steps(std::vector<SimStep>& steps, const detail::Topology& topo, double bytes,
                          const Profile& p, std::uint64_t base);
/// Appends rank topo.rank's steps of an All-to-Allv: `send[q]` bytes to rank q, `recv[q]` from q,
/// then a copy of everything received (the operators reshape it into their output).
void alltoallv_steps(std::vector<SimStep>& steps, const detail::Topology& topo,
                     const std::vector<double>& send, const std::vector<double>& recv,
                     const Profile& p, std::uint64_t base);

/// The share of a collective's input, `payload` bytes per rank, still in the L2 of the core that
/// has just written it (the compute before the collective): all of it up to half the profile's
/// l2_bytes, none from twice the L2 on, linear in log2 of the payload between (warm_share's rule
/// on the L2). 0 for a profile without l2_bytes or reduce_hot points (older ones).
double hot_share(const Profile& p, double payload);

/// Costs of the simple CPU work a collective's step does, adding or copying `bytes` of floats:
/// hot_share(payload) of it at the hot points (reduce_hot; a copy at the shm path's ping-pong per
/// byte), the rest at the cold ones (reduce; a copy at the path's beta(), the bulk copy's).
struct MemCosts {
  MemCosts(const Profile& p, double payload);
  double reduce(double bytes) const;
  double copy(double bytes) const;
  const Profile& p;
  double hot = 0;
};

}  // namespace tilecomm::model
