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
//    nodes alltoallv(pairwise) (step k: to rank + k, from rank - k, in eager pieces), replayed as
//    every send posted at once (the sender's egress FIFO serialises them alike) and the receives
//    awaited in step order.
#include <cstdint>
#include <vector>

#include "collectives/topology.hpp"
#include "ops/model/profile.hpp"
#include "ops/model/sim.hpp"

namespace tilecomm::model {

/// Appends rank topo.rank's steps of an AllReduce of `bytes` per rank; messages keyed from `base`
/// (the caller keeps bases of different collectives apart by at least 16). `hot`: the share of
/// the input in the L2 (hot_share), for this and the two collectives below.
void allreduce_steps(std::vector<SimStep>& steps, const detail::Topology& topo, double bytes,
                     const Profile& p, std::uint64_t base, double hot = 0);
/// Appends rank topo.rank's steps of a ReduceScatter of `bytes` per rank (every rank ends with
/// bytes / p of the sum), ReduceOrder::Canonical: one node: through the segment (read the p - 1
/// peers' parts of my slice, add); across nodes: hierarchical (a node-local reduce-scatter, then a
/// direct reduce-scatter of each node slice between the ranks of the same local rank, in messages
/// of ~256 KiB posted at once and folded one by one as they arrive, as the collective does).
void reduce_scatter_steps(std::vector<SimStep>& steps, const detail::Topology& topo, double bytes,
                          const Profile& p, std::uint64_t base, double hot = 0);
/// Appends rank topo.rank's steps of an All-to-Allv: `send[q]` bytes to rank q, `recv[q]` from q,
/// then a copy of everything received (`reshape`: EmbeddingAllToAll reshapes it into its output),
/// or only of what the collective itself copies (the on-node peers' bytes out of their segments
/// and this rank's own: off-node bytes land in place; GemmAllToAll receives into its y).
void alltoallv_steps(std::vector<SimStep>& steps, const detail::Topology& topo,
                     const std::vector<double>& send, const std::vector<double>& recv,
                     const Profile& p, std::uint64_t base, double hot = 0, bool reshape = true);

/// The share of a collective's input still in the L2 of the core whose compute kernel has just
/// written it: the L2 keeps the last l2_bytes the compute touched, and the input is spread over
/// all `footprint` bytes the kernel read and wrote (per rank), so min(1, l2_bytes / footprint).
/// 0 for a profile without l2_bytes or reduce_hot points (older ones).
double hot_share(const Profile& p, double footprint);

/// Costs of the simple CPU work a collective's step does, adding or copying `bytes` of floats:
/// the `hot` share (hot_share) at the hot points (reduce_hot; a copy at the shm path's ping-pong
/// per byte), the rest at the cold ones (reduce; a copy at the path's beta(), the bulk copy's).
struct MemCosts {
  explicit MemCosts(const Profile& profile, double share = 0) : p(profile), hot(share) {}
  double reduce(double bytes) const;
  double copy(double bytes) const;
  const Profile& p;
  double hot = 0;
};
/// The cold costs (MemCosts with no hot share): the fused tiles' adds and copies.
inline double reduce_seconds(const Profile& p, double bytes) {
  return MemCosts(p).reduce(bytes);
}
inline double copy_seconds(const Profile& p, double bytes) {
  return MemCosts(p).copy(bytes);
}

}  // namespace tilecomm::model
