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

/// Fused outputs (the AllReduce payload, M x n floats) up to this size take the one-shot protocol
/// (FusedAlgorithm::Auto): decode's projections (4-64 KiB per vector) are latency-bound; above it,
/// two-shot's fewer bytes per rank win.
constexpr std::size_t kOneShotMaxBytes = std::size_t{256} << 10;
/// bf16 batches of at least this many vectors take the batched kernel (W read once, a broadcast
/// and an FMA per weight and group of 8 columns); smaller ones the one-vector kernel per column.
/// One core, 4096 x 2048 (docs/ops.md, "Several vectors per call"): batched 3.3-3.8 ms for any
/// n <= 8, per column 1.2-1.3 ms x n (n = 4: level; n = 8: 5.2-5.9 ms).
constexpr std::size_t kBf16BatchedFrom = 4;
/// The off-node path the one-shot tile size is chosen for, until a calibrated profile exists:
/// a 1 Gbit/s link (125 bytes/us) and ~10 us of CPU per Open MPI TCP message.
constexpr double kOffNodeBytesPerUs = 125.0;
constexpr double kOffNodeMessageUs = 10.0;

/// One-shot row blocks. The call's exposed communication is about the last block's transfer,
/// S / n x beta, plus the message cost of every block, n x c: n = sqrt(S beta / c) minimises it
/// across nodes. At least one block per compute WG (two on a node, for balance), a multiple of
/// the WGs, at least 16 rows. `bytes`: the payload, M x batch floats.
std::size_t one_shot_tile(std::size_t m, std::size_t bytes, std::size_t compute_wgs,
                          bool spans_nodes) {
  std::size_t n = 2 * compute_wgs;
  if (spans_nodes) {
    const double s_beta = static_cast<double>(bytes) / kOffNodeBytesPerUs;
    const auto best = static_cast<std::size_t>(std::lround(std::sqrt(s_beta / kOffNodeMessageUs)));
    n = (std::max(best, compute_wgs) + compute_wgs - 1) / compute_wgs * compute_wgs;
  }
  return std::max<std::size_t>(16, ((m + n - 1) / n + 15) / 16 * 16);
}

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
  algorithm = ctx.options.fused_algorithm;
  if (algorithm == FusedAlgorithm::Auto)
    algorithm = payload <= kOneShotMaxBytes ? FusedAlgorithm::OneShot : FusedAlgorithm::TwoShot;
  // Default tile, two-shot: about 8 tiles per WG slot of the job, a multiple of 16, 16..1024 rows
  // on one node; up to 4096 rows (16 KiB messages) across nodes, where each tile is an MPI message
  // and Open MPI's per-message cost over TCP outweighs finer overlap (docs/ops.md, "Tile size
  // across nodes"). Those caps are bytes (4 and 16 KiB of Y): with n vectors, n times fewer rows.
  // One-shot: one_shot_tile().
  const std::size_t target = std::max<std::size_t>(1, 8 * ctx.wg_slots() * topo.size);
  const std::size_t max_tile = std::max<std::size_t>(16, (ctx.spans_nodes() ? 4096 : 1024) / n);
  const std::size_t compute_wgs = ctx.wg_slots();  // one-shot: the host drives the proxy
  tile = ctx.options.tile ? ctx.options.tile
         : algorithm == FusedAlgorithm::OneShot
             ? one_shot_tile(m, payload, compute_wgs, ctx.spans_nodes())
             : std::clamp<std::size_t>((m / target + 15) / 16 * 16, 16, max_tile);
  ctx.agree({"m", "batch", "shaped.chunks", "fused_algorithm", "auto_rounds"},
            {static_cast<long long>(m), static_cast<long long>(n), ctx.options.shaped.chunks,
             static_cast<long long>(ctx.options.fused_algorithm), ctx.options.auto_rounds});
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
  return split_begin(blocks, static_cast<std::size_t>(topo.size), static_cast<std::size_t>(o));
}

int GemvAllReduceImpl::owner(std::size_t b) const {
  int o = 0;
  while (o + 1 < topo.size && first_block(o + 1) <= b)
    ++o;
  return o;
}

// fp32 rows go to OpenBLAS sgemv (one vector) or sgemm (n vectors: W is read once): tilecomm's
// fp32 kernel streams W no faster on this machine (docs/kernels.md, "GEMV kernel"), so it has not
// earned its place; bf16 rows go to tilecomm's kernels: the one-vector kernel per column of X
// for n < kBf16BatchedFrom, the batched one (W read once) from there.
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
    cblas_sgemv(CblasRowMajor, CblasNoTrans, ri, ki, 1.0f, w.f32 + first, ki, x, 1, 0.0f, out, 1);
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
