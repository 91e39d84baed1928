// GemvAllReduce: set-up, validation, and the unfused modes (sequential, shaped).
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/algorithm.hpp"
#include "ops/common/op_util.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"
#include "ops/kernels/gemv.hpp"
#include "tilecomm/bench_hooks.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {

constexpr OpInfo kInfo{"GemvAllReduce", "gemv_allreduce", {"m", "tile", "batch"}, true};

/// bf16 batches of at least this many vectors take the batched kernel (W read once, a broadcast
/// and an FMA per weight and group of 8 columns); smaller ones the one-vector kernel per column.
/// One core, 4096 x 2048 (docs/ops.md, "Several vectors per call"): batched 3.3-3.8 ms for any
/// n <= 8, per column 1.2-1.3 ms x n (n = 4: level; n = 8: 5.2-5.9 ms).
constexpr std::size_t kBf16BatchedFrom = 4;
}  // namespace

GemvAllReduceImpl::GemvAllReduceImpl(Communicator& comm, Device& device, std::size_t m_,
                                     std::size_t k_, std::size_t n_, OpOptions options)
    : ctx(comm, device, std::move(options), kInfo), topo(ctx.topo), m(m_), k(k_), n(n_) {
  const auto limit = static_cast<std::size_t>(INT32_MAX);
  if (m > limit) ctx.invalid(fmt::format("m = {} is too large (max {})", m, limit));
  if (k > limit) ctx.invalid(fmt::format("k_local = {} is too large (max {})", k, limit));
  if (n == 0 || n > limit) ctx.invalid(fmt::format("batch = {} is not in [1, {}]", n, limit));
  if (m * n > limit)
    ctx.invalid(fmt::format("m x batch = {} x {} is too large (max {})", m, n, limit));
  const std::size_t payload = m * n * sizeof(float);  // bytes each rank contributes
  // The algorithm and the default tile: gemv_allreduce_plan.cpp (the simulator plans with them).
  algorithm = gemv_fused_algorithm(ctx.options.fused_algorithm, payload, topo.num_nodes);
  tile = ctx.options.tile ? ctx.options.tile
                          : gemv_default_tile(m, k, n, algorithm, ctx.wg_slots(), topo.size,
                                              ctx.spans_nodes(), ctx.off_node_path());
  ctx.agree({"m", "batch", "shaped.chunks", "fused_algorithm", "auto_rounds", "auto_min_trial_us"},
            {static_cast<long long>(m), static_cast<long long>(n), ctx.options.shaped.chunks,
             static_cast<long long>(ctx.options.fused_algorithm), ctx.options.auto_rounds,
             ctx.auto_min_trial_us()});
  tile = ctx.min_across_ranks(tile);  // devices may differ in size; the tiling must not
  blocks = (m + tile - 1) / tile;
  // Fused tags across nodes: a block (partial) and blocks + block (reduced).
  if (ctx.spans_nodes() && 2 * blocks > ctx.tag_upper_bound())
    ctx.invalid(fmt::format("tile = {} gives {} row blocks: more than MPI_TAG_UB = {} / 2 allows",
                            tile, blocks, ctx.tag_upper_bound()));
  partial.resize(m * n);
  ctx.set_model_shape({model::OpKind::GemvAllReduce, m, k, n, 1, 1, tile});
  map_fused_segment();
}

std::size_t GemvAllReduceImpl::first_block(int o) const {
  return grid().first_block(o);
}

int GemvAllReduceImpl::owner(std::size_t b) const {
  return grid().owner(b);
}

// fp32 rows: one vector through kernels::gemv_f32_operator (tilecomm's kernel on AVX2/AVX-512,
// 5-10 % faster than OpenBLAS sgemv on Zen 4 and the same bits on both paths; sgemv on the scalar
// path), n vectors through OpenBLAS sgemm (W read once); bf16 rows go to tilecomm's kernels: the
// one-vector kernel per column of X for n < kBf16BatchedFrom, the batched one (W read once) from
// there (docs/kernels.md, "GEMV kernel").
void GemvAllReduceImpl::gemv_tile(GemvWeights w, const float* x, float* out, std::size_t b) const {
  const std::size_t r = rows(b), first = row0(b) * k;
  const int ri = static_cast<int>(r), ki = static_cast<int>(k), ni = static_cast<int>(n);
  if (k == 0) {
    std::fill(out, out + r * n, 0.0f);
  } else if (w.bf16 && n == 1) {
    kernels::gemv_bf16(w.bf16 + first, r, k, x, out);
  } else if (w.bf16 && n >= kBf16BatchedFrom) {
    kernels::gemv_bf16_batch(w.bf16 + first, r, k, n, x, out);
  } else if (w.bf16) {
    thread_local std::vector<float> column, result;  // X's column c, then W X_c
    column.resize(k);
    result.resize(r);
    for (std::size_t c = 0; c < n; ++c) {
      for (std::size_t j = 0; j < k; ++j)
        column[j] = x[j * n + c];
      kernels::gemv_bf16(w.bf16 + first, r, k, column.data(), result.data());
      for (std::size_t i = 0; i < r; ++i)
        out[i * n + c] = result[i];
    }
  } else if (n == 1) {
    kernels::gemv_f32_operator(w.f32 + first, r, k, x, out);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri, ni, ki, 1.0f, w.f32 + first, ki, x,
                ni, 0.0f, out, ni);
  }
}

void GemvAllReduceImpl::validate(GemvWeights w, const float* x, const float* y) const {
  if (m * k > 0 && w.data() == nullptr)
    ctx.invalid(fmt::format("run: w is null with m x k_local = {} x {}", m, k));
  if (k > 0 && x == nullptr) ctx.invalid(fmt::format("run: x is null with k_local = {}", k));
  if (m > 0 && y == nullptr) ctx.invalid(fmt::format("run: y is null with m = {}", m));
  const std::size_t x_bytes = k * n * sizeof(float), y_bytes = m * n * sizeof(float);
  auto overlaps = [](const void* a, std::size_t na, const void* b, std::size_t nb) {
    const auto *pa = static_cast<const char*>(a), *pb = static_cast<const char*>(b);
    return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
  };
  if (overlaps(y, y_bytes, w.data(), m * k * w.element_bytes())) ctx.invalid("run: y overlaps w");
  if (overlaps(y, y_bytes, x, x_bytes)) ctx.invalid("run: y overlaps x");
}

void GemvAllReduceImpl::compute(GemvWeights w, const float* x, float* out) {
  ctx.run_compute(blocks, [&](std::size_t b) { gemv_tile(w, x, out + elem0(b), b); });
}

void GemvAllReduceImpl::run_sequential(GemvWeights w, const float* x, float* y) {
  compute(w, x, partial.data());
  allreduce(ctx.communicator, partial.data(), y, m * n, DataType::Float32, ReduceOp::Sum,
            collective_options());
}

CollectiveOptions GemvAllReduceImpl::collective_options() const {
  // The fused protocols reduce in ReduceOrder::Canonical; so do the unfused modes, unless the
  // user forced an AllReduce algorithm (OpOptions::algorithm or TILECOMM_ALLREDUCE): then its
  // order, which may differ from fused mode's in the last bits of a sum.
  const bool forced =
      !ctx.options.algorithm.empty() || !algorithm_override(Collective::AllReduce).empty();
  return {ctx.options.algorithm, forced ? ReduceOrder::Any : ReduceOrder::Canonical};
}

void GemvAllReduceImpl::run_shaped(GemvWeights w, const float* x, float* y) {
  // Chunk c = blocks [split_begin(blocks, chunks, c), ...); never more chunks than blocks.
  const std::size_t chunks =
      std::min<std::size_t>(ctx.options.shaped.chunks, std::max<std::size_t>(blocks, 1));
  auto first = [&](std::size_t c) { return split_begin(blocks, chunks, c); };
  ctx.run_shaped({chunks, [&](std::size_t c) { return first(c + 1) - first(c); },
                  [&](std::size_t c, std::size_t i) {
                    const std::size_t b = first(c) + i;
                    gemv_tile(w, x, partial.data() + elem0(b), b);
                  },
                  [&](std::size_t c) {
                    const std::size_t e0 = elem0(first(c)), count = elem0(first(c + 1)) - e0;
                    allreduce(ctx.communicator, partial.data() + e0, y + e0, count,
                              DataType::Float32, ReduceOp::Sum, collective_options());
                  }});
}

void GemvAllReduceImpl::run(GemvWeights w, const float* x, float* y, Mode mode) {
  ctx.dispatch(
      mode, {m, tile, n},
      [&] {
        validate(w, x, y);
        return m > 0;  // every rank has the same m: nothing to do anywhere
      },
      [&] { run_sequential(w, x, y); }, [&] { run_shaped(w, x, y); },
      [&] {
        if (algorithm == FusedAlgorithm::OneShot) return run_one_shot(w, x, y);
        run_fused(w, x, y);
      });
}

}  // namespace detail

GemvAllReduce::GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                             OpOptions options)
    : GemvAllReduce(comm, device, m, k_local, 1, std::move(options)) {}
GemvAllReduce::GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                             std::size_t batch, OpOptions options)
    : impl_(std::make_unique<detail::GemvAllReduceImpl>(comm, device, m, k_local, batch,
                                                        std::move(options))) {}
GemvAllReduce::~GemvAllReduce() = default;

void GemvAllReduce::run(const float* w, const float* x, float* y, Mode mode) {
  impl_->run({w, nullptr}, x, y, mode);
}

void GemvAllReduce::run(const bfloat16* w, const float* x, float* y, Mode mode) {
  static_assert(sizeof(bfloat16) == sizeof(std::uint16_t));
  impl_->run({nullptr, reinterpret_cast<const std::uint16_t*>(w)}, x, y, mode);
}

void bench::compute_only(GemvAllReduce& op, const float* w, const float* x, float* partial) {
  detail::GemvAllReduceImpl& impl = detail::BenchAccess::impl(op);
  impl.validate({w, nullptr}, x, partial);
  if (impl.m > 0) impl.compute({w, nullptr}, x, partial);
}

void bench::compute_only(GemvAllReduce& op, const bfloat16* w, const float* x, float* partial) {
  detail::GemvAllReduceImpl& impl = detail::BenchAccess::impl(op);
  const detail::GemvWeights weights{nullptr, reinterpret_cast<const std::uint16_t*>(w)};
  impl.validate(weights, x, partial);
  if (impl.m > 0) impl.compute(weights, x, partial);
}

void bench::collective_only(GemvAllReduce& op, const float* partial, float* y) {
  detail::GemvAllReduceImpl& impl = detail::BenchAccess::impl(op);
  allreduce(impl.ctx.communicator, partial, y, impl.m * impl.n, DataType::Float32, ReduceOp::Sum,
            {impl.ctx.options.algorithm});
}

std::size_t GemvAllReduce::m() const {
  return impl_->m;
}
std::size_t GemvAllReduce::k_local() const {
  return impl_->k;
}
std::size_t GemvAllReduce::batch() const {
  return impl_->n;
}
std::optional<Mode> GemvAllReduce::auto_choice() const {
  return impl_->ctx.auto_choice();
}
std::size_t GemvAllReduce::tile_rows() const {
  return impl_->tile;
}
FusedAlgorithm GemvAllReduce::fused_algorithm() const {
  return impl_->algorithm;
}

}  // namespace tilecomm
