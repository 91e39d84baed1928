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
  const bool zero_copy = out_floats() > 0 && out == next_output();
  const int p = topo.size, me = topo.rank;
  const std::size_t row = first_table[p] * dim;  // floats per bag in out
  const std::vector<EmbeddingTile> tiles = make_tiles(0, 1, ctx.options.remote_first);
  std::vector<BlockRoute> produced, arrivals;
  produced.reserve(tiles.size());
  for (const EmbeddingTile& k : tiles) {
    const std::size_t table = first_table[me] + k.table;
    const std::size_t offset = k.bag0 * row + table * dim;
    produced.push_back({k.dst, {offset, k.bag1 - k.bag0, dim}, flag_of(table, k.bag0), offset});
  }
  for (int s : ctx.source_order()) {
    for (std::size_t table = first_table[s]; table < first_table[s + 1]; ++table)
      for (std::size_t b = 0; b < local_batch(me); b += tile) {
        const std::size_t b1 = std::min(local_batch(me), b + tile);
        const std::size_t offset = b * row + table * dim;
        arrivals.push_back({s, {offset, b1 - b, dim}, flag_of(table, b), offset});
      }
  }
  fused_exchange.run(
      produced, arrivals, out,
      [&](std::size_t i, float* dst, std::size_t ld) {
        const EmbeddingTile& k = tiles[i];
        pool(tables, k.table, bags[k.table], batch_begin[k.dst] + k.bag0,
             batch_begin[k.dst] + k.bag1, dst, ld);
      },
      nullptr, zero_copy);
}

}  // namespace tilecomm::detail
