#pragma once
// Private state of GemvAllReduce: its row blocks and memory layout on top of the operator framework
// (ops/common/). Set-up and the unfused modes are in gemv_allreduce.cpp, the fused kernel in
// gemv_allreduce_fused.cpp.

#include <cstdint>
#include <vector>

#include "ops/common/fused_plan.hpp"
#include "ops/common/op_context.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"
#include "tilecomm/gemv_allreduce.hpp"

namespace tilecomm::detail {

/// W of one call: float32 or bfloat16 (bits), exactly one non-null unless W is empty.
struct GemvWeights {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
  const void* data() const { return bf16 ? static_cast<const void*>(bf16) : f32; }
  std::size_t element_bytes() const { return bf16 ? 2 : 4; }
};

struct GemvAllReduceImpl {
  GemvAllReduceImpl(Communicator& comm, Device& device, std::size_t m, std::size_t k, std::size_t n,
                    OpOptions options);

  // Row block b: rows [row0(b), row0(b + 1)); in Y (and every buffer laid out like it: partials,
  // reduced, staging) the floats [elem0(b), elem0(b) + elems(b)), as a row of Y holds n floats.
  std::size_t row0(std::size_t b) const { return std::min(m, b * tile); }
  std::size_t rows(std::size_t b) const { return row0(b + 1) - row0(b); }
  std::size_t elem0(std::size_t b) const { return row0(b) * n; }
  std::size_t elems(std::size_t b) const { return rows(b) * n; }
  // Blocks are split into p contiguous ranges; rank o owns (reduces) [first_block(o),
  // first_block(o+1)).
  std::size_t first_block(int o) const;
  int owner(std::size_t b) const;
  /// The blocks as the planners (gemv_allreduce_plan.hpp) see them.
  GemvBlocks grid() const { return GemvBlocks(m, n, tile, topo.size); }
  // out[0 .. elems(b)) = W[rows of b] * X ([rows(b) x n] row-major): fp32 by OpenBLAS sgemv
  // (n = 1) or sgemm (n > 1), bf16 by the dispatched kernels (ops/kernels/gemv.hpp: per column
  // for n < 4, the batched one from 4). Every mode computes each element the same way.
  void gemv_tile(GemvWeights w, const float* x, float* out, std::size_t b) const;
  void validate(GemvWeights w, const float* x, const float* y) const;
  void run(GemvWeights w, const float* x, float* y, Mode mode);

  void compute(GemvWeights w, const float* x, float* partial);  // the sequential compute kernel
  void run_sequential(GemvWeights w, const float* x, float* y);
  /// The unfused modes' AllReduce options: ReduceOrder::Canonical unless an algorithm is forced.
  CollectiveOptions collective_options() const;
  void run_shaped(GemvWeights w, const float* x, float* y);
  void run_fused(GemvWeights w, const float* x, float* y);     // gemv_allreduce_fused.cpp
  void run_one_shot(GemvWeights w, const float* x, float* y);  // gemv_allreduce_one_shot.cpp

  OpContext ctx;
  const Topology& topo;
  std::size_t m, k, n, tile = 0, blocks = 0;           // n: vectors per call (columns of X and Y)
  FusedAlgorithm algorithm = FusedAlgorithm::TwoShot;  // resolved: OneShot or TwoShot
  std::vector<float> partial;  // sequential and shaped: this rank's W_r X_r [M x n]

  // ---- fused ----
  // Segment of each on-node rank: flags, then partials[2][p][M x n], then reduced[2][M x n]. Parity
  // = epoch & 1 double-buffers consecutive calls. Two-shot: slot s of rank L holds rank s's partial
  // of the rows L owns; reduced holds L's reduced blocks. One-shot: slot L of rank L holds L's own
  // partial (its on-node peers read it there); for the blocks L leads, slot first(n) holds node n's
  // sum received from node n (first(n): node n's lowest rank, never on L's node) and reduced holds
  // L's node's sum.
  std::size_t partials_offset = 0, reduced_offset = 0;
  std::vector<TileFlags> partial_flags;  // per local rank: [p * blocks], index s * blocks + b
  std::vector<TileFlags> reduced_flags;  // per local rank: [blocks]
  TileFlags arrived_flags;               // mine: reduced block b arrived from an off-node owner

  float* partials(int local, int parity, int src) const {
    return ctx.region(local, partials_offset) +
           (static_cast<std::size_t>(parity) * topo.size + src) * m * n;
  }
  float* reduced(int local, int parity) const {
    return ctx.region(local, reduced_offset) + static_cast<std::size_t>(parity) * m * n;
  }
  // Two-shot node sums (relays_partials): then also relay flags [local_size * blocks] (index
  // l * blocks + b: local rank l's partial of block b, for the off-node owner this rank relays,
  // arrived) and relay partials [2][local_size][M x n]. A relay also receives its owners' reduced
  // blocks into its `reduced` (the proxy raises its reduced flag): its node's ranks copy them.
  std::size_t relay_offset = 0;
  std::vector<TileFlags> relay_flags;
  bool node_sums = false;
  float* relay_partials(int local, int parity, int src_local) const {
    return ctx.region(local, relay_offset) +
           (static_cast<std::size_t>(parity) * topo.local_size + src_local) * m * n;
  }

 private:
  void map_fused_segment();
  struct FusedCall;
  void plan_fused(FusedPlan& plan, FusedCall& call);
  void fused_compute(const WorkgroupContext& wg, const FusedCall& call, std::size_t b);
  void fused_reduce(const WorkgroupContext& wg, const FusedCall& call, std::size_t b);
  void fused_gather(const WorkgroupContext& wg, const FusedCall& call, std::size_t b);
  void fused_node_sum(const WorkgroupContext& wg, const FusedCall& call, std::size_t b);
  struct OneShotCall;
  void one_shot_compute(const WorkgroupContext& wg, const OneShotCall& call, std::size_t b);
  void one_shot_node_reduce(const WorkgroupContext& wg, const OneShotCall& call, std::size_t b);
  void one_shot_final(const WorkgroupContext& wg, const OneShotCall& call, std::size_t b);
  void one_shot_send(const WorkgroupContext& wg, const OneShotCall& call, const float* block,
                     std::size_t b);
  int leader(int node, std::size_t b) const;  // one-shot: node's rank that sums and sends block b
};

}  // namespace tilecomm::detail
