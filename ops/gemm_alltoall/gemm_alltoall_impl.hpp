#pragma once
// Private state of GemmAllToAll: its plan (tiling, routing, tiles and where they go:
// gemm_alltoall_plan.{hpp,cpp}, which the simulator shares), memory layout and buffers on top of
// the operator framework (ops/common/). Set-up, the GEMM tile and the unfused modes are in
// gemm_alltoall.cpp, the per-call routing checks and headers in gemm_alltoall_routing.cpp, the
// fused kernel in gemm_alltoall_fused.cpp, the whole layer (run_layer: dispatch too) in
// gemm_alltoall_layer.cpp.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/common/block_exchange.hpp"
#include "ops/common/op_context.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/kernels/gemm.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/gemm_alltoall.hpp"

namespace tilecomm::detail {

/// The operator: its plan (the tiling and a call's routing, gemm_alltoall_plan.hpp), its context
/// and buffers.
struct GemmAllToAllImpl : GemmAllToAllPlan {
  GemmAllToAllImpl(Communicator& comm, Device& device, std::size_t experts, std::size_t k,
                   std::size_t n, std::size_t max_in, std::size_t max_out, OpOptions options);

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
  /// Fused: the per-call header this rank sends `peer` (PeerHeaders::fill), and the check of the
  /// one `peer` sent (PeerHeaders::check: Error(Mismatch) naming both ranks and both counts).
  void fill_header(int peer, std::uint64_t* words) const;
  void check_header(int peer, const std::uint64_t* words) const;
  using GemmAllToAllPlan::make_tiles;
  /// The tiles of experts [e0, e1), sources in destination_order(remote_first).
  std::vector<GemmTile> make_tiles(std::size_t e0, std::size_t e1, bool remote_first) const;
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
  using GemmAllToAllPlan::result_arrivals;
  /// Fused: the result blocks this rank's y receives from every owner, in the rotated source
  /// order (run() and run_layer()).
  std::vector<BlockRoute> result_arrivals() const { return result_arrivals(ctx.source_order()); }

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
  std::size_t k, max_in, max_out;
  std::size_t max_out_all = 0;          // the largest max_rows_out of any rank (sizes the flags)
  std::vector<std::size_t> max_out_of;  // per rank: its max_rows_out
  std::vector<std::size_t> max_in_of;   // per rank: its max_rows_in
  std::size_t most_experts = 0;         // the most experts of a rank
  std::vector<float> send_buf;    // unfused modes: results grouped by source rank, then expert
  std::vector<float> x_in;        // run_layer's unfused modes: the dispatched rows (on first use)
  kernels::PackedWeights packed;  // this call's weights, packed by pack_weights
  bool weights_set = false;       // `packed` holds every local expert, from set_weights()
  // Fused: flags [experts x max_row_blocks x col_blocks]; per inbox half one slot of slot_rows x N
  // per other on-node rank, holding the blocks that owner returns here in the owner's order
  // (pair_row), since an owner does not know where they go in this rank's y, and at least the
  // largest max_rows_out x N floats (a half is the zero-copy output of its calls, output());
  // headers of 2 x the most experts of a rank words (+ the exchange's zero-copy word).
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
};

/// Error(Mismatch): "GemmAllToAll: rank <source> routes <sent> rows to expert <g> (on rank
/// <owner>), which expects <expected> rows from it".
Error routing_mismatch(int source, std::size_t sent, std::size_t g, int owner,
                       std::size_t expected);

}  // namespace tilecomm::detail
