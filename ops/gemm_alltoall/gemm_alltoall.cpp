// GemmAllToAll: context set-up, the per-call routing exchange and checks, the GEMM tile, and the
// unfused modes.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "collectives/check.hpp"
#include "ops/common/op_util.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {
[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "GemmAllToAll: " + what);
}
}  // namespace

GemmAllToAllImpl::GemmAllToAllImpl(Communicator& c, Device& d, std::size_t experts, std::size_t k_,
                                   std::size_t n_, std::size_t max_in_, std::size_t max_out_,
                                   OpOptions options)
    : pub(c),
      comm(c.impl()),
      dev(d),
      ne(experts),
      k(k_),
      n(n_),
      max_in(max_in_),
      max_out(max_out_),
      opt(std::move(options)) {
  const int p = comm.size;
  const std::size_t limit = INT_MAX;
  if (k == 0 || k > limit) bad(fmt::format("k = {} (must be in [1, {}])", k, limit));
  if (n == 0 || n > limit) bad(fmt::format("n = {} (must be in [1, {}])", n, limit));
  if (max_in > limit / k) bad(fmt::format("max_rows_in = {} is too large for k = {}", max_in, k));
  if (max_out > limit / n)
    bad(fmt::format("max_rows_out = {} is too large for n = {}", max_out, n));
  if (opt.shaped.chunks < 1)
    bad(fmt::format("shaped.chunks = {} (must be >= 1)", opt.shaped.chunks));
  tile_r = opt.tile ? opt.tile : 32;
  tile_c = std::min<std::size_t>(n, 256);
  ncb = (n + tile_c - 1) / tile_c;
  agree_across_ranks(comm, "GemmAllToAll", {"k", "n", "tile rows", "shaped.chunks"},
                     {static_cast<long long>(k), static_cast<long long>(n),
                      static_cast<long long>(tile_r), opt.shaped.chunks});
  std::vector<long long> counts(p);
  long long mine = static_cast<long long>(ne);
  mpi_check(MPI_Allgather(&mine, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, comm.comm),
            "MPI_Allgather");
  first_exp.assign(p + 1, 0);
  for (int q = 0; q < p; ++q)
    first_exp[q + 1] = first_exp[q] + static_cast<std::size_t>(counts[q]);
  unsigned long long out_max = max_out;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &out_max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm.comm),
            "MPI_Allreduce");
  max_out_all = out_max;
  max_rb = (max_out_all + tile_r - 1) / tile_r;
  void* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm.comm, MPI_TAG_UB, &tag_ub, &found);
  const std::size_t ub = found ? static_cast<std::size_t>(*static_cast<int*>(tag_ub)) : 32767;
  if (first_exp[p] * std::max<std::size_t>(max_rb, 1) * ncb > ub)
    bad(
        fmt::format("{} experts x {} row blocks x {} column blocks exceed MPI's tag range ({}); "
                    "use a larger tile",
                    first_exp[p], max_rb, ncb, ub));
  blas_single_threaded();
  send_buf.resize(max_in * n);
  mpi_check(MPI_Comm_dup(comm.comm, &op_comm), "MPI_Comm_dup");
  compute_stream = dev.create_stream(Stream::kNormal);
  comm_stream = dev.create_stream(Stream::kHigh);
  setup_fused();
}

GemmAllToAllImpl::~GemmAllToAllImpl() {
  for (auto& [shape, t] : types)
    MPI_Type_free(&t);
  shm.reset();
  if (op_comm != MPI_COMM_NULL) MPI_Comm_free(&op_comm);
}

void GemmAllToAllImpl::prepare(std::span<const float* const> weights, const float* x,
                               std::span<const std::size_t> recv_counts,
                               std::span<const std::size_t> send_counts, const float* y,
                               bool check_y) {
  const int p = comm.size, me = comm.rank;
  const std::size_t ng = first_exp[p];
  std::size_t emax = 0;
  for (int q = 0; q < p; ++q)
    emax = std::max(emax, experts_of(q));
  // Every rank contributes [local error?, send_counts (G), recv_counts (emax * p, padded)], so
  // every rank can check every count and all raise the same error.
  const std::size_t stride = 1 + ng + emax * p;
  std::vector<unsigned long long> mine(stride, 0), all(stride * p);
  std::string error;
  try {
    if (weights.size() != ne)
      bad(fmt::format("weights has {} entries; this rank owns {} experts", weights.size(), ne));
    if (recv_counts.size() != ne * p)
      bad(fmt::format("recv_counts has {} entries; expected local experts x ranks = {}",
                      recv_counts.size(), ne * p));
    if (send_counts.size() != ng)
      bad(fmt::format("send_counts has {} entries; the job has {} experts", send_counts.size(),
                      ng));
    std::size_t in = 0, out = 0;
    for (std::size_t c : recv_counts)
      in += std::min<std::size_t>(c, max_in + 1);
    for (std::size_t c : send_counts)
      out += std::min<std::size_t>(c, max_out + 1);
    if (in > max_in)
      bad(fmt::format("recv_counts add up to {} rows, above max_rows_in = {}", in, max_in));
    if (out > max_out)
      bad(fmt::format("send_counts add up to {} rows, above max_rows_out = {}", out, max_out));
    for (std::size_t e = 0; e < ne; ++e)
      if (weights[e] == nullptr) bad(fmt::format("weights[{}] is null", e));
    if (x == nullptr && in > 0) bad(fmt::format("x is null with {} rows", in));
    if (check_y && y == nullptr && out > 0) bad(fmt::format("y is null with {} rows", out));
    if (x != nullptr && y != nullptr && in > 0 && out > 0 && x < y + out * n && y < x + in * k)
      bad("y overlaps x");
    for (std::size_t g = 0; g < ng; ++g)
      mine[1 + g] = send_counts[g];
    for (std::size_t i = 0; i < ne * p; ++i)
      mine[1 + ng + i] = recv_counts[i];
  } catch (const Error& e) {
    error = e.message();
    std::fill(mine.begin(), mine.end(), 0);
    mine[0] = 1;
  }
  // Non-blocking with the communicator's deadline: a rank that never makes this call is a Timeout
  // here, not a hang in a blocking MPI_Allgather.
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(
      MPI_Iallgather(mine.data(), static_cast<int>(stride), MPI_UNSIGNED_LONG_LONG, all.data(),
                     static_cast<int>(stride), MPI_UNSIGNED_LONG_LONG, op_comm, &req),
      "MPI_Iallgather");
  comm.wait_all(&req, 1, "GemmAllToAll: routing agreement (MPI_Iallgather over all ranks)");
  if (!error.empty()) throw Error(ErrorCode::InvalidArgument, error);
  for (int q = 0; q < p; ++q)
    if (all[q * stride] != 0) bad(fmt::format("rank {} rejected its arguments (see its error)", q));
  for (int o = 0; o < p; ++o)  // owner o's expert e expects recv[e][s] rows from s
    for (std::size_t e = 0; e < experts_of(o); ++e)
      for (int s = 0; s < p; ++s) {
        const auto expected = all[o * stride + 1 + ng + e * p + s];
        const auto sent = all[s * stride + 1 + first_exp[o] + e];
        if (sent != expected)
          throw Error(ErrorCode::Mismatch,
                      fmt::format("GemmAllToAll: rank {} routes {} rows to expert {} (on rank {}), "
                                  "which expects {} rows from it",
                                  s, sent, first_exp[o] + e, o, expected));
      }
  // The routing of this call.
  route.all_send.assign(static_cast<std::size_t>(p) * ng, 0);
  route.ypre.assign(static_cast<std::size_t>(p) * (ng + 1), 0);
  for (int s = 0; s < p; ++s)
    for (std::size_t g = 0; g < ng; ++g) {
      route.all_send[s * ng + g] = all[s * stride + 1 + g];
      route.ypre[s * (ng + 1) + g + 1] = route.ypre[s * (ng + 1) + g] + route.all_send[s * ng + g];
    }
  route.xoff.assign(ne * p + 1, 0);
  for (std::size_t i = 0; i < ne * p; ++i)
    route.xoff[i + 1] = route.xoff[i] + recv_counts[i];
  route.soff.assign(ne * p + 1, 0);
  for (int s = 0; s < p; ++s)
    for (std::size_t e = 0; e < ne; ++e) {
      const std::size_t i = s * ne + e;
      route.soff[i + 1] = route.soff[i] + recv_counts[e * p + s];
    }
  route.rows_in = route.xoff[ne * p];
  route.rows_out = route.ypre[me * (ng + 1) + ng];
}

std::size_t GemmAllToAllImpl::yoff(int s, std::size_t g) const {
  return route.ypre[s * (first_exp[comm.size] + 1) + g];
}

std::vector<GemmTile> GemmAllToAllImpl::make_tiles(std::size_t e0, std::size_t e1,
                                                   bool remote_first) const {
  std::vector<GemmTile> tiles;
  const int p = comm.size, me = comm.rank;
  for (int pass = 0; pass < (remote_first ? 3 : 1); ++pass)
    for (int s = 0; s < p; ++s) {
      const int cls = !remote_first ? 0 : !comm.on_node(s) ? 0 : s != me ? 1 : 2;
      if (cls != pass) continue;
      for (std::size_t e = e0; e < e1; ++e) {
        const std::size_t rows = route.xoff[e * p + s + 1] - route.xoff[e * p + s];
        for (std::size_t r = 0; r < rows; r += tile_r)
          for (std::size_t c = 0; c < n; c += tile_c)
            tiles.push_back({e, s, r, std::min(rows, r + tile_r), c, std::min(n, c + tile_c)});
      }
    }
  return tiles;
}

void GemmAllToAllImpl::gemm_tile(std::span<const float* const> weights, const float* x,
                                 const GemmTile& t, float* dst, std::size_t ldc) const {
  const float* a = x + (route.xoff[t.e * comm.size + t.s] + t.r0) * k;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(t.r1 - t.r0),
              static_cast<int>(t.c1 - t.c0), static_cast<int>(k), 1.0f, a, static_cast<int>(k),
              weights[t.e] + t.c0, static_cast<int>(n), 0.0f, dst, static_cast<int>(ldc));
}

void GemmAllToAllImpl::compute(std::span<const float* const> weights, const float* x,
                               const std::vector<GemmTile>& tiles, std::size_t lds,
                               const char* name) {
  if (tiles.empty()) return;
  // Results go to the send buffer grouped by source rank, then expert (one block per destination).
  compute_stream.launch({name, {tiles.size(), 1}, lds}, [this, weights, x,
                                                         &tiles](const WorkgroupContext& wg) {
    const GemmTile& t = tiles[wg.id];
    gemm_tile(weights, x, t, send_buf.data() + (route.soff[t.s * ne + t.e] + t.r0) * n + t.c0, n);
  });
}

void GemmAllToAllImpl::exchange(float* y, std::size_t c, std::size_t nc) {
  // All-to-Allv of chunk c = part c of every owner's experts: to source s the rows of my experts in
  // the chunk (contiguous in the send buffer), from owner o the rows of its chunk's experts
  // (contiguous in y, which is grouped by global expert).
  const int p = comm.size, me = comm.rank;
  VarLayout sl, rl;
  sl.capacity = route.rows_in * n;
  rl.capacity = route.rows_out * n;
  const std::size_t e0 = split_begin(ne, nc, c), e1 = split_begin(ne, nc, c + 1);
  for (int q = 0; q < p; ++q) {
    sl.displs.push_back(route.soff[q * ne + e0] * n);
    sl.counts.push_back((route.soff[q * ne + e1] - route.soff[q * ne + e0]) * n);
    const std::size_t g0 = first_exp[q] + split_begin(experts_of(q), nc, c);
    const std::size_t g1 = first_exp[q] + split_begin(experts_of(q), nc, c + 1);
    rl.displs.push_back(yoff(me, g0) * n);
    rl.counts.push_back((yoff(me, g1) - yoff(me, g0)) * n);
  }
  alltoallv(pub, send_buf.data(), sl, y, rl, DataType::Float32, {opt.algorithm});
}

void GemmAllToAllImpl::run_sequential(std::span<const float* const> weights, const float* x,
                                      float* y) {
  const std::vector<GemmTile> tiles = make_tiles(0, ne, false);
  compute(weights, x, tiles, 0, "moe.gemm");
  compute_stream.synchronize();
  exchange(y, 0, 1);
}

void GemmAllToAllImpl::run_shaped(std::span<const float* const> weights, const float* x, float* y) {
  // Chunk c = part c of every rank's experts: its GEMMs run with shaped LDS on the compute stream;
  // its All-to-Allv runs as a one-WG kernel on the high-priority stream while chunk c+1 computes.
  const std::size_t nc = static_cast<std::size_t>(opt.shaped.chunks);
  const std::size_t lds = shaped_lds_bytes(dev, opt.shaped.free_cus);
  std::vector<std::vector<GemmTile>> tiles(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    tiles[c] = make_tiles(split_begin(ne, nc, c), split_begin(ne, nc, c + 1), false);
    compute(weights, x, tiles[c], lds, "moe.gemm.chunk");
    comm_stream.wait(compute_stream.record());
    comm_stream.launch({"alltoallv.chunk", {1, 1}, 0},
                       [this, y, c, nc](const WorkgroupContext&) { exchange(y, c, nc); });
  }
  compute_stream.synchronize();
  comm_stream.synchronize();
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
  detail::check_op_call(impl_->comm, detail::CallKind::GemmAllToAll,
                        {impl_->k, impl_->n, impl_->first_exp.back()}, to_string(mode));
  impl_->prepare(weights, x, recv_counts, send_counts, y);
  switch (mode) {
    case Mode::Sequential:
      return impl_->run_sequential(weights, x, y);
    case Mode::Shaped:
      return impl_->run_shaped(weights, x, y);
    case Mode::Fused:
      return impl_->run_fused(weights, x, y);
  }
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("GemmAllToAll::run: mode = {}", static_cast<int>(mode)));
}

void GemmAllToAll::compute_only(std::span<const float* const> weights, const float* x,
                                std::span<const std::size_t> recv_counts,
                                std::span<const std::size_t> send_counts) {
  impl_->prepare(weights, x, recv_counts, send_counts, nullptr, false);
  const auto tiles = impl_->make_tiles(0, impl_->ne, false);
  impl_->compute(weights, x, tiles, 0, "moe.gemm");
  impl_->compute_stream.synchronize();
}

void GemmAllToAll::collective_only(float* y) {
  if (y == nullptr && impl_->route.rows_out > 0)
    throw Error(ErrorCode::InvalidArgument, "GemmAllToAll::collective_only: y is null");
  impl_->exchange(y, 0, 1);
}

std::size_t GemmAllToAll::num_experts() const {
  return impl_->first_exp.back();
}
std::size_t GemmAllToAll::first_expert() const {
  return impl_->first_exp[impl_->comm.rank];
}
std::size_t GemmAllToAll::local_experts() const {
  return impl_->ne;
}
std::size_t GemmAllToAll::tile_rows() const {
  return impl_->tile_r;
}
std::size_t GemmAllToAll::tile_cols() const {
  return impl_->tile_c;
}

}  // namespace tilecomm
