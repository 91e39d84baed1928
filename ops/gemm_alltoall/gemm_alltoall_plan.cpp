// GemmAllToAll's plan of a call (gemm_alltoall_plan.hpp): the operator's kernels and the simulator
// both build their task lists from it.
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"

#include <numeric>

namespace tilecomm::detail {

void GemmAllToAllPlan::set_tiling(std::size_t k, std::size_t tile) {
  tile_rows = tile ? tile : kGemmAllToAllTileRows;
  tile_cols = std::min<std::size_t>(n, 256);
  // Tiles bound for (or coming from) another node (gemm_alltoall_off_rows): as many rows as fit
  // the eager limit, so narrow results do not go out as many small MPI messages (each costs its
  // sender ~20 us of CPU through TCP here, as much as its GEMM). At N >= 256 that is 48 rows,
  // 48 KiB: whole 32-row tiles sent 32 KiB, and fused took 1.08-1.17x sequential's time at 2
  // emulated nodes, 10 Gbit/s (docs/ops.md). An explicit OpOptions::tile applies to every path.
  off_rows = tile ? tile_rows : gemm_alltoall_off_rows(n);
  // Tiles within the node: whole row tiles enough to pay for a tile's task, flag and wait
  // (gemm_alltoall_node_rows: thin GEMMs, K = 1, take 4x as many rows).
  node_rows = tile ? tile_rows : gemm_alltoall_node_rows(k, n, tile_rows);
  // Every tile starts at a multiple of off_rows or node_rows: the flags count rows in their
  // greatest common divisor.
  flag_rows = std::gcd(off_rows, node_rows);
  col_blocks = (n + tile_cols - 1) / tile_cols;
}

void GemmAllToAllPlan::derive_routing(std::span<const std::size_t> recv_counts,
                                      std::span<const std::size_t> send_counts, bool layer) {
  const int p = topology->size;
  const std::size_t ng = experts(), ne = local_experts;
  route.send_counts.assign(send_counts.begin(), send_counts.end());
  route.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  route.y_row.assign(ng + 1, 0);
  for (std::size_t g = 0; g < ng; ++g)
    route.y_row[g + 1] = route.y_row[g] + send_counts[g];
  route.x_row.assign(ne * p + 1, 0);
  for (std::size_t i = 0; i < ne * p; ++i)
    route.x_row[i + 1] = route.x_row[i] + recv_counts[i];
  route.send_row.assign(ne * p + 1, 0);
  route.pair_row.assign(ne * p, 0);
  for (int s = 0; s < p; ++s)
    for (std::size_t e = 0; e < ne; ++e) {
      const std::size_t i = s * ne + e;
      route.send_row[i + 1] = route.send_row[i] + recv_counts[e * p + s];
      route.pair_row[e * p + s] = route.send_row[i] - route.send_row[s * ne];
    }
  route.rows_in = route.x_row[ne * p];
  route.rows_out = route.y_row[ng];
  if (!layer) return;
  // run_layer's unfused modes receive the dispatch source by source (x_in): block (e, s) follows
  // the blocks of s's rows for this rank's earlier experts.
  std::size_t row = 0;
  for (int s = 0; s < p; ++s)
    for (std::size_t e = 0; e < ne; ++e) {
      route.x_row[e * p + s] = row;
      row += recv_counts[e * p + s];
    }
}

std::vector<GemmTile> GemmAllToAllPlan::make_tiles(std::size_t e0, std::size_t e1,
                                                   std::span<const int> sources) const {
  std::vector<GemmTile> tiles;
  const int p = topology->size;
  for (int s : sources)
    for (std::size_t e = e0; e < e1; ++e) {
      const std::size_t rows = route.recv_counts[e * p + s];
      // Column blocks outermost: consecutive tiles read the same packed weight panels (K x
      // tile_cols), which then come from L2/L3 (2048 x 4096 x 1024 in 32-row tiles: 51 -> 70
      // GFLOP/s on one core, docs/kernels.md "GEMM kernel").
      for (std::size_t c = 0; c < n; c += tile_cols)
        for_row_tiles(s, rows, [&](std::size_t r, std::size_t h) {
          tiles.push_back({e, s, r, r + h, c, std::min(n, c + tile_cols)});
        });
    }
  return tiles;
}

BlockRoute GemmAllToAllPlan::result_route(const GemmTile& t) const {
  const Topology& topo = *topology;
  const int me = topo.rank;
  const std::size_t g = first_expert[me] + t.expert;
  BlockRoute r{t.src, {0, t.row1 - t.row0, t.col1 - t.col0}, flag_of(g, t.row0, t.col0)};
  if (t.src == me)
    r.block.offset = (y_row(g) + t.row0) * n + t.col0;
  else if (topo.on_node(t.src)) {
    const std::size_t in_pair =
        (route.pair_row[t.expert * topo.size + t.src] + t.row0) * n + t.col0;
    r.inbox = slot_offset(topo.local_rank, topo.local_of[t.src]) + in_pair;
    r.placed = in_pair;  // from the source's output row of this rank's first expert (zero-copy)
  }
  return r;
}

std::vector<BlockRoute> GemmAllToAllPlan::result_arrivals(std::span<const int> owners) const {
  const Topology& topo = *topology;
  std::vector<BlockRoute> arrivals;
  const int my_local = topo.local_rank;
  for (int o : owners) {
    const std::size_t slot = topo.on_node(o) ? slot_offset(topo.local_of[o], my_local) : 0;
    for (std::size_t g = first_expert[o]; g < first_expert[o + 1]; ++g) {
      const std::size_t rows = route.send_counts[g];
      const std::size_t pair_row = y_row(g) - y_row(first_expert[o]);
      for (std::size_t c = 0; c < n; c += tile_cols)  // in the owner's order (make_tiles)
        for_row_tiles(o, rows, [&](std::size_t r, std::size_t h) {
          const Block block{(y_row(g) + r) * n + c, h, std::min(n, c + tile_cols) - c};
          arrivals.push_back({o, block, flag_of(g, r, c), slot + (pair_row + r) * n + c});
        });
    }
  }
  return arrivals;
}

}  // namespace tilecomm::detail
