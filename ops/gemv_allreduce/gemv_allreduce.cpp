// GemvAllReduce: context set-up, validation, and the two unfused modes (sequential, shaped).
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "collectives/check.hpp"
#include "ops/common/op_util.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {

GemvAllReduceImpl::GemvAllReduceImpl(Communicator& c, Device& d, std::size_t m_, std::size_t k_,
                                     OpOptions options)
    : pub(c), comm(c.impl()), dev(d), m(m_), k(k_), opt(std::move(options)) {
  const auto limit = static_cast<std::size_t>(INT32_MAX);
  if (m > limit)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GemvAllReduce: m = {} is too large (max {})", m, limit));
  if (k > limit)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GemvAllReduce: k_local = {} is too large (max {})", k, limit));
  if (opt.shaped.chunks < 1)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GemvAllReduce: shaped.chunks = {} (must be >= 1)", opt.shaped.chunks));
  // Default tile: about 8 tiles per WG slot of the job, a multiple of 16, 16..1024 rows on one
  // node; up to 4096 rows (16 KiB messages) across nodes, where each tile is an MPI message and
  // Open MPI's per-message cost over TCP outweighs finer overlap (fused_perf --tile on 2 emulated
  // nodes at 5 Gbit/s, M = 262144: fused 6.5 ms with 4096-row tiles vs 9.5-11.2 ms with 1024).
  const std::size_t slots = static_cast<std::size_t>(dev.num_cus()) * dev.wg_slots_per_cu();
  const std::size_t target = std::max<std::size_t>(1, 8 * slots * comm.size);
  const std::size_t max_tile = comm.num_nodes > 1 ? 4096 : 1024;
  tile = opt.tile ? opt.tile : std::clamp<std::size_t>((m / target + 15) / 16 * 16, 16, max_tile);
  agree_across_ranks(comm, "GemvAllReduce", {"m", "shaped.chunks"},
                     {static_cast<long long>(m), opt.shaped.chunks});
  tile = min_across_ranks(comm, tile);  // devices may differ in size; the tiling must not
  nblocks = (m + tile - 1) / tile;
  blas_single_threaded();
  compute_stream = dev.create_stream(Stream::kNormal);
  comm_stream = dev.create_stream(Stream::kHigh);
  partial.resize(m);
  setup_fused();
}

GemvAllReduceImpl::~GemvAllReduceImpl() {
  shm.reset();
  if (op_comm != MPI_COMM_NULL) MPI_Comm_free(&op_comm);
}

std::size_t GemvAllReduceImpl::first_block(int o) const {
  return split_begin(nblocks, static_cast<std::size_t>(comm.size), static_cast<std::size_t>(o));
}

int GemvAllReduceImpl::owner(std::size_t b) const {
  int o = 0;
  while (o + 1 < comm.size && first_block(o + 1) <= b)
    ++o;
  return o;
}

void GemvAllReduceImpl::gemv_tile(const float* w, const float* x, float* out, std::size_t b) const {
  const std::size_t r0 = row0(b), n = rows(b);
  if (k == 0) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f,
              w + r0 * k, static_cast<int>(k), x, 1, 0.0f, out, 1);
}

void GemvAllReduceImpl::check_args(const float* w, const float* x, const float* y) const {
  if (m * k > 0 && w == nullptr)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GemvAllReduce::run: w is null with m x k_local = {} x {}", m, k));
  if (k > 0 && x == nullptr)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GemvAllReduce::run: x is null with k_local = {}", k));
  if (m > 0 && y == nullptr)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GemvAllReduce::run: y is null with m = {}", m));
  auto overlaps = [](const float* a, std::size_t na, const float* b, std::size_t nb) {
    return na > 0 && nb > 0 && a < b + nb && b < a + na;
  };
  if (overlaps(y, m, w, m * k))
    throw Error(ErrorCode::InvalidArgument, "GemvAllReduce::run: y overlaps w");
  if (overlaps(y, m, x, k))
    throw Error(ErrorCode::InvalidArgument, "GemvAllReduce::run: y overlaps x");
}

void GemvAllReduceImpl::compute(const float* w, const float* x, float* out) {
  compute_stream.launch({"gemv", {nblocks, 1}, 0}, [&](const WorkgroupContext& wg) {
    gemv_tile(w, x, out + row0(wg.id), wg.id);
  });
  compute_stream.synchronize();
}

void GemvAllReduceImpl::run_sequential(const float* w, const float* x, float* y) {
  compute(w, x, partial.data());
  allreduce(pub, partial.data(), y, m, DataType::Float32, ReduceOp::Sum, {opt.algorithm});
}

void GemvAllReduceImpl::run_shaped(const float* w, const float* x, float* y) {
  // Chunk c = blocks [split_begin(nblocks, chunks, c), ...): its GEMV kernel runs with shaped LDS
  // on the compute stream; its AllReduce runs as a one-WG kernel on the high-priority stream once
  // the chunk's event fires, overlapping the next chunk's GEMV.
  const std::size_t chunks =
      std::min<std::size_t>(opt.shaped.chunks, std::max<std::size_t>(nblocks, 1));
  const std::size_t lds = shaped_lds_bytes(dev, opt.shaped.free_cus);
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t b0 = split_begin(nblocks, chunks, c),
                      b1 = split_begin(nblocks, chunks, c + 1);
    if (b1 == b0) continue;
    compute_stream.launch({"gemv.chunk", {b1 - b0, 1}, lds}, [&, b0](const WorkgroupContext& wg) {
      const std::size_t b = b0 + wg.id;
      gemv_tile(w, x, partial.data() + row0(b), b);
    });
    comm_stream.wait(compute_stream.record());
    comm_stream.launch({"allreduce.chunk", {1, 1}, 0}, [&, b0, b1](const WorkgroupContext&) {
      const std::size_t r0 = row0(b0), n = row0(b1) - r0;
      allreduce(pub, partial.data() + r0, y + r0, n, DataType::Float32, ReduceOp::Sum,
                {opt.algorithm});
    });
  }
  compute_stream.synchronize();
  comm_stream.synchronize();
}

}  // namespace detail

GemvAllReduce::GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                             OpOptions options)
    : impl_(std::make_unique<detail::GemvAllReduceImpl>(comm, device, m, k_local,
                                                        std::move(options))) {}
GemvAllReduce::~GemvAllReduce() = default;

void GemvAllReduce::run(const float* w, const float* x, float* y, Mode mode) {
  detail::check_op_call(impl_->comm, detail::CallKind::GemvAllReduce, {impl_->m, impl_->tile},
                        to_string(mode));
  impl_->check_args(w, x, y);
  if (impl_->m == 0) return;  // every rank has the same m: nothing to do anywhere
  switch (mode) {
    case Mode::Sequential:
      return impl_->run_sequential(w, x, y);
    case Mode::Shaped:
      return impl_->run_shaped(w, x, y);
    case Mode::Fused:
      return impl_->run_fused(w, x, y);
  }
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("GemvAllReduce::run: mode = {}", static_cast<int>(mode)));
}

void GemvAllReduce::compute_only(const float* w, const float* x, float* partial) {
  impl_->check_args(w, x, partial);
  if (impl_->m > 0) impl_->compute(w, x, partial);
}

void GemvAllReduce::collective_only(const float* partial, float* y) {
  allreduce(impl_->pub, partial, y, impl_->m, DataType::Float32, ReduceOp::Sum,
            {impl_->opt.algorithm});
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
