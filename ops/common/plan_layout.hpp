#pragma once
// The pure part of planning a fused call: where the ranks are and in which order a rank serves
// them. No MPI and no device, so the operators' planners (ops/*/..._plan.hpp) run both inside a
// real call (OpContext) and in the simulator (ops/model/sim*.hpp) on a made-up layout.
#include <vector>

#include "collectives/topology.hpp"

namespace tilecomm::detail {

/// The Topology of rank `rank` in a job of `nodes` nodes of `ranks_per_node` ranks each, ranks
/// numbered node by node (what mpirun's block placement and TILECOMM_NODE_SIZE give).
Topology block_topology(int rank, int nodes, int ranks_per_node);

/// Every rank once, in the order a fused kernel should produce their tiles: with `remote_first`,
/// off-node ranks, then other on-node ranks, then this rank, each class rotated to start after
/// this rank (rank r serves r+1 first: no rank is everyone's first destination, no incast); else
/// plain rank order (the unrotated baseline).
std::vector<int> destination_order(const Topology& topo, bool remote_first);
/// Every other rank once, in the order their tiles are expected to arrive under the rotated
/// destination order: rank - 1 first (its first destination is this rank), then rank - 2, ...
std::vector<int> source_order(const Topology& topo);

}  // namespace tilecomm::detail
