// The fused GemmAllToAll kernel: a BlockExchange (ops/common/block_exchange.hpp) whose blocks are
// result tiles. Tile (local expert e, source s, rows, columns) lands in s's y at the rows of
// global expert first_expert[me] + e. Tiles for off-node sources go first, then other on-node
// ranks, then this rank (OpOptions::remote_first).
//
// No call starts with a collective, so an owner does not know where its blocks go in an on-node
// source's y (that depends on what the source routed to every other owner): it stores them into
// its slot of the source's inbox half in its own order (Routing::pair_row), and the source, which
// knows its y, copies them into place. Off-node blocks go straight into y (the receiving proxy
// knows where). Zero-copy (y = output(), the source's inbox half): the source's header tells each
// owner where the owner's rows start in its y, and the owner, which reads it before storing,
// stores straight into place (BlockRoute::placed); nothing is copied. Per call every pair exchanges
// a header with the counts it shares (fill_header/check_header), checked before any block of that
// peer is trusted.
#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"

namespace tilecomm::detail {

BlockRoute GemmAllToAllImpl::result_route(const GemmTile& t) const {
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

std::vector<BlockRoute> GemmAllToAllImpl::result_arrivals() const {
  std::vector<BlockRoute> arrivals;
  const int my_local = topo.local_rank;
  for (int o : ctx.source_order()) {
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

void GemmAllToAllImpl::run_fused(const float* x, float* y) {
  const bool into_view = zero_copy(y);  // before the call's epoch begins (FusedPlan)
  const std::vector<GemmTile> tiles = make_tiles(0, local_experts, ctx.options.remote_first);
  std::vector<BlockRoute> produced;
  produced.reserve(tiles.size());
  for (const GemmTile& t : tiles)
    produced.push_back(result_route(t));
  const std::vector<BlockRoute> arrivals = result_arrivals();
  fused_exchange.run(
      produced, arrivals, y,
      [&](std::size_t i, float* dst, std::size_t ld) { gemm_tile(x, tiles[i], dst, ld); }, &headers,
      into_view);
}

}  // namespace tilecomm::detail
