#pragma once
/// \file bench_hooks.hpp
/// The two halves of an operator's sequential mode, run alone, so a benchmark can state what the
/// compute and the collective cost by themselves (bench/fused/fused_perf). Not part of the
/// operators' API for applications: run() is. Each hook is collective where the half it runs is.

#include <cstddef>
#include <span>

#include "tilecomm/embedding_alltoall.hpp"
#include "tilecomm/gemm_alltoall.hpp"
#include "tilecomm/gemm_reduce_scatter.hpp"
#include "tilecomm/gemv_allreduce.hpp"

namespace tilecomm {

namespace detail {
/// Gives the hooks the operator's private state.
struct BenchAccess {
  template <class Op>
  static auto& impl(Op& op) {
    return *op.impl_;
  }
};
}  // namespace detail

namespace bench {

/// GEMV: partial = W_r X_r ([M x batch]), the compute kernel of sequential mode (local).
void compute_only(GemvAllReduce& op, const float* w, const float* x, float* partial);
/// The same with bfloat16 weights.
void compute_only(GemvAllReduce& op, const bfloat16* w, const float* x, float* partial);
/// GEMV: y = AllReduce(partial), the collective of sequential mode.
void collective_only(GemvAllReduce& op, const float* partial, float* y);

/// Embedding: the pooling kernel of sequential mode into its per-destination send buffer of
/// send_elems(op) floats (collective in verify mode only: the per-call argument agreement).
void compute_only(EmbeddingAllToAll& op, std::span<const float* const> tables,
                  std::span<const EmbeddingBags> bags, float* send);
/// Embedding: the All-to-Allv and reshape of sequential mode from `send` into `out`.
void collective_only(EmbeddingAllToAll& op, const float* send, float* out);
/// Embedding: floats in the send buffer compute_only() fills.
std::size_t send_elems(const EmbeddingAllToAll& op);

/// MoE: the expert GEMMs of sequential mode into the context's send buffer (collective: the
/// per-call routing exchange in verify mode only). Empty `weights`: set_weights()' packing.
void compute_only(GemmAllToAll& op, std::span<const float* const> weights, const float* x,
                  std::span<const std::size_t> recv_counts,
                  std::span<const std::size_t> send_counts);
/// MoE: the All-to-Allv of sequential mode, from the send buffer and routing of the last
/// compute_only() call (the routing of the last call of any kind). Error(InvalidUsage) before the
/// context's first compute_only() or run().
void collective_only(GemmAllToAll& op, float* y);

/// MoE: bytes of this rank's shared memory for run_layer's dispatch inputs (every peer's rows):
/// 0 until the context's first fused run_layer call maps them.
std::size_t layer_input_bytes(GemmAllToAll& op);

/// GEMM+ReduceScatter: A_r W_r, the compute kernel of sequential mode, into the context's buffer
/// (local). `w` null: the weights packed by set_weights() (no packing in the timed call).
void compute_only(GemmReduceScatter& op, const float* a, const float* w);
/// GEMM+ReduceScatter: the ReduceScatter of sequential mode from that buffer into y.
void collective_only(GemmReduceScatter& op, float* y);

}  // namespace bench
}  // namespace tilecomm
