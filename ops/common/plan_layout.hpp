#pragma once
// The pure part of planning a fused call: where the ranks are and in which order a rank serves
// them. No MPI and no device, so the operators' planners (ops/*/..._plan.hpp) run both inside a
// real call (OpContext) and in the simulator (ops/model/sim*.hpp) on a made-up layout.
#include <algorithm>
#include <cstddef>
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
/// Node sums, for a fused reduction across nodes: the partials of an off-node owner's block meet
/// on their own node first, at the owner's relay there, which adds them in rank order (the node's
/// term of ReduceOrder::Canonical) and sends the owner one node sum, so a node's link carries one
/// block per owner, not one per rank (the hierarchical collectives' bytes). The relay of `owner`
/// on `node`: the node's rank with the owner's local index, modulo the node's size. A node of one
/// rank is its own relay and sends its partial as it is.
int node_relay(const Topology& topo, int owner, int node);
/// Whether this rank's off-node partials go through relays: the job spans nodes and this rank's
/// node has several ranks.
bool relays_partials(const Topology& topo);
/// destination_order for a kernel whose relays wait for their node's blocks: when this rank's
/// partials go through relays and `remote_first`, the off-node owners come in an order every rank
/// of the node shares (the nodes after this one in turn, each node's ranks ascending), then the
/// on-node ones as destination_order has them (plain rank order is shared already). With a
/// relay's node sum listed after its block's compute, no WG waits for one that waits for it.
std::vector<int> relay_destination_order(const Topology& topo, bool remote_first);

/// Every other rank once, in the order their tiles are expected to arrive under the rotated
/// destination order: rank - 1 first (its first destination is this rank), then rank - 2, ...
std::vector<int> source_order(const Topology& topo);

/// The fewest rows a tile exchanged inside one node needs to pay for its fixed cost: a row's work
/// is `bytes_per_row` of memory traffic and `fmas_per_row` multiply-adds, costed at a core's
/// streaming and FMA rates (kNodeStreamBytesPerUs, kNodeFmasPerUs below), and the tile must last
/// kMinNodeTileUs. A tile's fixed cost on a node — its task, its flag, the consumer's wait — is
/// ~2 us here. Below it the fused modes lost to sequential on thin, short calls: GemmAllToAll at
/// K = 1, N = 256 in 32-row tiles (33 KiB each) ran 1.08x sequential's time on one node, in 128-
/// and 256-row tiles 0.83x; a 1 MiB GEMV AllReduce at K = 1 in 1024-row blocks 1.06x, in 8192-
/// 32768-row blocks 0.96x. Larger floors cost balance: at 25 us the MoE example's 32-row tiles (K
/// = N = 128, 16 us each) became 64-row ones and both modes ran ~10 % slower (docs/ops.md, "Tiles
/// that pay for themselves on a node"). At least 1.
std::size_t min_node_tile_rows(double bytes_per_row, double fmas_per_row);
inline constexpr double kMinNodeTileUs = 12.0;
inline constexpr double kNodeStreamBytesPerUs = 10000.0;  // 10 GB/s: one core, cold memory
inline constexpr double kNodeFmasPerUs = 40000.0;         // 40 GFMA/s: the packed fp32 kernels

/// The most bytes a tile sent to another node carries by default: below Open MPI's 64 KiB TCP
/// eager limit with its headers, so the send completes into the socket without a rendezvous that
/// waits for the receiver's MPI progress. EmbeddingAllToAll's 64 KiB tiles (256 bags of dim 64)
/// at 4 emulated nodes x 1 rank, 1 Gbit/s, moved nothing until ~10 ms into a 14 ms compute (fused
/// 45 ms, sequential 43 ms); in 48 KiB tiles fused took 31 ms, the communication alone's time
/// (docs/ops.md, "Off-node tiles under the eager limit"). GemmReduceScatter's 256-row tiles of
/// N = 1024 (1 MiB) likewise: 12-row ones took fused from 97 to 61 ms at 4 emulated nodes.
inline constexpr std::size_t kOffNodeEagerBytes = std::size_t{48} << 10;
/// GemmAllToAll's off-node tiles take rows in steps of this many (it divides the 32-row tiles of
/// the node, so a tile's flags stay at 16-row granularity at most).
inline constexpr std::size_t kOffNodeRowStep = 16;
/// The most rows of `row_bytes` each that fit in kOffNodeEagerBytes; at least 1.
inline std::size_t eager_rows(std::size_t row_bytes) {
  return std::max<std::size_t>(1, kOffNodeEagerBytes / std::max<std::size_t>(1, row_bytes));
}

}  // namespace tilecomm::detail
