// EmbeddingAllToAll: set-up, the pooling kernel, and the unfused modes (sequential, shaped).
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "ops/common/op_util.hpp"
#include "ops/embedding_alltoall/embedding_alltoall_impl.hpp"
#include "ops/kernels/embedding_pool.hpp"
#include "tilecomm/bench_hooks.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {

constexpr OpInfo kInfo{
    "EmbeddingAllToAll", "embedding_alltoall", {"dim", "global_batch", "tables"}};

// Tables owned by each rank.
std::vector<long long> tables_per_rank(const OpContext& ctx, std::size_t local_tables) {
  std::vector<long long> counts(ctx.topo.size);
  long long mine = static_cast<long long>(local_tables);
  mpi_check(MPI_Allgather(&mine, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, ctx.comm.mpi),
            "MPI_Allgather");
  return counts;
}

}  // namespace

EmbeddingAllToAllImpl::EmbeddingAllToAllImpl(Communicator& comm, Device& device,
                                             std::vector<std::size_t> rows, std::size_t dim_,
                                             std::size_t batch_, Pooling pooling_,
                                             OpOptions options)
    : ctx(comm, device, std::move(options), kInfo),
      topo(ctx.topo),
      table_rows(std::move(rows)),
      dim(dim_),
      batch(batch_),
      pooling(pooling_),
      local_tables(table_rows.size()) {
  const int p = topo.size;
  if (dim == 0 || dim > (1u << 20))
    ctx.invalid(fmt::format("dim = {} (must be in [1, 2^20])", dim));
  if (batch > (std::size_t{1} << 31))
    ctx.invalid(fmt::format("global_batch = {} is too large", batch));
  if (pooling != Pooling::Sum && pooling != Pooling::Mean)
    ctx.invalid(fmt::format("pooling = {} is not Sum or Mean", static_cast<int>(pooling)));
  for (std::size_t t = 0; t < local_tables; ++t)
    if (table_rows[t] > (std::size_t{1} << 40) / dim)
      ctx.invalid(fmt::format("table_rows[{}] = {} is too large", t, table_rows[t]));
  const std::vector<long long> counts = tables_per_rank(ctx, local_tables);
  first_table.assign(p + 1, 0);
  batch_begin.assign(p + 1, 0);
  for (int q = 0; q < p; ++q) {
    first_table[q + 1] = first_table[q] + static_cast<std::size_t>(counts[q]);
    batch_begin[q + 1] = split_begin(batch, p, q + 1);
  }
  // Tile: about 4 tiles per WG slot for each destination, 1..256 bags, under the eager limit
  // across nodes (embedding_alltoall_plan.cpp).
  const std::size_t most_bags = (batch + p - 1) / p;
  tile = ctx.options.tile ? ctx.options.tile
                          : embedding_default_tile(batch, p, first_table[p], ctx.wg_slots(), dim,
                                                   ctx.spans_nodes());
  tile = ctx.min_across_ranks(tile);  // devices may differ in size; the tiling must not
  // Indices per bag are per call: run() refines `pool` until the first Auto call plans.
  ctx.set_model_shape({model::OpKind::EmbeddingAllToAll, batch, 0, dim, local_tables, 1, tile});
  // A tile is one MPI message of (bags x dim) floats, counted in an int (checked before
  // allocating).
  if (std::min(tile, most_bags) * dim > static_cast<std::size_t>(INT_MAX))
    ctx.invalid(
        fmt::format("tile = {} bags x dim = {} is {} floats, more than one MPI message "
                    "holds ({}); use a smaller tile",
                    tile, dim, std::min(tile, most_bags) * dim, INT_MAX));
  ctx.agree(
      {"dim", "global_batch", "pooling", "shaped.chunks", "auto_rounds", "auto_min_trial_us"},
      {static_cast<long long>(dim), static_cast<long long>(batch), static_cast<long long>(pooling),
       ctx.options.shaped.chunks, ctx.options.auto_rounds, ctx.auto_min_trial_us()});
  send_offset.assign(p + 1, 0);
  recv_offset.assign(p + 1, 0);
  for (int q = 0; q < p; ++q) {
    send_offset[q + 1] = send_offset[q] + local_batch(q) * local_tables * dim;
    recv_offset[q + 1] =
        recv_offset[q] + local_batch(topo.rank) * (first_table[q + 1] - first_table[q]) * dim;
    max_blocks = std::max(max_blocks, blocks(q));
  }
  send_buf.resize(send_offset[p]);
  recv_buf.resize(recv_offset[p]);
  SegmentLayout layout;
  fused_exchange.reserve(layout, p, first_table[p] * max_blocks, most_bags * first_table[p] * dim);
  ctx.map_segment(layout);
  fused_exchange.bind(ctx, first_table[p] * dim,
                      "EmbeddingAllToAll: tile (table * blocks + block)");
}

namespace {

// This rank's arguments for one local table; "" when they are fine.
std::string table_error(std::size_t t, bool null, std::size_t rows, const EmbeddingBags& b,
                        std::size_t batch) {
  if (null && rows > 0) return fmt::format("table {}: data is null", t);
  if (b.offsets.size() != batch + 1)
    return fmt::format("table {}: offsets has {} entries; expected global_batch + 1 = {}", t,
                       b.offsets.size(), batch + 1);
  if (!b.weights.empty() && b.weights.size() != b.indices.size())
    return fmt::format("table {}: weights has {} entries for {} indices", t, b.weights.size(),
                       b.indices.size());
  if (b.offsets[0] != 0)
    return fmt::format("table {}: offsets[0] = {} (must be 0)", t, b.offsets[0]);
  for (std::size_t g = 0; g < batch; ++g)
    if (b.offsets[g + 1] < b.offsets[g])
      return fmt::format("table {} bag {}: offsets decrease ({} after {})", t, g, b.offsets[g + 1],
                         b.offsets[g]);
  if (static_cast<std::size_t>(b.offsets[batch]) != b.indices.size())
    return fmt::format("table {}: offsets end at {} but there are {} indices", t, b.offsets[batch],
                       b.indices.size());
  for (std::size_t g = 0; g < batch; ++g)
    for (auto j = b.offsets[g]; j < b.offsets[g + 1]; ++j)
      if (b.indices[j] < 0 || static_cast<std::size_t>(b.indices[j]) >= rows)
        return fmt::format("table {} bag {}: index {} at position {} is out of range [0, {})", t, g,
                           b.indices[j], j, rows);
  return {};
}

}  // namespace

std::string EmbeddingAllToAllImpl::output_error(const float* out, Mode mode) const {
  return fused_exchange.output_error(out, out_floats(), mode);
}

void EmbeddingAllToAllImpl::validate(const TableSet& tables, std::span<const EmbeddingBags> bags,
                                     const float* out, Mode mode) const {
  std::string error;
  if (tables.size() != local_tables)
    error =
        fmt::format("tables has {} entries; this rank owns {} tables", tables.size(), local_tables);
  else if (bags.size() != local_tables)
    error = fmt::format("bags has {} entries; this rank owns {} tables", bags.size(), local_tables);
  else if (out == nullptr && out_floats() > 0)
    error = "out is null";
  else
    error = output_error(out, mode);
  for (std::size_t t = 0; t < local_tables && error.empty(); ++t)
    error = table_error(t, tables.null(t), table_rows[t], bags[t], batch);
  // Without verify mode nothing else is checked per call: shapes were agreed at construction, and
  // a rank that rejects its own arguments raises here before any tile moves, while its peers wait
  // for its tiles until the communicator's deadline (Error(Timeout)).
  if (!ctx.comm.verifier.enabled()) {
    if (!error.empty()) ctx.invalid(error);
    return;
  }
  // Verify mode: every rank learns whether any rank rejected its arguments, before any tile moves.
  // Non-blocking with the communicator's deadline: a rank that never makes this call is a Timeout
  // here, not a hang in a blocking MPI_Allreduce.
  int bad_rank = error.empty() ? -1 : topo.rank;
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, &bad_rank, 1, MPI_INT, MPI_MAX, ctx.mpi, &req),
            "MPI_Iallreduce");
  ctx.comm.wait_all(&req, 1,
                    "EmbeddingAllToAll: argument agreement (MPI_Iallreduce over all ranks)");
  if (!error.empty()) ctx.invalid(error);
  if (bad_rank >= 0)
    ctx.invalid(fmt::format("rank {} rejected its arguments (see its error)", bad_rank));
}

void EmbeddingAllToAllImpl::pool(const TableSet& tables, std::size_t t, const EmbeddingBags& bags,
                                 std::size_t bag0, std::size_t bag1, float* dst,
                                 std::size_t stride) const {
  // The kernel of active_isa(): every path gives bitwise-identical results (ops/kernels/).
  kernels::PoolJob job;
  job.indices = bags.indices.data();
  job.offsets = bags.offsets.data();
  job.weights = bags.weights.empty() ? nullptr : bags.weights.data();
  job.bag0 = bag0;
  job.bag1 = bag1;
  job.dim = dim;
  job.mean = pooling == Pooling::Mean;
  job.dst = dst;
  job.stride = stride;
  if (tables.is_bf16)
    kernels::embedding_pool().bf16(reinterpret_cast<const std::uint16_t*>(tables.bf16[t]), job);
  else
    kernels::embedding_pool().f32(tables.f32[t], job);
}

void EmbeddingAllToAllImpl::pool_to_send(const TableSet& tables,
                                         std::span<const EmbeddingBags> bags,
                                         const EmbeddingTile& k, float* send) const {
  // Send layout: per destination q, [local bag][local table][dim].
  pool(tables, k.table, bags[k.table], batch_begin[k.dst] + k.bag0, batch_begin[k.dst] + k.bag1,
       send + send_offset[k.dst] + (k.bag0 * local_tables + k.table) * dim, local_tables * dim);
}

void EmbeddingAllToAllImpl::exchange(const float* send, float* out, std::size_t c, std::size_t nc) {
  // All-to-Allv of chunk c of every slice, then reshape into out[bag][global table][dim].
  const int p = topo.size, me = topo.rank;
  VarLayout send_layout, recv_layout;
  send_layout.capacity = send_offset[p];
  recv_layout.capacity = recv_offset[p];
  const std::size_t mine_lo = split_begin(local_batch(me), nc, c);
  const std::size_t mine_hi = split_begin(local_batch(me), nc, c + 1);
  for (int q = 0; q < p; ++q) {
    const std::size_t lo = split_begin(local_batch(q), nc, c),
                      hi = split_begin(local_batch(q), nc, c + 1);
    send_layout.counts.push_back((hi - lo) * local_tables * dim);
    send_layout.displs.push_back(send_offset[q] + lo * local_tables * dim);
    const std::size_t tables_of_q = first_table[q + 1] - first_table[q];
    recv_layout.counts.push_back((mine_hi - mine_lo) * tables_of_q * dim);
    recv_layout.displs.push_back(recv_offset[q] + mine_lo * tables_of_q * dim);
  }
  alltoallv(ctx.communicator, send, send_layout, recv_buf.data(), recv_layout, DataType::Float32,
            {ctx.options.algorithm});
  const std::size_t total = first_table[p];
  for (int s = 0; s < p; ++s) {
    const std::size_t tables_of_s = first_table[s + 1] - first_table[s];
    if (tables_of_s == 0)
      continue;  // nothing from s; recv_buf may be empty (memcpy from null is UB)
    for (std::size_t b = mine_lo; b < mine_hi; ++b)
      std::memcpy(out + (b * total + first_table[s]) * dim,
                  recv_buf.data() + recv_offset[s] + b * tables_of_s * dim,
                  tables_of_s * dim * sizeof(float));
  }
}

void EmbeddingAllToAllImpl::run(const TableSet& tables, std::span<const EmbeddingBags> bags,
                                float* out, Mode mode) {
  // The previous call's zero-copy output is the caller's until now (EmbeddingAllToAll::output()).
  fused_exchange.release_outputs();
  if (mode == Mode::Auto && !ctx.auto_planned() && !bags.empty()) {
    // The model's indices per bag: this call's (bags = global batch, the tables' indices).
    std::size_t lookups = 0;
    for (const EmbeddingBags& b : bags)
      lookups += b.indices.size();
    const std::size_t per_bag =
        std::max<std::size_t>(1, lookups / std::max<std::size_t>(1, bags.size() * batch));
    ctx.set_model_shape(
        {model::OpKind::EmbeddingAllToAll, batch, 0, dim, local_tables, per_bag, tile});
  }
  ctx.dispatch(
      mode, {dim, batch, first_table.back()}, [&] { validate(tables, bags, out, mode); },
      [&] { run_sequential(tables, bags, out); }, [&] { run_shaped(tables, bags, out); },
      [&] { run_fused(tables, bags, out); });
}

void EmbeddingAllToAllImpl::run_sequential(const TableSet& tables,
                                           std::span<const EmbeddingBags> bags, float* out) {
  const std::vector<EmbeddingTile> tiles = make_tiles(0, 1, false);
  ctx.run_compute(tiles.size(),
                  [&](std::size_t i) { pool_to_send(tables, bags, tiles[i], send_buf.data()); });
  exchange(send_buf.data(), out, 0, 1);
}

void EmbeddingAllToAllImpl::run_shaped(const TableSet& tables, std::span<const EmbeddingBags> bags,
                                       float* out) {
  // Chunk c = part c of every destination's slice.
  const auto chunks = static_cast<std::size_t>(ctx.options.shaped.chunks);
  std::vector<std::vector<EmbeddingTile>> tiles(chunks);
  for (std::size_t c = 0; c < chunks; ++c)
    tiles[c] = make_tiles(c, chunks, false);
  ctx.run_shaped({chunks, [&](std::size_t c) { return tiles[c].size(); },
                  [&](std::size_t c, std::size_t i) {
                    pool_to_send(tables, bags, tiles[c][i], send_buf.data());
                  },
                  [&](std::size_t c) { exchange(send_buf.data(), out, c, chunks); }});
}

}  // namespace detail

EmbeddingAllToAll::EmbeddingAllToAll(Communicator& comm, Device& device,
                                     std::vector<std::size_t> table_rows, std::size_t dim,
                                     std::size_t global_batch, Pooling pooling, OpOptions options)
    : impl_(std::make_unique<detail::EmbeddingAllToAllImpl>(
          comm, device, std::move(table_rows), dim, global_batch, pooling, std::move(options))) {}
EmbeddingAllToAll::~EmbeddingAllToAll() = default;

void EmbeddingAllToAll::run(std::span<const float* const> tables,
                            std::span<const EmbeddingBags> bags, float* out, Mode mode) {
  impl_->run({.f32 = tables, .bf16 = {}, .is_bf16 = false}, bags, out, mode);
}

void EmbeddingAllToAll::run(std::span<const bfloat16* const> tables,
                            std::span<const EmbeddingBags> bags, float* out, Mode mode) {
  static_assert(sizeof(bfloat16) == sizeof(std::uint16_t));
  impl_->run({.f32 = {}, .bf16 = tables, .is_bf16 = true}, bags, out, mode);
}

std::span<float> EmbeddingAllToAll::output() {
  return {impl_->next_output(), impl_->out_floats()};
}

void bench::compute_only(EmbeddingAllToAll& op, std::span<const float* const> tables,
                         std::span<const EmbeddingBags> bags, float* send) {
  detail::EmbeddingAllToAllImpl& impl = detail::BenchAccess::impl(op);
  const detail::TableSet set{.f32 = tables, .bf16 = {}, .is_bf16 = false};
  impl.validate(set, bags, send, Mode::Sequential);
  const auto tiles = impl.make_tiles(0, 1, false);
  impl.ctx.run_compute(tiles.size(),
                       [&](std::size_t i) { impl.pool_to_send(set, bags, tiles[i], send); });
}

void bench::collective_only(EmbeddingAllToAll& op, const float* send, float* out) {
  detail::BenchAccess::impl(op).exchange(send, out, 0, 1);
}

std::size_t bench::send_elems(const EmbeddingAllToAll& op) {
  return detail::BenchAccess::impl(op).send_offset.back();
}

std::size_t EmbeddingAllToAll::num_tables() const {
  return impl_->first_table.back();
}
std::size_t EmbeddingAllToAll::first_table() const {
  return impl_->first_table[impl_->topo.rank];
}
std::optional<Mode> EmbeddingAllToAll::auto_choice() const {
  return impl_->ctx.auto_choice();
}
std::size_t EmbeddingAllToAll::local_batch() const {
  return impl_->local_batch(impl_->topo.rank);
}
std::size_t EmbeddingAllToAll::batch_begin() const {
  return impl_->batch_begin[impl_->topo.rank];
}
std::size_t EmbeddingAllToAll::dim() const {
  return impl_->dim;
}
std::size_t EmbeddingAllToAll::tile_bags() const {
  return impl_->tile;
}

}  // namespace tilecomm
