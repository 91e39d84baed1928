// GemmAllToAll: set-up, the GEMM tile, and the unfused modes (sequential, shaped). The per-call
// routing checks are in gemm_alltoall_routing.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <numeric>

#include "ops/common/op_util.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "tilecomm/bench_hooks.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {

constexpr OpInfo kInfo{
    "GemmAllToAll", "gemm_alltoall", {"k", "n", "experts"}, false, "GemmAllToAll::run_layer"};
/// Weight panels per packing task (256 columns).
constexpr std::size_t kPackPanels = 16;

}  // namespace

GemmAllToAllImpl::GemmAllToAllImpl(Communicator& comm, Device& device, std::size_t experts_here,
                                   std::size_t k_, std::size_t n_, std::size_t max_in_,
                                   std::size_t max_out_, OpOptions options)
    : GemmAllToAllPlan(experts_here, n_),
      ctx(comm, device, std::move(options), kInfo),
      topo(ctx.topo),
      k(k_),
      max_in(max_in_),
      max_out(max_out_) {
  topology = &topo;
  const int p = topo.size;
  const std::size_t limit = INT_MAX;
  if (k == 0 || k > limit) ctx.invalid(fmt::format("k = {} (must be in [1, {}])", k, limit));
  if (n == 0 || n > limit) ctx.invalid(fmt::format("n = {} (must be in [1, {}])", n, limit));
  if (max_in > limit / k)
    ctx.invalid(fmt::format("max_rows_in = {} is too large for k = {}", max_in, k));
  if (max_out > limit / n)
    ctx.invalid(fmt::format("max_rows_out = {} is too large for n = {}", max_out, n));
  set_tiling(k, ctx.options.tile);  // the tiles' rows and columns (gemm_alltoall_plan.hpp)
  // The model sees the most rows this rank's experts compute (the routing is per call).
  ctx.set_model_shape({model::OpKind::GemmAllToAll, max_in, k, n, 1, 1, node_rows});
  ctx.agree(
      {"k", "n", "tile rows", "shaped.chunks", "auto_rounds", "auto_min_trial_us"},
      {static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(tile_rows),
       ctx.options.shaped.chunks, ctx.options.auto_rounds, ctx.auto_min_trial_us()});
  // Per rank: experts, max_rows_in, max_rows_out.
  std::vector<long long> all(3 * p);
  const long long mine[3] = {static_cast<long long>(local_experts), static_cast<long long>(max_in),
                             static_cast<long long>(max_out)};
  mpi_check(MPI_Allgather(mine, 3, MPI_LONG_LONG, all.data(), 3, MPI_LONG_LONG, ctx.comm.mpi),
            "MPI_Allgather");
  first_expert.assign(p + 1, 0);
  max_out_of.assign(p, 0);
  max_in_of.assign(p, 0);
  std::size_t max_in_all = 0;
  for (int q = 0; q < p; ++q) {
    first_expert[q + 1] = first_expert[q] + static_cast<std::size_t>(all[3 * q]);
    most_experts = std::max(most_experts, static_cast<std::size_t>(all[3 * q]));
    max_in_of[q] = static_cast<std::size_t>(all[3 * q + 1]);
    max_in_all = std::max(max_in_all, max_in_of[q]);
    max_out_of[q] = static_cast<std::size_t>(all[3 * q + 2]);
    max_out_all = std::max(max_out_all, max_out_of[q]);
  }
  set_max_rows_out(max_out_all);
  // An owner returns to a source at most min(its max_rows_in, the source's max_rows_out) rows
  // (prepare checks both bounds before a tile moves).
  slot_rows = std::min(max_in_all, max_out_all);
  const std::size_t ub = ctx.tag_upper_bound();
  // Tags: block flags [0, count), the per-call headers count, run_layer's inputs after it.
  const std::size_t block_flags = experts() * max_row_blocks * col_blocks;
  // run_layer's inputs: one flag per (source, owner's expert, row tile).
  const std::size_t input_flags =
      static_cast<std::size_t>(p) * most_experts * std::max<std::size_t>(max_row_blocks, 1);
  if (experts() * std::max<std::size_t>(max_row_blocks, 1) * col_blocks > ub ||
      block_flags + input_flags > ub)
    ctx.invalid(fmt::format(
        "{} experts x {} row blocks x {} column blocks (+ {} ranks x {} experts x {} row blocks "
        "of dispatch) exceed MPI's tag range ({}); use a larger tile",
        experts(), max_row_blocks, col_blocks, p, most_experts, max_row_blocks, ub));
  send_buf.resize(max_in * n);
  packed.reset(local_experts, k, n);
  SegmentLayout layout;
  const auto other_local = static_cast<std::size_t>(topo.local_size - 1);
  // run_layer's input half: on each owner, one slot per other rank, as large as the rows that
  // rank may send it (every owner's layout is the same size: the largest). Mapped by the first
  // fused run_layer call only (BlockExchange::map_inputs).
  std::size_t input_floats = 0;
  for (int o = 0; o < p; ++o)
    input_floats = std::max(input_floats, input_slot(o, p));
  // An inbox half is also the zero-copy output of its calls (output()): at least max_rows_out rows.
  fused_exchange.reserve(layout, p, block_flags, std::max(other_local * slot_rows, max_out_all) * n,
                         gemm_alltoall_header_words(most_experts));
  fused_exchange.reserve_inputs(input_floats, input_flags);
  ctx.map_segment(layout);
  fused_exchange.bind(ctx, n, "GemmAllToAll: result tile");
  headers.fill = [this](int peer, std::uint64_t* words) { fill_header(peer, words); };
  headers.check = [this](int peer, const std::uint64_t* words) { check_header(peer, words); };
  headers.output_row = [this](int peer) { return y_row(first_expert[peer]); };
}

std::vector<GemmTile> GemmAllToAllImpl::make_tiles(std::size_t e0, std::size_t e1,
                                                   bool remote_first) const {
  return make_tiles(e0, e1, ctx.destination_order(remote_first));
}

void GemmAllToAllImpl::pack_weights(std::span<const float* const> weights, bool all) {
  const int p = topo.size;
  const std::size_t chunks = (packed.panels() + kPackPanels - 1) / kPackPanels;
  std::vector<std::size_t> used;  // experts with rows in this call
  for (std::size_t e = 0; e < local_experts; ++e) {
    std::size_t rows = 0;
    for (int s = 0; s < p && !all; ++s)
      rows += route.recv_counts[e * p + s];
    if (all || rows > 0) used.push_back(e);
  }
  weights_set = all;
  ctx.run_compute(used.size() * chunks, [&](std::size_t task) {
    const std::size_t e = used[task / chunks], c = task % chunks;
    packed.pack(e, weights[e], n, c * kPackPanels, (c + 1) * kPackPanels);
  });
}

void GemmAllToAllImpl::gemm_tile(const float* x, const GemmTile& t, float* dst,
                                 std::size_t ldc) const {
  const float* a = x + (route.x_row[t.expert * topo.size + t.src] + t.row0) * k;
  kernels::gemm_tile(a, k, t.row1 - t.row0, packed, t.expert, t.col0, t.col1 - t.col0, dst, ldc);
}

void GemmAllToAllImpl::gemm_to_send(const float* x, const GemmTile& t) {
  const std::size_t row = route.send_row[t.src * local_experts + t.expert] + t.row0;
  gemm_tile(x, t, send_buf.data() + row * n + t.col0, n);
}

void GemmAllToAllImpl::exchange(float* y, std::size_t c, std::size_t nc) {
  // To source s the rows of my experts in the chunk (contiguous in the send buffer), from owner o
  // the rows of its chunk's experts (contiguous in y, which is grouped by global expert).
  const int p = topo.size;
  const std::size_t ne = local_experts;
  VarLayout send_layout, recv_layout;
  send_layout.capacity = route.rows_in * n;
  recv_layout.capacity = route.rows_out * n;
  const std::size_t e0 = split_begin(ne, nc, c), e1 = split_begin(ne, nc, c + 1);
  for (int q = 0; q < p; ++q) {
    send_layout.displs.push_back(route.send_row[q * ne + e0] * n);
    send_layout.counts.push_back((route.send_row[q * ne + e1] - route.send_row[q * ne + e0]) * n);
    const std::size_t g0 = first_expert[q] + split_begin(experts_of(q), nc, c);
    const std::size_t g1 = first_expert[q] + split_begin(experts_of(q), nc, c + 1);
    recv_layout.displs.push_back(y_row(g0) * n);
    recv_layout.counts.push_back((y_row(g1) - y_row(g0)) * n);
  }
  alltoallv(ctx.communicator, send_buf.data(), send_layout, y, recv_layout, DataType::Float32,
            {ctx.options.algorithm});
}

void GemmAllToAllImpl::run_sequential(const float* x, float* y) {
  const std::vector<GemmTile> tiles = make_tiles(0, local_experts, false);
  ctx.run_compute(tiles.size(), [&](std::size_t i) { gemm_to_send(x, tiles[i]); });
  exchange(y, 0, 1);
}

void GemmAllToAllImpl::run_shaped(const float* x, float* y) {
  // Chunk c = part c of every rank's experts.
  const auto chunks = static_cast<std::size_t>(ctx.options.shaped.chunks);
  std::vector<std::vector<GemmTile>> tiles(chunks);
  for (std::size_t c = 0; c < chunks; ++c)
    tiles[c] = make_tiles(split_begin(local_experts, chunks, c),
                          split_begin(local_experts, chunks, c + 1), false);
  ctx.run_shaped({chunks, [&](std::size_t c) { return tiles[c].size(); },
                  [&](std::size_t c, std::size_t i) { gemm_to_send(x, tiles[c][i]); },
                  [&](std::size_t c) { exchange(y, c, chunks); }});
}

}  // namespace detail

GemmAllToAll::GemmAllToAll(Communicator& comm, Device& device, std::size_t local_experts,
                           std::size_t k, std::size_t n, std::size_t max_rows_in,
                           std::size_t max_rows_out, OpOptions options)
    : impl_(std::make_unique<detail::GemmAllToAllImpl>(
          comm, device, local_experts, k, n, max_rows_in, max_rows_out, std::move(options))) {}
GemmAllToAll::~GemmAllToAll() = default;

void GemmAllToAll::run(std::span<const float* const> weights, const float* x,
                       std::span<const std::size_t> recv_counts,
                       std::span<const std::size_t> send_counts, float* y, Mode mode) {
  detail::GemmAllToAllImpl& op = *impl_;
  // The previous call's zero-copy output is the caller's until now (GemmAllToAll::output()).
  op.fused_exchange.release_outputs();
  op.ctx.dispatch(
      mode, {op.k, op.n, op.experts()},
      [&] { op.prepare_call(weights, x, recv_counts, send_counts, y, mode, false); },
      [&] { op.run_sequential(x, y); }, [&] { op.run_shaped(x, y); }, [&] { op.run_fused(x, y); });
}

void GemmAllToAll::run(const float* x, std::span<const std::size_t> recv_counts,
                       std::span<const std::size_t> send_counts, float* y, Mode mode) {
  run({}, x, recv_counts, send_counts, y, mode);
}

void GemmAllToAll::set_weights(std::span<const float* const> weights) {
  detail::GemmAllToAllImpl& op = *impl_;
  if (weights.size() != op.local_experts)
    op.ctx.invalid(fmt::format("set_weights: weights has {} entries; this rank owns {} experts",
                               weights.size(), op.local_experts));
  for (std::size_t e = 0; e < weights.size(); ++e)
    if (weights[e] == nullptr) op.ctx.invalid(fmt::format("set_weights: weights[{}] is null", e));
  op.pack_weights(weights, true);
}

void bench::compute_only(GemmAllToAll& op, std::span<const float* const> weights, const float* x,
                         std::span<const std::size_t> recv_counts,
                         std::span<const std::size_t> send_counts) {
  detail::GemmAllToAllImpl& impl = detail::BenchAccess::impl(op);
  impl.prepare(weights, x, recv_counts, send_counts, nullptr, Mode::Sequential, false);
  if (!weights.empty() || impl.local_experts == 0) impl.pack_weights(weights);  // else set_weights
  const auto tiles = impl.make_tiles(0, impl.local_experts, false);
  impl.ctx.run_compute(tiles.size(), [&](std::size_t i) { impl.gemm_to_send(x, tiles[i]); });
}

std::size_t bench::layer_input_bytes(GemmAllToAll& op) {
  return detail::BenchAccess::impl(op).fused_exchange.input_bytes();
}

void bench::collective_only(GemmAllToAll& op, float* y) {
  detail::GemmAllToAllImpl& impl = detail::BenchAccess::impl(op);
  if (impl.route.y_row.empty())  // no call has routed yet: nothing says what to exchange
    throw Error(ErrorCode::InvalidUsage,
                "GemmAllToAll: collective_only before any compute_only() or run(): no routing");
  if (y == nullptr && impl.route.rows_out > 0)
    throw Error(ErrorCode::InvalidArgument, "GemmAllToAll: collective_only: y is null");
  impl.exchange(y, 0, 1);
}

std::span<float> GemmAllToAll::output() {
  return {impl_->next_output(), impl_->output_floats()};
}

std::size_t GemmAllToAll::num_experts() const {
  return impl_->experts();
}
std::size_t GemmAllToAll::first_expert() const {
  return impl_->first_expert[impl_->topo.rank];
}
std::size_t GemmAllToAll::local_experts() const {
  return impl_->local_experts;
}
std::optional<Mode> GemmAllToAll::auto_choice() const {
  return impl_->ctx.auto_choice();
}
std::optional<Mode> GemmAllToAll::layer_auto_choice() const {
  return impl_->ctx.auto_choice(1);
}
std::size_t GemmAllToAll::tile_rows() const {
  return impl_->tile_rows;
}
std::size_t GemmAllToAll::tile_cols() const {
  return impl_->tile_cols;
}

}  // namespace tilecomm
