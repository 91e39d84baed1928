// GemmReduceScatter: set-up, validation, the GEMM tile, and the unfused modes (sequential, shaped).
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "collectives/algorithm.hpp"
#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_impl.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"
#include "tilecomm/bench_hooks.hpp"
#include "tilecomm/collectives.hpp"

namespace tilecomm {
namespace detail {
namespace {

constexpr OpInfo kInfo{"GemmReduceScatter", "gemm_reduce_scatter", {"m", "n", "tile"}};

}  // namespace

GemmReduceScatterImpl::GemmReduceScatterImpl(Communicator& comm, Device& device, std::size_t m_,
                                             std::size_t k_, std::size_t n_, OpOptions options)
    : ctx(comm, device, std::move(options), kInfo), topo(ctx.topo), m(m_), k(k_), n(n_) {
  const std::size_t limit = INT_MAX;
  if (n == 0 || n > limit) ctx.invalid(fmt::format("n = {} (must be in [1, {}])", n, limit));
  if (m > limit / n) ctx.invalid(fmt::format("m = {} is too large for n = {}", m, n));
  if (k > limit) ctx.invalid(fmt::format("k_local = {} is too large (max {})", k, limit));
  if (m % topo.size != 0)
    ctx.invalid(fmt::format(
        "m = {} is not a multiple of the {} ranks (each receives m / ranks rows)", m, topo.size));
  rows_local = m / topo.size;
  // Default tile: gemm_reduce_scatter_plan.cpp (shared with the simulator).
  tile = ctx.options.tile ? ctx.options.tile
                          : gemm_rs_default_tile(m, ctx.wg_slots(), n, ctx.spans_nodes());
  ctx.agree({"m", "n", "shaped.chunks", "auto_rounds", "auto_min_trial_us"},
            {static_cast<long long>(m), static_cast<long long>(n), ctx.options.shaped.chunks,
             ctx.options.auto_rounds, ctx.auto_min_trial_us()});
  tile = ctx.min_across_ranks(tile);  // devices may differ in size; the tiling must not
  blocks = (rows_local + tile - 1) / tile;
  ctx.set_model_shape({model::OpKind::GemmReduceScatter, m, k, n, 1, 1, tile});
  partial.resize(m * n);
  packed.reset(1, k, n);
  SegmentLayout layout;
  const std::size_t flags_offset = layout.add(TileFlags::bytes_for(topo.size * blocks));
  partials_offset = layout.add(2 * m * n * sizeof(float));
  // Node sums (node_relay, ops/common/plan_layout.hpp): slots for the most owners a rank of this
  // node relays (gemm_rs_relayed).
  const std::size_t local = static_cast<std::size_t>(topo.local_size);
  std::size_t relay_flags_offset = 0;
  if (relays_partials(topo)) {
    relay_slot.assign(topo.size, -1);
    for (int mate : topo.local_to_world) {
      const std::vector<int> owners = gemm_rs_relayed(topo, mate);
      relay_slots = std::max(relay_slots, owners.size());
      for (std::size_t j = 0; j < owners.size(); ++j)
        relay_slot[owners[j]] = static_cast<int>(j);
    }
    relay_flags_offset = layout.add(TileFlags::bytes_for(relay_slots * local * blocks));
    relay_offset = layout.add(2 * relay_slots * local * rows_local * n * sizeof(float));
  }
  ctx.map_segment(layout);
  partial_flags = ctx.flags_at(flags_offset, topo.size * blocks);
  if (relay_slots > 0) relay_flags = ctx.flags_at(relay_flags_offset, relay_slots * local * blocks);
}

void GemmReduceScatterImpl::pack_weights(const float* w, bool kept) {
  constexpr std::size_t kPanels = 16;  // per task (256 columns)
  weights_set = kept;
  ctx.run_compute((packed.panels() + kPanels - 1) / kPanels,
                  [&](std::size_t c) { packed.pack(0, w, n, c * kPanels, (c + 1) * kPanels); });
}

void GemmReduceScatterImpl::gemm_rows(const float* a, std::size_t row0, std::size_t rows,
                                      float* dst, std::size_t ldc) const {
  kernels::gemm_tile(a + row0 * k, k, rows, packed, 0, 0, n, dst, ldc);  // k = 0: zeros
}

void GemmReduceScatterImpl::validate(const float* a, const float* w, const float* y, bool check_y,
                                     bool packed_w) const {
  if (m * k > 0 && a == nullptr)
    ctx.invalid(fmt::format("run: a is null with m x k_local = {} x {}", m, k));
  if (packed_w && k > 0 && !weights_set)
    ctx.invalid(
        "run: no weights: pass w, or call set_weights() before a call without it (a call with w "
        "ends set_weights()' packing)");
  if (!packed_w && k > 0 && w == nullptr)
    ctx.invalid(fmt::format("run: w is null with k_local = {}", k));
  if (check_y && rows_local > 0 && y == nullptr)
    ctx.invalid(fmt::format("run: y is null with {} rows to receive", rows_local));
  auto overlaps = [](const float* p, std::size_t np, const float* q, std::size_t nq) {
    return np > 0 && nq > 0 && p < q + nq && q < p + np;
  };
  if (overlaps(y, rows_local * n, a, m * k)) ctx.invalid("run: y overlaps a");
  if (w != nullptr && overlaps(y, rows_local * n, w, k * n)) ctx.invalid("run: y overlaps w");
}

std::size_t GemmReduceScatterImpl::chunk_row0(std::size_t c, std::size_t chunks) const {
  return split_begin(rows_local, chunks, c);
}

std::vector<RowTile> GemmReduceScatterImpl::chunk_tiles(std::size_t c, std::size_t chunks) const {
  std::vector<RowTile> tiles;
  const std::size_t lo = chunk_row0(c, chunks), hi = chunk_row0(c + 1, chunks);
  for (int q = 0; q < topo.size; ++q)
    for (std::size_t r = lo; r < hi; r += tile)
      tiles.push_back({q, r, std::min(hi, r + tile)});
  return tiles;
}

void GemmReduceScatterImpl::compute_chunk_tile(const float* a, std::size_t c, std::size_t chunks,
                                               const RowTile& t) {
  const std::size_t lo = chunk_row0(c, chunks), rows = chunk_row0(c + 1, chunks) - lo;
  float* region = partial.data() + topo.size * lo * n;  // chunk c: [owner][rows][N]
  gemm_rows(a, t.owner * rows_local + t.row0, t.row1 - t.row0,
            region + (t.owner * rows + (t.row0 - lo)) * n, n);
}

void GemmReduceScatterImpl::reduce_scatter_chunk(float* y, std::size_t c, std::size_t chunks) {
  const std::size_t lo = chunk_row0(c, chunks), rows = chunk_row0(c + 1, chunks) - lo;
  // The fused mode reduces in ReduceOrder::Canonical; so does this, unless the user forced a
  // ReduceScatter algorithm (OpOptions::algorithm or TILECOMM_REDUCE_SCATTER): then its order.
  const bool forced =
      !ctx.options.algorithm.empty() || !algorithm_override(Collective::ReduceScatter).empty();
  reduce_scatter(ctx.communicator, partial.data() + topo.size * lo * n, y + lo * n, rows * n,
                 DataType::Float32, ReduceOp::Sum,
                 {ctx.options.algorithm, forced ? ReduceOrder::Any : ReduceOrder::Canonical});
}

void GemmReduceScatterImpl::run_unfused(const float* a, float* y, std::size_t chunks, bool shaped) {
  chunks = std::min(chunks, rows_local);  // no empty chunks
  std::vector<std::vector<RowTile>> tiles(chunks);
  for (std::size_t c = 0; c < chunks; ++c)
    tiles[c] = chunk_tiles(c, chunks);
  if (!shaped) {  // sequential: one chunk, computed on every CU, then the collective
    ctx.run_compute(tiles[0].size(),
                    [&](std::size_t i) { compute_chunk_tile(a, 0, 1, tiles[0][i]); });
    return reduce_scatter_chunk(y, 0, 1);
  }
  ctx.run_shaped(
      {chunks, [&](std::size_t c) { return tiles[c].size(); },
       [&](std::size_t c, std::size_t i) { compute_chunk_tile(a, c, chunks, tiles[c][i]); },
       [&](std::size_t c) { reduce_scatter_chunk(y, c, chunks); }});
}

void GemmReduceScatterImpl::run(const float* a, const float* w, float* y, Mode mode,
                                bool packed_w) {
  ctx.dispatch(
      mode, {m, n, tile},
      [&] {
        validate(a, w, y, true, packed_w);
        if (m == 0) return false;  // every rank has the same m: nothing to do anywhere
        if (!packed_w) pack_weights(w);
        return true;
      },
      [&] { run_unfused(a, y, 1, false); },
      [&] { run_unfused(a, y, ctx.options.shaped.chunks, true); }, [&] { run_fused(a, y); });
}

}  // namespace detail

GemmReduceScatter::GemmReduceScatter(Communicator& comm, Device& device, std::size_t m,
                                     std::size_t k_local, std::size_t n, OpOptions options)
    : impl_(std::make_unique<detail::GemmReduceScatterImpl>(comm, device, m, k_local, n,
                                                            std::move(options))) {}
GemmReduceScatter::~GemmReduceScatter() = default;

void GemmReduceScatter::run(const float* a, const float* w, float* y, Mode mode) {
  impl_->run(a, w, y, mode, false);
}

void GemmReduceScatter::run(const float* a, float* y, Mode mode) {
  impl_->run(a, nullptr, y, mode, true);
}

void GemmReduceScatter::set_weights(const float* w) {
  detail::GemmReduceScatterImpl& op = *impl_;
  if (op.k > 0 && w == nullptr)
    op.ctx.invalid(fmt::format("set_weights: w is null with k_local = {}", op.k));
  op.pack_weights(w, true);
}

void bench::compute_only(GemmReduceScatter& op, const float* a, const float* w) {
  detail::GemmReduceScatterImpl& impl = detail::BenchAccess::impl(op);
  const bool packed_w = w == nullptr;  // null: set_weights()' packing
  impl.validate(a, w, nullptr, false, packed_w);
  if (!packed_w) impl.pack_weights(w);
  const std::vector<detail::RowTile> tiles = impl.chunk_tiles(0, 1);
  impl.ctx.run_compute(tiles.size(),
                       [&](std::size_t i) { impl.compute_chunk_tile(a, 0, 1, tiles[i]); });
}

void bench::collective_only(GemmReduceScatter& op, float* y) {
  detail::BenchAccess::impl(op).reduce_scatter_chunk(y, 0, 1);
}

std::size_t GemmReduceScatter::m() const {
  return impl_->m;
}
std::size_t GemmReduceScatter::n() const {
  return impl_->n;
}
std::size_t GemmReduceScatter::k_local() const {
  return impl_->k;
}
std::size_t GemmReduceScatter::rows_local() const {
  return impl_->rows_local;
}
std::size_t GemmReduceScatter::row_begin() const {
  return impl_->topo.rank * impl_->rows_local;
}
std::optional<Mode> GemmReduceScatter::auto_choice() const {
  return impl_->ctx.auto_choice();
}
std::size_t GemmReduceScatter::tile_rows() const {
  return impl_->tile;
}

}  // namespace tilecomm
