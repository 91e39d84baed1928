#pragma once
// Private state of GemmAllToAll: its routing, memory layout and tiles on top of the operator
// framework (ops/common/). Set-up, the GEMM tile and the unfused modes are in gemm_alltoall.cpp,
// the per-call routing checks and headers in gemm_alltoall_routing.cpp, the fused kernel in
// gemm_alltoall_fused.cpp, the whole layer (run_layer: dispatch too) in gemm_alltoall_layer.cpp.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/common/block_exchange.hpp"
#include "ops/common/op_context.hpp"
#include "ops/kernels/gemm.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/gemm_alltoall.hpp"

namespace tilecomm::detail {

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

struct GemmAllToAllImpl {
  GemmAllToAllImpl(Communicator& comm, Device& device, std::size_t experts, std::size_t k,
                   std::size_t n, std::size_t max_in, std::size_t max_out, OpOptions options);

  std::size_t experts_of(int r) const { return first_expert[r + 1] - first_expert[r]; }
  std::size_t experts() const { return first_expert.back(); }
  /// Local checks (arguments: Error(InvalidArgument); counts that cannot pair up with a peer's
  /// capacity or with this rank's own experts: Error(Mismatch)); in verify mode first the
  /// collective routing exchange and cross-check, which raises the same error on every rank. Sets
  /// `route`.
  /// `layer`: a run_layer call (x is the caller's tokens; also checks the rows routed to every
  /// owner against its max_rows_in; x_row is source-major, for x_in).
  /// `mode`: the call's (y may be output() only in Mode::Fused).
  void prepare(std::span<const float* const> weights, const float* x,
               std::span<const std::size_t> recv_counts, std::span<const std::size_t> send_counts,
               const float* y, Mode mode, bool check_y = true, bool layer = false);
  /// First row of global expert g's results in this rank's y.
  std::size_t y_row(std::size_t g) const { return route.y_row[g]; }
  /// Fused: the slot of owner `owner_local`'s blocks in on-node rank `local`'s inbox half (floats).
  std::size_t slot_offset(int owner_local, int local) const {
    const int l = topo.local_size;
    return static_cast<std::size_t>((owner_local - local + l) % l - 1) * slot_rows * n;
  }
  /// Fused: the per-call header this rank sends `peer` (PeerHeaders::fill), and the check of the
  /// one `peer` sent (PeerHeaders::check: Error(Mismatch) naming both ranks and both counts).
  void fill_header(int peer, std::uint64_t* words) const;
  void check_header(int peer, const std::uint64_t* words) const;
  /// Flag index (and MPI tag) of the result tile of global expert g at (row in expert, column).
  /// (Tiles start at multiples of off_rows or node_rows, themselves multiples of flag_rows.)
  std::size_t flag_of(std::size_t g, std::size_t row, std::size_t col) const {
    return (g * max_row_blocks + row / flag_rows) * col_blocks + col / tile_cols;
  }
  std::vector<GemmTile> make_tiles(std::size_t e0, std::size_t e1, bool remote_first) const;
  /// The tiles of experts [e0, e1), source by source in `sources`' order.
  std::vector<GemmTile> make_tiles(std::size_t e0, std::size_t e1,
                                   std::span<const int> sources) const;
  /// Every mode's first step: packs the weights of the local experts that received rows into
  /// `packed` (tasks of kPackPanels panels of one expert on every CU, waited for); forgets
  /// set_weights()' packing. With `all`, every local expert (set_weights()).
  void pack_weights(std::span<const float* const> weights, bool all = false);
  /// A call's validation and weights: `weights` empty = set_weights()' packing (an error in
  /// local_error when there is none).
  void prepare_call(std::span<const float* const> weights, const float* x,
                    std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> send_counts, const float* y, Mode mode,
                    bool layer);
  /// The zero-copy output view of the next fused call (GemmAllToAll::output()): this rank's inbox
  /// half of that call, max_rows_out x N floats of it.
  float* next_output() const { return fused_exchange.next_output(); }
  std::size_t output_floats() const { return max_out * n; }
  /// Whether a fused call into `y` is zero-copy (BlockExchange::zero_copy).
  bool zero_copy(const float* y) const { return fused_exchange.zero_copy(y, output_floats()); }
  /// Y[tile] = X[tile rows] * W_e[:, tile cols] into dst (leading dimension ldc), from `packed`.
  void gemm_tile(const float* x, const GemmTile& t, float* dst, std::size_t ldc) const;
  /// gemm_tile into the send buffer of the unfused modes (grouped by source rank, then expert).
  void gemm_to_send(const float* x, const GemmTile& t);
  /// All-to-Allv of chunk c of nc (part c of every owner's experts) from the send buffer into y.
  void exchange(float* y, std::size_t c, std::size_t nc);

  void run_sequential(const float* x, float* y);
  void run_shaped(const float* x, float* y);
  void run_fused(const float* x, float* y);
  /// Fused: where tile t's result goes (this rank's y, an on-node source's inbox slot, or
  /// off-node).
  BlockRoute result_route(const GemmTile& t) const;
  /// Fused: the result blocks this rank's y receives from every owner, in the rotated source
  /// order (run() and run_layer()).
  std::vector<BlockRoute> result_arrivals() const;

  // ---- run_layer (gemm_alltoall_layer.cpp) ----
  /// Unfused modes: the dispatch All-to-Allv of the caller's tokens into x_in (source-major).
  void dispatch_tokens(const float* tokens);
  /// Fused: dispatch, GEMM tiles as their rows arrive, return — one persistent kernel.
  void run_fused_layer(const float* tokens, float* y);
  /// Fused run_layer: where source s's rows for owner o start in o's input half (floats).
  std::size_t input_slot(int owner, int src) const;
  /// Fused run_layer: the input flag of source s's rows [r * flag_rows, (r + 1) * flag_rows) for
  /// local expert e of the owner (one per GEMM row tile: each tile awaits exactly its rows).
  std::size_t input_flag(int src, std::size_t e, std::size_t r) const {
    return (src * most_experts + e) * std::max<std::size_t>(max_row_blocks, 1) + r;
  }

  OpContext ctx;
  const Topology& topo;
  std::size_t local_experts, k, n, max_in, max_out;
  std::size_t max_out_all = 0;          // the largest max_rows_out of any rank (sizes the flags)
  std::vector<std::size_t> max_out_of;  // per rank: its max_rows_out
  std::vector<std::size_t> max_in_of;   // per rank: its max_rows_in
  std::size_t most_experts = 0;         // the most experts of a rank
  std::size_t tile_rows = 0, tile_cols = 0, col_blocks = 0, max_row_blocks = 0;
  std::size_t off_rows = 0;   // rows of a tile to or from another node
  std::size_t node_rows = 0;  // rows of a tile within the node: a multiple of tile_rows
  std::size_t flag_rows = 0;  // rows per flag (and MPI tag): gcd(off_rows, node_rows)
  /// Rows per tile between this rank and `peer` (the same on both sides of the pair).
  std::size_t row_step(int peer) const { return topo.on_node(peer) ? node_rows : off_rows; }
  /// The row tiles of `rows` rows exchanged with `peer`: f(first row, rows in the tile). Every
  /// tiling of a pair (result tiles, their arrivals, run_layer's dispatch blocks) walks this, so
  /// both sides of the pair cut the same tiles.
  template <class F>
  void for_row_tiles(int peer, std::size_t rows, F&& f) const {
    const std::size_t step = row_step(peer);
    for (std::size_t r = 0; r < rows; r += step)
      f(r, std::min(rows, r + step) - r);
  }
  std::vector<std::size_t> first_expert;  // per rank prefix; [p] = experts in the job
  Routing route;
  std::vector<float> send_buf;    // unfused modes: results grouped by source rank, then expert
  std::vector<float> x_in;        // run_layer's unfused modes: the dispatched rows (on first use)
  kernels::PackedWeights packed;  // this call's weights, packed by pack_weights
  bool weights_set = false;       // `packed` holds every local expert, from set_weights()
  // Fused: flags [experts x max_row_blocks x col_blocks]; per inbox half one slot of slot_rows x N
  // per other on-node rank, holding the blocks that owner returns here in the owner's order
  // (pair_row), since an owner does not know where they go in this rank's y, and at least the
  // largest max_rows_out x N floats (a half is the zero-copy output of its calls, output());
  // headers of 2 x the most experts of a rank words (+ the exchange's zero-copy word).
  std::size_t slot_rows = 0;
  BlockExchange fused_exchange;
  PeerHeaders headers;

 private:
  std::string local_error(std::span<const float* const> weights, const float* x,
                          std::span<const std::size_t> recv_counts,
                          std::span<const std::size_t> send_counts, const float* y, Mode mode,
                          bool check_y, bool layer) const;
  // Verify mode: the routing allgather; every rank raises the same error.
  void agree_routing(const std::string& error, std::span<const std::size_t> recv_counts,
                     std::span<const std::size_t> send_counts) const;
  void check_routing(const std::vector<unsigned long long>& all, std::size_t stride) const;
  // Mismatches this rank can see alone: its own experts' rows from itself, a peer's capacity.
  void check_local_routing(std::span<const std::size_t> recv_counts,
                           std::span<const std::size_t> send_counts, bool layer) const;
  void derive_routing(std::span<const std::size_t> recv_counts,
                      std::span<const std::size_t> send_counts, bool layer);
};

/// Error(Mismatch): "GemmAllToAll: rank <source> routes <sent> rows to expert <g> (on rank
/// <owner>), which expects <expected> rows from it".
Error routing_mismatch(int source, std::size_t sent, std::size_t g, int owner,
                       std::size_t expected);

}  // namespace tilecomm::detail
