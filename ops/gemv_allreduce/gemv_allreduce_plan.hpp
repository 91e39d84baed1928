#pragma once
// The planning half of GemvAllReduce's fused kernels: its row blocks, who owns or leads each, its
// default tile, and the task order of the two-shot (gemv_allreduce_fused.cpp) and one-shot
// (gemv_allreduce_one_shot.cpp) kernels. Pure functions of the shape and the layout, no MPI and
// no device: the real call and the simulator (ops/model/sim_ops.cpp) plan with the same code.
#include <cstddef>
#include <vector>

#include "collectives/topology.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm::detail {

/// Row blocks of M rows of n vectors, `tile` rows each, split into `ranks` contiguous ranges of
/// blocks: rank o owns (two-shot: reduces) [first_block(o), first_block(o + 1)).
struct GemvBlocks {
  std::size_t m = 0, n = 1, tile = 1, blocks = 0;
  int ranks = 1;
  GemvBlocks() = default;
  GemvBlocks(std::size_t m_, std::size_t n_, std::size_t tile_, int ranks_)
      : m(m_), n(n_), tile(tile_), blocks((m_ + tile_ - 1) / tile_), ranks(ranks_) {}
  std::size_t row0(std::size_t b) const { return b * tile < m ? b * tile : m; }
  std::size_t rows(std::size_t b) const { return row0(b + 1) - row0(b); }
  std::size_t elem0(std::size_t b) const { return row0(b) * n; }
  std::size_t elems(std::size_t b) const { return rows(b) * n; }
  std::size_t first_block(int o) const;
  int owner(std::size_t b) const;
};

/// Task kinds; a task id is kind * blocks + block. NodeSum: two-shot across nodes of several
/// ranks, on the owner's relay (node_relay): the node's partials of an off-node block, added and
/// sent to its owner.
enum class GemvTwoShotTask : std::size_t { Compute, Reduce, Gather, NodeSum };
enum class GemvOneShotTask : std::size_t { Compute, NodeReduce, Final };

/// FusedAlgorithm::Auto resolved for a payload of `payload_bytes` (M x n floats) on `nodes` nodes:
/// on one node one-shot up to 256 KiB; on two nodes one-shot at every size; across more than
/// two nodes one-shot only while the payload is at most 256 KiB and (nodes - 1) x payload at most
/// 48 KiB; two-shot otherwise.
FusedAlgorithm gemv_fused_algorithm(FusedAlgorithm requested, std::size_t payload_bytes, int nodes);
/// The off-node path one-shot blocks are cut for: the link's bytes per microsecond and the CPU
/// microseconds each MPI message costs its sender and receiver. The defaults stand in until a
/// calibrated profile gives both (model::off_node_path): a 1 Gbit/s link and ~25 us per Open MPI
/// TCP message (traced at 2 emulated nodes x 1 rank: 13-25 us from a block's store to its
/// MPI_Isend's return on the sender alone). With 10 us, decode's 16 KiB up-projection took 4
/// blocks at 1 Gbit/s, and fused was 11-19 % slower than sequential; with 2 blocks 4-6 %
/// (docs/ops.md, the latency path).
struct OffNodePath {
  double bytes_per_us = 125.0;
  double message_us = 25.0;
};

/// The default tile (rows) of an M x k_local GEMV on n vectors for `algorithm` (resolved) on
/// `wg_slots` WG slots per rank, `ranks` ranks, across nodes or not, one-shot blocks cut for
/// `path` (the constructor's rule; then the smallest across ranks).
std::size_t gemv_default_tile(std::size_t m, std::size_t k, std::size_t n, FusedAlgorithm algorithm,
                              std::size_t wg_slots, int ranks, bool spans_nodes,
                              const OffNodePath& path = {});

/// Two-shot task order of rank topo.rank: with `remote_first`, other owners' blocks first
/// (destination_order), each of mine followed by its reduce; else computes, then reduces; then
/// the gathers of blocks owned elsewhere. With node sums (relays_partials), owners in
/// relay_destination_order and each node sum one compute after its block's compute.
std::vector<std::size_t> gemv_two_shot_order(const Topology& topo, const GemvBlocks& g,
                                             bool remote_first);
/// One-shot: node n's rank that sums block b and sends it off-node.
int gemv_leader(const Topology& topo, int node, std::size_t b);
/// One-shot task order: computes 0 .. B-1, each node reduce `lag` computes after its block (when
/// the job spans nodes and this node has several ranks), then one Final task (block 0's id).
std::vector<std::size_t> gemv_one_shot_order(const Topology& topo, const GemvBlocks& g,
                                             std::size_t lag);

}  // namespace tilecomm::detail
