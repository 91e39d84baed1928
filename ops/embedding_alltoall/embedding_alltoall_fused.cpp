// The fused EmbeddingAllToAll kernel: a BlockExchange (ops/common/block_exchange.hpp) whose blocks
// are pooled tiles. Tile (local table t, destination q, bags [b0, b1) of q's slice) lands at rows
// b0..b1 of q's `out`, column block of global table first_table[me] + t. Tiles bound off-node go
// first, then other on-node ranks, then this rank (OpOptions::remote_first). The blocks every pair
// exchanges are fixed at construction (only the pooled values change per call), so no per-call
// header is needed; inbox halves by epoch parity and the done flags let calls overlap (see
// block_exchange.hpp). Inbox offsets equal output offsets, so an inbox half can be the caller's
// output itself (EmbeddingAllToAll::output(), BlockExchange's zero_copy).
#include "ops/embedding_alltoall/embedding_alltoall_impl.hpp"

namespace tilecomm::detail {

void EmbeddingAllToAllImpl::run_fused(const TableSet& tables, std::span<const EmbeddingBags> bags,
                                      float* out) {
  // Zero-copy when out is this call's output view (validate() allowed no other overlap).
  const bool zero_copy = fused_exchange.zero_copy(out, out_floats());
  const EmbeddingFusedRoutes routes =
      embedding_fused_routes(topo, grid(), ctx.options.remote_first);
  const std::vector<EmbeddingTile>& tiles = routes.tiles;
  fused_exchange.run(
      routes.produced, routes.arrivals, out,
      [&](std::size_t i, float* dst, std::size_t ld) {
        const EmbeddingTile& k = tiles[i];
        pool(tables, k.table, bags[k.table], batch_begin[k.dst] + k.bag0,
             batch_begin[k.dst] + k.bag1, dst, ld);
      },
      nullptr, zero_copy);
}

}  // namespace tilecomm::detail
