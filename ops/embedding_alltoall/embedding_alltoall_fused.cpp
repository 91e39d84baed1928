// The fused EmbeddingAllToAll kernel.
//
// One persistent kernel. Its first tasks pool tiles (local table t, destination q, block of q's
// bags), each straight into where it is going: a tile for this rank lands in `out`; a tile for an
// on-node rank lands in that rank's shared inbox (laid out like its `out`) followed by a release
// flag; a tile for an off-node rank lands in a staging buffer the proxy sends, and that rank's
// proxy receives it straight into its `out` (a strided MPI datatype). Tiles for off-node ranks go
// first, then other on-node ranks, then this rank. The remaining tasks move arriving on-node tiles
// from the inbox into `out` (or just wait for the proxy's arrival flag), while compute is still
// running. The argument check at the start of every call is a collective, so a rank cannot start
// storing into a peer's inbox before that peer has finished the previous call: one inbox suffices.
#include <fmt/format.h>

#include <cstring>

#include "ops/embedding_alltoall/embedding_alltoall_impl.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

void EmbeddingAllToAllImpl::setup_fused() {
  const int p = comm.size;
  for (int q = 0; q < p; ++q)
    nblk_max = std::max(nblk_max, nblk(q));
  std::size_t lb_max = 0;
  for (int q = 0; q < p; ++q)
    lb_max = std::max(lb_max, lb(q));
  const std::size_t total = first_tab[p];
  SegmentLayout layout;
  off_flags = layout.add(TileFlags::bytes_for(total * nblk_max));
  off_inbox = layout.add(lb_max * total * dim * sizeof(float));
  shm = std::make_unique<SymmetricBuffer>(comm, layout.size());
  for (int l = 0; l < comm.local_size; ++l)
    flags.emplace_back(shm->segment(l) + off_flags, total * nblk_max);
  stage_off.assign(p + 1, 0);
  for (int q = 0; q < p; ++q)
    stage_off[q + 1] = stage_off[q] + (comm.on_node(q) ? 0 : lb(q) * ntab * dim);
  if (comm.num_nodes > 1) {
    staging.resize(stage_off[p]);
    proxy = std::make_unique<Proxy>(op_comm, comm.timeout_s, "EmbeddingAllToAll");
  }
}

MPI_Datatype EmbeddingAllToAllImpl::rows_type(std::size_t nbags) {
  auto it = types.find(nbags);
  if (it != types.end()) return it->second;
  MPI_Datatype t;
  mpi_check(MPI_Type_vector(static_cast<int>(nbags), static_cast<int>(dim),
                            static_cast<int>(first_tab[comm.size] * dim), MPI_FLOAT, &t),
            "MPI_Type_vector");
  mpi_check(MPI_Type_commit(&t), "MPI_Type_commit");
  types.emplace(nbags, t);
  return t;
}

void EmbeddingAllToAllImpl::run_fused(std::span<const float* const> tables,
                                      std::span<const EmbeddingBags> bags, float* out) {
  const std::uint32_t e = ++epoch;
  const int p = comm.size, me = comm.rank, my_local = comm.local_rank;
  const std::size_t total = first_tab[p], row = total * dim;  // floats per bag in out
  const std::vector<EmbTile> tiles = make_tiles(0, 1, opt.remote_first);
  // Arriving tiles: (source s, its table ts, block k of my bags); flag index
  // (first_tab[s]+ts)*nblk_max+k.
  struct Arrival {
    int s;
    std::size_t gt, b0, b1;
  };
  std::vector<Arrival> arrivals;
  for (int s = 0; s < p; ++s) {
    if (s == me) continue;
    for (std::size_t gt = first_tab[s]; gt < first_tab[s + 1]; ++gt)
      for (std::size_t b = 0; b < lb(me); b += tile)
        arrivals.push_back({s, gt, b, std::min(lb(me), b + tile)});
  }
  auto flag_of = [&](std::size_t gt, std::size_t b0) { return gt * nblk_max + b0 / tile; };

  const bool remote = proxy != nullptr;
  if (remote) {
    proxy->reset();
    for (const Arrival& a : arrivals)
      if (!comm.on_node(a.s))
        proxy->expect_recv(out + a.b0 * row + a.gt * dim, 1, rows_type(a.b1 - a.b0), a.s,
                           static_cast<int>(flag_of(a.gt, a.b0)), &flags[my_local],
                           flag_of(a.gt, a.b0), e);
    std::size_t sends = 0;
    for (const EmbTile& k : tiles)
      sends += comm.on_node(k.q) ? 0 : 1;
    proxy->expect_sends(sends);
    proxy->launch(comm_stream, "embedding.proxy");
  }

  std::vector<std::size_t> order(tiles.size() + arrivals.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  const double timeout = comm.timeout_s;
  auto body = [&, e](const WorkgroupContext& wg, std::size_t task) {
    if (task < tiles.size()) {
      const EmbTile& k = tiles[task];
      const std::size_t g0 = batch_begin[k.q] + k.b0, g1 = batch_begin[k.q] + k.b1;
      const std::size_t gt = first_tab[me] + k.t;
      const auto bytes = static_cast<std::int64_t>((k.b1 - k.b0) * dim * sizeof(float));
      if (k.q == me) {
        pool(tables[k.t], bags[k.t], g0, g1, out + k.b0 * row + gt * dim, row);
      } else if (comm.on_node(k.q)) {
        const int ql = comm.local_of[k.q];
        pool(tables[k.t], bags[k.t], g0, g1, inbox(ql) + k.b0 * row + gt * dim, row);
        flags[ql].signal(flag_of(gt, k.b0), e);
        wg.mark("tile stored", static_cast<std::int64_t>(task), k.q, bytes);
      } else {
        float* st = staging.data() + stage_off[k.q] + (k.t * lb(k.q) + k.b0) * dim;
        pool(tables[k.t], bags[k.t], g0, g1, st, dim);
        proxy->send(wg, st, static_cast<int>((k.b1 - k.b0) * dim), MPI_FLOAT, k.q,
                    static_cast<int>(flag_of(gt, k.b0)));
        wg.mark("tile handed to proxy", static_cast<std::int64_t>(task), k.q, bytes);
      }
      return;
    }
    const Arrival& a = arrivals[task - tiles.size()];
    const char* what = "EmbeddingAllToAll: tile (table * blocks + block)";
    if (comm.on_node(a.s))
      flags[my_local].wait(flag_of(a.gt, a.b0), e, timeout, what);
    else
      proxy->wait(wg, flags[my_local], flag_of(a.gt, a.b0), e, what);  // received by the proxy
    if (comm.on_node(a.s)) {
      const float* src = inbox(my_local);
      for (std::size_t b = a.b0; b < a.b1; ++b)
        std::memcpy(out + b * row + a.gt * dim, src + b * row + a.gt * dim, dim * sizeof(float));
    }
  };
  const std::size_t slots = static_cast<std::size_t>(dev.num_cus()) * dev.wg_slots_per_cu();
  const std::size_t wgs = std::max<std::size_t>(1, remote ? slots - 1 : slots);
  if (!order.empty())
    compute_stream.launch_persistent({"embedding_alltoall.fused", wgs, 0}, std::move(order), body);
  compute_stream.synchronize();
  if (remote) comm_stream.synchronize();
}

}  // namespace tilecomm::detail
