// The fused GemmAllToAll kernel: a BlockExchange (ops/common/block_exchange.hpp) whose blocks are
// result tiles. Tile (local expert e, source s, rows, columns) lands in s's y at the rows of
// global expert first_expert[me] + e. Tiles for off-node sources go first, then other on-node
// ranks, then this rank (OpOptions::remote_first). The routing exchange at the start of each call
// is collective, which orders calls: one inbox suffices.
#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"

namespace tilecomm::detail {

void GemmAllToAllImpl::run_fused(std::span<const float* const> weights, const float* x, float* y) {
  const int me = topo.rank;
  const std::vector<GemmTile> tiles = make_tiles(0, local_experts, ctx.options.remote_first);
  std::vector<BlockRoute> produced, arrivals;
  produced.reserve(tiles.size());
  for (const GemmTile& t : tiles) {
    const std::size_t g = first_expert[me] + t.expert;
    const Block block{(y_row(t.src, g) + t.row0) * n + t.col0, t.row1 - t.row0, t.col1 - t.col0};
    produced.push_back({t.src, block, flag_of(g, t.row0, t.col0)});
  }
  for (int o : ctx.source_order()) {
    for (std::size_t g = first_expert[o]; g < first_expert[o + 1]; ++g) {
      const std::size_t rows = route.all_send[me * experts() + g];
      for (std::size_t r = 0; r < rows; r += tile_rows)
        for (std::size_t c = 0; c < n; c += tile_cols) {
          const Block block{(y_row(me, g) + r) * n + c, std::min(rows, r + tile_rows) - r,
                            std::min(n, c + tile_cols) - c};
          arrivals.push_back({o, block, flag_of(g, r, c)});
        }
    }
  }
  fused_exchange.run(produced, arrivals, y, [&](std::size_t i, float* dst, std::size_t ld) {
    gemm_tile(weights, x, tiles[i], dst, ld);
  });
}

}  // namespace tilecomm::detail
