#pragma once
// The planning half of GemmReduceScatter's fused kernel (gemm_reduce_scatter_fused.cpp): its
// default tile, its task order and where off-node partials meet. Pure functions of the shape and
// the layout, no MPI and no device: the real call and the simulator (ops/model/sim_ops.cpp) plan
// with the same code.
#include <cstddef>
#include <vector>

#include "collectives/topology.hpp"

namespace tilecomm::detail {

/// The default tile: about 4 tiles per WG slot over the M rows this rank computes, 8..256 rows;
/// when the job spans nodes, at most kOffNodeEagerBytes of partials (rows x n floats, one MPI
/// message), but never under 8 rows (n > 1536 then goes over the eager limit).
std::size_t gemm_rs_default_tile(std::size_t m, std::size_t wg_slots, std::size_t n,
                                 bool spans_nodes);

/// Node sums across nodes (node_relay, relays_partials: ops/common/plan_layout.hpp): the off-node
/// owners `relay` relays, ascending; owner j of the list uses slot j of the relay's segment.
std::vector<int> gemm_rs_relayed(const Topology& topo, int relay);
/// Task ids: q * blocks + i computes block i of owner q's rows; p * blocks + i reduces this rank's
/// block i; (p + 1 + q) * blocks + i adds the node's partials of owner q's block i and sends the
/// sum (this rank is q's relay). Order: owners in destination_order(topo, remote_first) (with
/// `remote_first`, each of this rank's own blocks followed at once by its reduce), else every
/// reduce after the computes; with node sums, owners in relay_destination_order and each node sum
/// one compute after its own block's.
std::vector<std::size_t> gemm_rs_order(const Topology& topo, std::size_t blocks, bool remote_first);

}  // namespace tilecomm::detail
