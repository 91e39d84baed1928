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
