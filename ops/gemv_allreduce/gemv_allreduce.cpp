// GemvAllReduce: set-up, validation, and the unfused modes (sequential, shaped).
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "ops/common/op_util.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"
#include "tilecomm/bench_hooks.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {

constexpr OpInfo kInfo{"GemvAllReduce", "gemv_allreduce", {"m", "tile", nullptr}};

}  // namespace

GemvAllReduceImpl::GemvAllReduceImpl(Communicator& comm, Device& device, std::size_t m_,
                                     std::size_t k_, OpOptions options)
    : ctx(comm, device, std::move(options), kInfo), topo(ctx.topo), m(m_), k(k_) {
  const auto limit = static_cast<std::size_t>(INT32_MAX);
  if (m > limit) ctx.invalid(fmt::format("m = {} is too large (max {})", m, limit));
  if (k > limit) ctx.invalid(fmt::format("k_local = {} is too large (max {})", k, limit));
  // Default tile: about 8 tiles per WG slot of the job, a multiple of 16, 16..1024 rows on one
  // node; up to 4096 rows (16 KiB messages) across nodes, where each tile is an MPI message and
  // Open MPI's per-message cost over TCP outweighs finer overlap (docs/ops.md, "Tile size across
  // nodes").
  const std::size_t target = std::max<std::size_t>(1, 8 * ctx.wg_slots() * topo.size);
  const std::size_t max_tile = ctx.spans_nodes() ? 4096 : 1024;
  tile = ctx.options.tile ? ctx.options.tile
                          : std::clamp<std::size_t>((m / target + 15) / 16 * 16, 16, max_tile);
  ctx.agree({"m", "shaped.chunks"}, {static_cast<long long>(m), ctx.options.shaped.chunks});
  tile = ctx.min_across_ranks(tile);  // devices may differ in size; the tiling must not
  blocks = (m + tile - 1) / tile;
  partial.resize(m);
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

void GemvAllReduceImpl::gemv_tile(const float* w, const float* x, float* out, std::size_t b) const {
  const std::size_t n = rows(b);
  if (k == 0) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f,
              w + row0(b) * k, static_cast<int>(k), x, 1, 0.0f, out, 1);
}

void GemvAllReduceImpl::validate(const float* w, const float* x, const float* y) const {
  if (m * k > 0 && w == nullptr)
    ctx.invalid(fmt::format("run: w is null with m x k_local = {} x {}", m, k));
  if (k > 0 && x == nullptr) ctx.invalid(fmt::format("run: x is null with k_local = {}", k));
  if (m > 0 && y == nullptr) ctx.invalid(fmt::format("run: y is null with m = {}", m));
  auto overlaps = [](const float* a, std::size_t na, const float* b, std::size_t nb) {
    return na > 0 && nb > 0 && a < b + nb && b < a + na;
  };
  if (overlaps(y, m, w, m * k)) ctx.invalid("run: y overlaps w");
  if (overlaps(y, m, x, k)) ctx.invalid("run: y overlaps x");
}

void GemvAllReduceImpl::compute(const float* w, const float* x, float* out) {
  ctx.run_compute(blocks, [&](std::size_t b) { gemv_tile(w, x, out + row0(b), b); });
}

void GemvAllReduceImpl::run_sequential(const float* w, const float* x, float* y) {
  compute(w, x, partial.data());
  allreduce(ctx.communicator, partial.data(), y, m, DataType::Float32, ReduceOp::Sum,
            {ctx.options.algorithm});
}

void GemvAllReduceImpl::run_shaped(const float* w, const float* x, float* y) {
  // Chunk c = blocks [split_begin(blocks, chunks, c), ...); never more chunks than blocks.
  const std::size_t chunks =
      std::min<std::size_t>(ctx.options.shaped.chunks, std::max<std::size_t>(blocks, 1));
  auto first = [&](std::size_t c) { return split_begin(blocks, chunks, c); };
  ctx.run_shaped({chunks, [&](std::size_t c) { return first(c + 1) - first(c); },
                  [&](std::size_t c, std::size_t i) {
                    const std::size_t b = first(c) + i;
                    gemv_tile(w, x, partial.data() + row0(b), b);
                  },
                  [&](std::size_t c) {
                    const std::size_t r0 = row0(first(c)), n = row0(first(c + 1)) - r0;
                    allreduce(ctx.communicator, partial.data() + r0, y + r0, n, DataType::Float32,
                              ReduceOp::Sum, {ctx.options.algorithm});
                  }});
}

}  // namespace detail

GemvAllReduce::GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                             OpOptions options)
    : impl_(std::make_unique<detail::GemvAllReduceImpl>(comm, device, m, k_local,
                                                        std::move(options))) {}
GemvAllReduce::~GemvAllReduce() = default;

void GemvAllReduce::run(const float* w, const float* x, float* y, Mode mode) {
  detail::GemvAllReduceImpl& op = *impl_;
  op.ctx.dispatch(
      mode, {op.m, op.tile, 0},
      [&] {
        op.validate(w, x, y);
        return op.m > 0;  // every rank has the same m: nothing to do anywhere
      },
      [&] { op.run_sequential(w, x, y); }, [&] { op.run_shaped(w, x, y); },
      [&] { op.run_fused(w, x, y); });
}

void bench::compute_only(GemvAllReduce& op, const float* w, const float* x, float* partial) {
  detail::GemvAllReduceImpl& impl = detail::BenchAccess::impl(op);
  impl.validate(w, x, partial);
  if (impl.m > 0) impl.compute(w, x, partial);
}

void bench::collective_only(GemvAllReduce& op, const float* partial, float* y) {
  detail::GemvAllReduceImpl& impl = detail::BenchAccess::impl(op);
  allreduce(impl.ctx.communicator, partial, y, impl.m, DataType::Float32, ReduceOp::Sum,
            {impl.ctx.options.algorithm});
}

std::size_t GemvAllReduce::m() const {
  return impl_->m;
}
std::size_t GemvAllReduce::k_local() const {
  return impl_->k;
}
std::size_t GemvAllReduce::tile_rows() const {
  return impl_->tile;
}

}  // namespace tilecomm
