#pragma once
// GemmAllToAll's tiling rules and its plan of one call -- the tiles, where each result goes and
// what each rank receives -- pure (no communicator), so that the model and the simulator
// (ops/model/sim_gemm_alltoall.cpp) plan with the operator's own code.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "collectives/topology.hpp"
#include "ops/common/block_route.hpp"
#include "ops/common/plan_layout.hpp"

namespace tilecomm::detail {

/// Words of the per-call header a pair of ranks exchanges (fill_header: a count per expert either
/// rank owns, each way), for ranks of at most `most_experts` experts; BlockExchange adds its
/// zero-copy word.
inline std::size_t gemm_alltoall_header_words(std::size_t most_experts) {
  return 2 * most_experts;
}

/// Rows of a GEMM row tile unless OpOptions::tile says otherwise.
inline constexpr std::size_t kGemmAllToAllTileRows = 32;

/// Rows of a result tile between ranks of one node (this rank included) for a K x N expert GEMM
/// in tiles of `tile_rows` x min(N, 256): the fewest whole row tiles, up to 16, whose GEMM (per
/// row: K x columns multiply-adds, K floats of X read and the columns' results stored) pays for the
/// tile's fixed cost (min_node_tile_rows). K = 1, N = 256: 128 rows; K = N = 128:
/// `tile_rows`.
inline std::size_t gemm_alltoall_node_rows(std::size_t k, std::size_t n, std::size_t tile_rows) {
  const std::size_t cols = std::min<std::size_t>(n, 256);
  const std::size_t paying = min_node_tile_rows(double(k + cols) * sizeof(float), double(k) * cols);
  const std::size_t tiles = (paying + tile_rows - 1) / tile_rows;
  return tile_rows * std::clamp<std::size_t>(tiles, 1, 16);
}

/// Rows of a result tile bound for (or coming from) another node, for N columns: the most rows,
/// in steps of kOffNodeRowStep, whose results (min(N, 256) columns) fit in kOffNodeEagerBytes, so
/// narrow results do not go out as many small MPI messages. N >= 256: 48 rows (48 KiB).
inline std::size_t gemm_alltoall_off_rows(std::size_t n) {
  const std::size_t row_bytes = std::min<std::size_t>(n, 256) * sizeof(float);
  return std::max(kOffNodeRowStep, eager_rows(row_bytes) / kOffNodeRowStep * kOffNodeRowStep);
}

/// The rows rank `src` routes to each of `experts` experts in fused_perf's synthetic MoE call
/// (bench/fused/op_bench.cpp, without top-k): `tokens` rows split unevenly by a fixed pattern of
/// weights 1-5 that every rank can compute for every rank. The simulator plans those calls with
/// it.
inline std::vector<std::size_t> synthetic_moe_routing(std::size_t tokens, int src,
                                                      std::size_t experts) {
  auto weight = [&](std::size_t h) { return 1 + (static_cast<std::size_t>(src) * 7 + h * 3) % 5; };
  std::vector<std::size_t> rows(experts, 0);
  std::size_t total = 0, before = 0;
  for (std::size_t h = 0; h < experts; ++h)
    total += weight(h);
  for (std::size_t g = 0; g < experts; before += weight(g), ++g)
    rows[g] = (tokens * (before + weight(g))) / total - (tokens * before) / total;
  return rows;
}

/// A tile: local expert `expert`, source rank `src` (where its tokens came from and its results
/// go), rows [row0, row1) of block (expert, src), columns [col0, col1).
struct GemmTile {
  std::size_t expert;
  int src;
  std::size_t row0, row1, col0, col1;
};

/// The routing of one call, from this rank's own counts only (no communication).
struct Routing {
  std::vector<std::size_t> send_counts;  // [g]: rows this rank routed to global expert g
  std::vector<std::size_t> recv_counts;  // [e * p + s]: rows local expert e received from s
  std::vector<std::size_t> x_row;        // [e * p + s]: first row of block (e, s) in x (run_layer:
                                         // in x_in, source-major); [E p]: total
  std::vector<std::size_t> send_row;  // [s * E + e]: first row of block (e, s) in the send buffer
  std::vector<std::size_t> y_row;     // [g]: first row of expert g's results in y; [G]: total
  std::vector<std::size_t> pair_row;  // [e * p + s]: first row of block (e, s) among the rows
                                      // this rank's experts return to s (e's of s before it)
  std::size_t rows_in = 0;            // rows my experts received
  std::size_t rows_out = 0;           // rows I routed out
};

/// One rank's plan of GemmAllToAll calls: the job's tiling (the same on every rank) and, per call,
/// its routing. The operator (GemmAllToAllImpl) is one; the simulator builds one per simulated
/// rank.
struct GemmAllToAllPlan {
  GemmAllToAllPlan(std::size_t local_experts_, std::size_t n_)
      : local_experts(local_experts_), n(n_) {}

  /// The tiles' rows and columns for K x N experts (`tile`: OpOptions::tile, 0 = the rules
  /// above).
  void set_tiling(std::size_t k, std::size_t tile);
  /// The flags' row blocks for results of up to `max_out_all` rows per rank (after set_tiling).
  void set_max_rows_out(std::size_t max_out_all) {
    max_row_blocks = (max_out_all + flag_rows - 1) / flag_rows;
  }
  /// The call's routing from this rank's counts (recv_counts [e * p + s], send_counts [g]).
  /// `layer`: run_layer's (x_row is source-major, for x_in).
  void derive_routing(std::span<const std::size_t> recv_counts,
                      std::span<const std::size_t> send_counts, bool layer);

  std::size_t experts_of(int r) const { return first_expert[r + 1] - first_expert[r]; }
  std::size_t experts() const { return first_expert.back(); }
  /// First row of global expert g's results in this rank's y.
  std::size_t y_row(std::size_t g) const { return route.y_row[g]; }
  /// Fused: the slot of owner `owner_local`'s blocks in on-node rank `local`'s inbox half (floats).
  std::size_t slot_offset(int owner_local, int local) const {
    const int l = topology->local_size;
    return static_cast<std::size_t>((owner_local - local + l) % l - 1) * slot_rows * n;
  }
  /// Flag index (and MPI tag) of the result tile of global expert g at (row in expert, column).
  /// (Tiles start at multiples of off_rows or node_rows, themselves multiples of flag_rows.)
  std::size_t flag_of(std::size_t g, std::size_t row, std::size_t col) const {
    return (g * max_row_blocks + row / flag_rows) * col_blocks + col / tile_cols;
  }
  /// Rows per tile between this rank and `peer` (the same on both sides of the pair).
  std::size_t row_step(int peer) const { return topology->on_node(peer) ? node_rows : off_rows; }
  /// The row tiles of `rows` rows exchanged with `peer`: f(first row, rows in the tile). Every
  /// tiling of a pair (result tiles, their arrivals, run_layer's dispatch blocks) walks this, so
  /// both sides of the pair cut the same tiles.
  template <class F>
  void for_row_tiles(int peer, std::size_t rows, F&& f) const {
    const std::size_t step = row_step(peer);
    for (std::size_t r = 0; r < rows; r += step)
      f(r, std::min(rows, r + step) - r);
  }
  /// The tiles of experts [e0, e1), source by source in `sources`' order.
  std::vector<GemmTile> make_tiles(std::size_t e0, std::size_t e1,
                                   std::span<const int> sources) const;
  /// Fused: where tile t's result goes (this rank's y, an on-node source's inbox slot, or
  /// off-node).
  BlockRoute result_route(const GemmTile& t) const;
  /// Fused: the result blocks this rank's y receives from every owner, owners in `owners`' order.
  std::vector<BlockRoute> result_arrivals(std::span<const int> owners) const;

  const Topology* topology = nullptr;
  std::size_t local_experts, n;
  std::size_t tile_rows = 0, tile_cols = 0, col_blocks = 0, max_row_blocks = 0;
  std::size_t off_rows = 0;   // rows of a tile to or from another node
  std::size_t node_rows = 0;  // rows of a tile within the node: a multiple of tile_rows
  std::size_t flag_rows = 0;  // rows per flag (and MPI tag): gcd(off_rows, node_rows)
  /// Fused: rows of one owner's slot in an inbox half (the operator's capacities; 0 in a plan
  /// that never stores into an inbox).
  std::size_t slot_rows = 0;
  std::vector<std::size_t> first_expert;  // per rank prefix; [p] = experts in the job
  Routing route;
};

}  // namespace tilecomm::detail
