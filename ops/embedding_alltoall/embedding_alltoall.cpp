// EmbeddingAllToAll: context set-up, argument checks, the pooling kernel, and the unfused modes.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "collectives/check.hpp"
#include "ops/common/op_util.hpp"
#include "ops/embedding_alltoall/embedding_alltoall_impl.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {
[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "EmbeddingAllToAll: " + what);
}
}  // namespace

EmbeddingAllToAllImpl::EmbeddingAllToAllImpl(Communicator& c, Device& d, std::vector<std::size_t> r,
                                             std::size_t dim_, std::size_t batch_, Pooling pool_,
                                             OpOptions options)
    : pub(c),
      comm(c.impl()),
      dev(d),
      rows(std::move(r)),
      dim(dim_),
      batch(batch_),
      pooling(pool_),
      opt(std::move(options)),
      ntab(rows.size()) {
  const int p = comm.size;
  if (dim == 0 || dim > (1u << 20)) bad(fmt::format("dim = {} (must be in [1, 2^20])", dim));
  if (batch > (std::size_t{1} << 31)) bad(fmt::format("global_batch = {} is too large", batch));
  if (opt.shaped.chunks < 1)
    bad(fmt::format("shaped.chunks = {} (must be >= 1)", opt.shaped.chunks));
  if (pooling != Pooling::Sum && pooling != Pooling::Mean)
    bad(fmt::format("pooling = {} is not Sum or Mean", static_cast<int>(pooling)));
  for (std::size_t t = 0; t < ntab; ++t)
    if (rows[t] > (std::size_t{1} << 40) / dim)
      bad(fmt::format("table_rows[{}] = {} is too large", t, rows[t]));
  std::vector<long long> counts(p);
  long long mine = static_cast<long long>(ntab);
  mpi_check(MPI_Allgather(&mine, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, comm.comm),
            "MPI_Allgather");
  // Tile: about 4 tiles per WG slot for each destination, 1..256 bags.
  const std::size_t slots = static_cast<std::size_t>(dev.num_cus()) * dev.wg_slots_per_cu();
  const std::size_t lb_max = (batch + p - 1) / p;
  long long all_tables = 0;
  for (long long n : counts)
    all_tables += n;
  const std::size_t avg_tables = std::max<std::size_t>(1, static_cast<std::size_t>(all_tables) / p);
  tile = opt.tile ? opt.tile : std::clamp<std::size_t>(lb_max * avg_tables / (4 * slots), 1, 256);
  tile = min_across_ranks(comm, tile);  // devices may differ in size; the tiling must not
  agree_across_ranks(comm, "EmbeddingAllToAll", {"dim", "global_batch", "pooling", "shaped.chunks"},
                     {static_cast<long long>(dim), static_cast<long long>(batch),
                      static_cast<long long>(pooling), opt.shaped.chunks});
  first_tab.assign(p + 1, 0);
  batch_begin.assign(p + 1, 0);
  for (int q = 0; q < p; ++q) {
    first_tab[q + 1] = first_tab[q] + static_cast<std::size_t>(counts[q]);
    batch_begin[q + 1] = split_begin(batch, p, q + 1);
  }
  send_off.assign(p + 1, 0);
  recv_off.assign(p + 1, 0);
  for (int q = 0; q < p; ++q) {
    send_off[q + 1] = send_off[q] + lb(q) * ntab * dim;
    recv_off[q + 1] = recv_off[q] + lb(comm.rank) * (first_tab[q + 1] - first_tab[q]) * dim;
  }
  send_buf.resize(send_off[p]);
  recv_buf.resize(recv_off[p]);
  mpi_check(MPI_Comm_dup(comm.comm, &op_comm), "MPI_Comm_dup");
  compute_stream = dev.create_stream(Stream::kNormal);
  comm_stream = dev.create_stream(Stream::kHigh);
  setup_fused();
}

EmbeddingAllToAllImpl::~EmbeddingAllToAllImpl() {
  for (auto& [n, t] : types)
    MPI_Type_free(&t);
  shm.reset();
  if (op_comm != MPI_COMM_NULL) MPI_Comm_free(&op_comm);
}

void EmbeddingAllToAllImpl::check_args(std::span<const float* const> tables,
                                       std::span<const EmbeddingBags> bags,
                                       const float* out) const {
  std::string error;
  try {
    if (tables.size() != ntab)
      bad(fmt::format("tables has {} entries; this rank owns {} tables", tables.size(), ntab));
    if (bags.size() != ntab)
      bad(fmt::format("bags has {} entries; this rank owns {} tables", bags.size(), ntab));
    if (out == nullptr && lb(comm.rank) * first_tab.back() > 0) bad("out is null");
    for (std::size_t t = 0; t < ntab; ++t) {
      const EmbeddingBags& b = bags[t];
      if (tables[t] == nullptr && rows[t] > 0) bad(fmt::format("table {}: data is null", t));
      if (b.offsets.size() != batch + 1)
        bad(fmt::format("table {}: offsets has {} entries; expected global_batch + 1 = {}", t,
                        b.offsets.size(), batch + 1));
      if (!b.weights.empty() && b.weights.size() != b.indices.size())
        bad(fmt::format("table {}: weights has {} entries for {} indices", t, b.weights.size(),
                        b.indices.size()));
      if (b.offsets[0] != 0)
        bad(fmt::format("table {}: offsets[0] = {} (must be 0)", t, b.offsets[0]));
      for (std::size_t g = 0; g < batch; ++g)
        if (b.offsets[g + 1] < b.offsets[g])
          bad(fmt::format("table {} bag {}: offsets decrease ({} after {})", t, g, b.offsets[g + 1],
                          b.offsets[g]));
      if (static_cast<std::size_t>(b.offsets[batch]) != b.indices.size())
        bad(fmt::format("table {}: offsets end at {} but there are {} indices", t, b.offsets[batch],
                        b.indices.size()));
      for (std::size_t g = 0; g < batch; ++g)
        for (auto j = b.offsets[g]; j < b.offsets[g + 1]; ++j)
          if (b.indices[j] < 0 || static_cast<std::size_t>(b.indices[j]) >= rows[t])
            bad(fmt::format("table {} bag {}: index {} at position {} is out of range [0, {})", t,
                            g, b.indices[j], j, rows[t]));
    }
  } catch (const Error& e) {
    error = e.message();
  }
  // Every rank learns whether any rank rejected its arguments, before any tile moves.
  int bad_rank = error.empty() ? -1 : comm.rank;
  // Non-blocking with the communicator's deadline: a rank that never makes this call is a Timeout
  // here, not a hang in a blocking MPI_Allreduce.
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, &bad_rank, 1, MPI_INT, MPI_MAX, op_comm, &req),
            "MPI_Iallreduce");
  comm.wait_all(&req, 1, "EmbeddingAllToAll: argument agreement (MPI_Iallreduce over all ranks)");
  if (!error.empty()) throw Error(ErrorCode::InvalidArgument, error);
  if (bad_rank >= 0) bad(fmt::format("rank {} rejected its arguments (see its error)", bad_rank));
}

void EmbeddingAllToAllImpl::pool(const float* table, const EmbeddingBags& bags, std::size_t g0,
                                 std::size_t g1, float* dst, std::size_t stride) const {
  for (std::size_t g = g0; g < g1; ++g, dst += stride) {
    std::fill(dst, dst + dim, 0.0f);
    const auto begin = bags.offsets[g], end = bags.offsets[g + 1];
    for (auto j = begin; j < end; ++j) {
      const float* row = table + static_cast<std::size_t>(bags.indices[j]) * dim;
      const float w = bags.weights.empty() ? 1.0f : bags.weights[j];
      for (std::size_t d = 0; d < dim; ++d)
        dst[d] += w * row[d];
    }
    if (pooling == Pooling::Mean && end > begin) {
      const float n = static_cast<float>(end - begin);
      for (std::size_t d = 0; d < dim; ++d)
        dst[d] /= n;
    }
  }
}

std::vector<EmbTile> EmbeddingAllToAllImpl::make_tiles(std::size_t c, std::size_t nc,
                                                       bool remote_first) const {
  std::vector<EmbTile> tiles;
  const int p = comm.size, me = comm.rank;
  // Destination classes in order: off-node, other on-node ranks, this rank (when remote_first).
  for (int pass = 0; pass < (remote_first ? 3 : 1); ++pass)
    for (int q = 0; q < p; ++q) {
      const int cls = !remote_first ? 0 : !comm.on_node(q) ? 0 : q != me ? 1 : 2;
      if (cls != pass) continue;
      const std::size_t lo = split_begin(lb(q), nc, c), hi = split_begin(lb(q), nc, c + 1);
      for (std::size_t t = 0; t < ntab; ++t)
        for (std::size_t b = lo; b < hi; b += tile)
          tiles.push_back({t, q, b, std::min(hi, b + tile)});
    }
  return tiles;
}

void EmbeddingAllToAllImpl::compute(std::span<const float* const> tables,
                                    std::span<const EmbeddingBags> bags, float* send,
                                    const std::vector<EmbTile>& tiles, std::size_t lds,
                                    const char* name) {
  if (tiles.empty()) return;
  // send layout: per destination q, [local bag b][local table t][dim].
  // The kernel may run after this function returns (shaped mode): capture the spans by value.
  compute_stream.launch({name, {tiles.size(), 1}, lds}, [this, tables, bags, send,
                                                         &tiles](const WorkgroupContext& wg) {
    const EmbTile& k = tiles[wg.id];
    pool(tables[k.t], bags[k.t], batch_begin[k.q] + k.b0, batch_begin[k.q] + k.b1,
         send + send_off[k.q] + (k.b0 * ntab + k.t) * dim, ntab * dim);
  });
}

void EmbeddingAllToAllImpl::exchange(const float* send, float* out, std::size_t c, std::size_t nc) {
  // All-to-Allv of chunk c of every slice, then reshape into out[b][global table][dim].
  const int p = comm.size, me = comm.rank;
  VarLayout sl, rl;
  sl.capacity = send_off[p];
  rl.capacity = recv_off[p];
  const std::size_t mlo = split_begin(lb(me), nc, c), mhi = split_begin(lb(me), nc, c + 1);
  for (int q = 0; q < p; ++q) {
    const std::size_t lo = split_begin(lb(q), nc, c), hi = split_begin(lb(q), nc, c + 1);
    sl.counts.push_back((hi - lo) * ntab * dim);
    sl.displs.push_back(send_off[q] + lo * ntab * dim);
    const std::size_t ts = first_tab[q + 1] - first_tab[q];
    rl.counts.push_back((mhi - mlo) * ts * dim);
    rl.displs.push_back(recv_off[q] + mlo * ts * dim);
  }
  alltoallv(pub, send, sl, recv_buf.data(), rl, DataType::Float32, {opt.algorithm});
  const std::size_t total = first_tab[p];
  for (int s = 0; s < p; ++s) {
    const std::size_t ts = first_tab[s + 1] - first_tab[s];
    if (ts == 0) continue;  // nothing from s; recv_buf may be empty (memcpy from null is UB)
    for (std::size_t b = mlo; b < mhi; ++b)
      std::memcpy(out + (b * total + first_tab[s]) * dim,
                  recv_buf.data() + recv_off[s] + b * ts * dim, ts * dim * sizeof(float));
  }
}

void EmbeddingAllToAllImpl::run_sequential(std::span<const float* const> tables,
                                           std::span<const EmbeddingBags> bags, float* out) {
  const std::vector<EmbTile> tiles = make_tiles(0, 1, false);
  compute(tables, bags, send_buf.data(), tiles, 0, "embedding.pool");
  compute_stream.synchronize();
  exchange(send_buf.data(), out, 0, 1);
}

void EmbeddingAllToAllImpl::run_shaped(std::span<const float* const> tables,
                                       std::span<const EmbeddingBags> bags, float* out) {
  // Chunk c = part c of every destination's slice: pooled with shaped LDS on the compute stream,
  // exchanged by a one-WG kernel on the high-priority stream while chunk c+1 pools.
  const std::size_t nc = static_cast<std::size_t>(opt.shaped.chunks);
  const std::size_t lds = shaped_lds_bytes(dev, opt.shaped.free_cus);
  std::vector<std::vector<EmbTile>> tiles(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    tiles[c] = make_tiles(c, nc, false);
    compute(tables, bags, send_buf.data(), tiles[c], lds, "embedding.pool.chunk");
    comm_stream.wait(compute_stream.record());
    comm_stream.launch({"alltoall.chunk", {1, 1}, 0}, [this, out, c, nc](const WorkgroupContext&) {
      exchange(send_buf.data(), out, c, nc);
    });
  }
  compute_stream.synchronize();
  comm_stream.synchronize();
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
  detail::check_op_call(impl_->comm, detail::CallKind::EmbeddingAllToAll,
                        {impl_->dim, impl_->batch, impl_->first_tab.back()}, to_string(mode));
  impl_->check_args(tables, bags, out);
  switch (mode) {
    case Mode::Sequential:
      return impl_->run_sequential(tables, bags, out);
    case Mode::Shaped:
      return impl_->run_shaped(tables, bags, out);
    case Mode::Fused:
      return impl_->run_fused(tables, bags, out);
  }
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("EmbeddingAllToAll::run: mode = {}", static_cast<int>(mode)));
}

void EmbeddingAllToAll::compute_only(std::span<const float* const> tables,
                                     std::span<const EmbeddingBags> bags, float* send) {
  impl_->check_args(tables, bags, send);
  const auto tiles = impl_->make_tiles(0, 1, false);
  impl_->compute(tables, bags, send, tiles, 0, "embedding.pool");
  impl_->compute_stream.synchronize();
}

void EmbeddingAllToAll::collective_only(const float* send, float* out) {
  impl_->exchange(send, out, 0, 1);
}
std::size_t EmbeddingAllToAll::send_elems() const {
  return impl_->send_off.back();
}
std::size_t EmbeddingAllToAll::num_tables() const {
  return impl_->first_tab.back();
}
std::size_t EmbeddingAllToAll::first_table() const {
  return impl_->first_tab[impl_->comm.rank];
}
std::size_t EmbeddingAllToAll::local_batch() const {
  return impl_->lb(impl_->comm.rank);
}
std::size_t EmbeddingAllToAll::batch_begin() const {
  return impl_->batch_begin[impl_->comm.rank];
}
std::size_t EmbeddingAllToAll::dim() const {
  return impl_->dim;
}
std::size_t EmbeddingAllToAll::tile_bags() const {
  return impl_->tile;
}

}  // namespace tilecomm
