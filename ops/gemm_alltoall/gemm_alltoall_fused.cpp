// The fused GemmAllToAll kernel.
//
// One persistent kernel. Its first tasks compute result tiles (local expert e, source rank s, row
// block, column block), each straight into where it is going: a tile for this rank lands in `y`; a
// tile for an on-node rank lands in that rank's shared inbox (laid out like its y) followed by a
// release flag; a tile for an off-node rank lands in a staging buffer the proxy sends, and that
// rank's proxy receives it straight into its `y` (a strided MPI datatype). Tiles for off-node
// sources go first, then other on-node ranks, then this rank. The remaining tasks copy arriving
// on-node tiles from the inbox into y (or wait for the proxy's arrival flag) while compute runs.
// The routing exchange at the start of each call is collective, so no rank stores into a peer's
// inbox before that peer has finished the previous call: one inbox suffices.
#include <cstring>

#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

void GemmAllToAllImpl::setup_fused() {
  SegmentLayout layout;
  off_flags = layout.add(TileFlags::bytes_for(first_exp[comm.size] * max_rb * ncb));
  off_inbox = layout.add(max_out_all * n * sizeof(float));
  shm = std::make_unique<SymmetricBuffer>(comm, layout.size());
  for (int l = 0; l < comm.local_size; ++l)
    flags.emplace_back(shm->segment(l) + off_flags, first_exp[comm.size] * max_rb * ncb);
  if (comm.num_nodes > 1) {
    staging.resize(max_in * n);
    proxy = std::make_unique<Proxy>(op_comm, comm.timeout_s, "GemmAllToAll");
  }
}

MPI_Datatype GemmAllToAllImpl::block_type(std::size_t rows, std::size_t cols) {
  auto it = types.find({rows, cols});
  if (it != types.end()) return it->second;
  MPI_Datatype t;
  mpi_check(MPI_Type_vector(static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(n),
                            MPI_FLOAT, &t),
            "MPI_Type_vector");
  mpi_check(MPI_Type_commit(&t), "MPI_Type_commit");
  types.emplace(std::make_pair(rows, cols), t);
  return t;
}

void GemmAllToAllImpl::run_fused(std::span<const float* const> weights, const float* x, float* y) {
  const std::uint32_t e = ++epoch;
  const int p = comm.size, me = comm.rank, my_local = comm.local_rank;
  const std::size_t ng = first_exp[p];
  const std::vector<GemmTile> tiles = make_tiles(0, ne, opt.remote_first);
  // Tiles arriving from other ranks' experts: (owner, global expert, rows, cols of its results).
  struct Arrival {
    int o;
    std::size_t g, r0, r1, c0, c1;
  };
  std::vector<Arrival> arrivals;
  for (int o = 0; o < p; ++o) {
    if (o == me) continue;
    for (std::size_t g = first_exp[o]; g < first_exp[o + 1]; ++g) {
      const std::size_t rows = route.sent(me, g, ng);
      for (std::size_t r = 0; r < rows; r += tile_r)
        for (std::size_t c = 0; c < n; c += tile_c)
          arrivals.push_back({o, g, r, std::min(rows, r + tile_r), c, std::min(n, c + tile_c)});
    }
  }
  const bool remote = proxy != nullptr;
  if (remote) {
    proxy->reset();
    for (const Arrival& a : arrivals)
      if (!comm.on_node(a.o))
        proxy->expect_recv(y + (yoff(me, a.g) + a.r0) * n + a.c0, 1,
                           block_type(a.r1 - a.r0, a.c1 - a.c0), a.o,
                           static_cast<int>(flag_of(a.g, a.r0, a.c0)), &flags[my_local],
                           flag_of(a.g, a.r0, a.c0), e);
    std::size_t sends = 0;
    for (const GemmTile& t : tiles)
      if (!comm.on_node(t.s)) {
        block_type(t.r1 - t.r0, t.c1 - t.c0);  // create every send type here: WGs only look up
        ++sends;
      }
    proxy->expect_sends(sends);
    proxy->launch(comm_stream, "moe.proxy");
  }

  std::vector<std::size_t> order(tiles.size() + arrivals.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  const double timeout = comm.timeout_s;
  auto body = [&, e](const WorkgroupContext& wg, std::size_t task) {
    if (task < tiles.size()) {
      const GemmTile& t = tiles[task];
      const std::size_t g = first_exp[me] + t.e;
      const std::size_t row = yoff(t.s, g) + t.r0;  // in the destination's y
      const auto bytes = static_cast<std::int64_t>((t.r1 - t.r0) * (t.c1 - t.c0) * sizeof(float));
      if (t.s == me) {
        gemm_tile(weights, x, t, y + row * n + t.c0, n);
      } else if (comm.on_node(t.s)) {
        const int sl = comm.local_of[t.s];
        gemm_tile(weights, x, t, inbox(sl) + row * n + t.c0, n);
        flags[sl].signal(flag_of(g, t.r0, t.c0), e);
        wg.mark("tile stored", static_cast<std::int64_t>(task), t.s, bytes);
      } else {
        float* st = staging.data() + (route.xoff[t.e * p + t.s] + t.r0) * n + t.c0;
        gemm_tile(weights, x, t, st, n);
        const MPI_Datatype type = types.at({t.r1 - t.r0, t.c1 - t.c0});  // read-only in WGs
        proxy->send(wg, st, 1, type, t.s, static_cast<int>(flag_of(g, t.r0, t.c0)));
        wg.mark("tile handed to proxy", static_cast<std::int64_t>(task), t.s, bytes);
      }
      return;
    }
    const Arrival& a = arrivals[task - tiles.size()];
    const char* what = "GemmAllToAll: result tile";
    if (comm.on_node(a.o))
      flags[my_local].wait(flag_of(a.g, a.r0, a.c0), e, timeout, what);
    else
      proxy->wait(wg, flags[my_local], flag_of(a.g, a.r0, a.c0), e, what);  // received by the proxy
    if (comm.on_node(a.o)) {
      const float* src = inbox(my_local);
      const std::size_t row = yoff(me, a.g);
      for (std::size_t r = a.r0; r < a.r1; ++r)
        std::memcpy(y + (row + r) * n + a.c0, src + (row + r) * n + a.c0,
                    (a.c1 - a.c0) * sizeof(float));
    }
  };
  const std::size_t slots = static_cast<std::size_t>(dev.num_cus()) * dev.wg_slots_per_cu();
  const std::size_t wgs = std::max<std::size_t>(1, remote ? slots - 1 : slots);
  if (!order.empty())
    compute_stream.launch_persistent({"gemm_alltoall.fused", wgs, 0}, std::move(order), body);
  compute_stream.synchronize();
  if (remote) comm_stream.synchronize();
}

}  // namespace tilecomm::detail
