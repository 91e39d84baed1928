#pragma once
// Private state of GemmReduceScatter: its row blocks and memory layout on top of the operator
// framework (ops/common/). Everything is in gemm_reduce_scatter.cpp; the fused kernel in
// gemm_reduce_scatter_fused.cpp.

#include <vector>

#include "ops/common/fused_plan.hpp"
#include "ops/common/op_context.hpp"
#include "ops/kernels/gemm.hpp"
#include "tilecomm/gemm_reduce_scatter.hpp"

namespace tilecomm::detail {

/// A tile of the unfused modes: rows [row0, row1) of owner rank `owner`'s slice (local rows).
struct RowTile {
  int owner;
  std::size_t row0, row1;
};

struct GemmReduceScatterImpl {
  GemmReduceScatterImpl(Communicator& comm, Device& device, std::size_t m, std::size_t k,
                        std::size_t n, OpOptions options);

  // Block i of every slice: local rows [block_row0(i), block_row0(i + 1)).
  std::size_t block_row0(std::size_t i) const { return std::min(rows_local, i * tile); }
  std::size_t block_rows(std::size_t i) const { return block_row0(i + 1) - block_row0(i); }
  // Every mode's first step unless set_weights() packed W already: W into `packed` (tasks of 16
  // panels on every CU, waited for). `kept`: from set_weights(), for the calls without w.
  void pack_weights(const float* w, bool kept = false);
  // dst[rows x N] (row stride ldc) = A[global rows row0 .. row0 + rows) x W (from `packed`).
  void gemm_rows(const float* a, std::size_t row0, std::size_t rows, float* dst,
                 std::size_t ldc) const;
  // `w` null with K_local > 0 is allowed only after set_weights() (`packed_w`: a call without w).
  void validate(const float* a, const float* w, const float* y, bool check_y = true,
                bool packed_w = false) const;

  // Unfused modes: chunk c = local rows [chunk_row0(c), chunk_row0(c + 1)) of every slice, laid
  // out chunk by chunk in `partial` as [owner][rows of the chunk][N], so each chunk's
  // ReduceScatter reads one contiguous buffer.
  std::size_t chunk_row0(std::size_t c, std::size_t chunks) const;
  std::vector<RowTile> chunk_tiles(std::size_t c, std::size_t chunks) const;
  void compute_chunk_tile(const float* a, std::size_t c, std::size_t chunks, const RowTile& t);
  void reduce_scatter_chunk(float* y, std::size_t c, std::size_t chunks);
  void run_unfused(const float* a, float* y, std::size_t chunks, bool shaped);
  void run_fused(const float* a, float* y);  // gemm_reduce_scatter_fused.cpp
  // GemmReduceScatter::run: `packed_w` = the call without w (set_weights()).
  void run(const float* a, const float* w, float* y, Mode mode, bool packed_w);

  OpContext ctx;
  const Topology& topo;
  std::size_t m, k, n, rows_local = 0, tile = 0, blocks = 0;
  std::vector<float> partial;     // unfused modes: this rank's A_r W_r, chunk-major
  kernels::PackedWeights packed;  // this call's W, packed by pack_weights
  bool weights_set = false;       // `packed` holds W from set_weights()

  // ---- fused ----
  // Segment of each on-node rank: flags [p * blocks] (index s * blocks + i: rank s's partial of
  // block i arrived), then partials[2][p][rows_local x N] (slot s: rank s's partial of this rank's
  // rows). Parity = epoch & 1 double-buffers consecutive calls.
  std::size_t partials_offset = 0;
  std::vector<TileFlags> partial_flags;
  float* partials(int local, int parity, int src) const {
    return ctx.region(local, partials_offset) +
           (static_cast<std::size_t>(parity) * topo.size + src) * rows_local * n;
  }
  // Node sums (relays_partials, ops/common/plan_layout.hpp): then also, in each on-node rank's
  // segment, relay flags [relay_slots * local_size * blocks] (index (j * local_size + l) * blocks +
  // i: local rank l's partial of block i of the relay's j-th relayed owner arrived), then relay
  // partials [2][relay_slots][local_size][rows_local x N]. relay_slot[q]: the slot an off-node
  // owner q has in its relay's segment (node_relay; -1 for on-node owners).
  std::size_t relay_offset = 0, relay_slots = 0;
  std::vector<TileFlags> relay_flags;
  std::vector<int> relay_slot;
  float* relay_partials(int local, int parity, int slot, int src_local) const {
    const std::size_t l = static_cast<std::size_t>(topo.local_size);
    return ctx.region(local, relay_offset) +
           ((parity * relay_slots + slot) * l + src_local) * rows_local * n;
  }
  std::size_t relay_flag(int slot, int src_local, std::size_t i) const {
    return (static_cast<std::size_t>(slot) * topo.local_size + src_local) * blocks + i;
  }
};

}  // namespace tilecomm::detail
