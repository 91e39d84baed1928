#include "ops/embedding_alltoall/embedding_alltoall_plan.hpp"

#include <algorithm>

#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"

namespace tilecomm::detail {

std::size_t embedding_default_tile(std::size_t batch, int ranks, std::size_t total_tables,
                                   std::size_t wg_slots, std::size_t dim, bool spans_nodes) {
  const auto p = static_cast<std::size_t>(ranks);
  const std::size_t avg_tables = std::max<std::size_t>(1, total_tables / p);
  const std::size_t most_bags = (batch + p - 1) / p;
  std::size_t most = 256;
  if (spans_nodes)  // a tile is one MPI message of bags x dim floats
    most = std::min(most, eager_rows(dim * sizeof(float)));
  return std::clamp<std::size_t>(most_bags * avg_tables / (4 * wg_slots), 1, most);
}

std::vector<EmbeddingTile> embedding_tiles(const Topology& topo, const EmbeddingGrid& g,
                                           std::size_t c, std::size_t nc, bool remote_first) {
  std::vector<EmbeddingTile> tiles;
  for (int q : destination_order(topo, remote_first)) {
    const std::size_t lo = split_begin(g.local_batch(q), nc, c);
    const std::size_t hi = split_begin(g.local_batch(q), nc, c + 1);
    for (std::size_t t = 0; t < g.local_tables; ++t)
      for (std::size_t b = lo; b < hi; b += g.tile)
        tiles.push_back({t, q, b, std::min(hi, b + g.tile)});
  }
  return tiles;
}

EmbeddingFusedRoutes embedding_fused_routes(const Topology& topo, const EmbeddingGrid& g,
                                            bool remote_first) {
  const int p = topo.size, me = topo.rank;
  const std::size_t row = g.first_table[p] * g.dim;  // floats per bag in out
  EmbeddingFusedRoutes r;
  r.tiles = embedding_tiles(topo, g, 0, 1, remote_first);
  r.produced.reserve(r.tiles.size());
  for (const EmbeddingTile& k : r.tiles) {
    const std::size_t table = g.first_table[me] + k.table;
    const std::size_t offset = k.bag0 * row + table * g.dim;
    r.produced.push_back(
        {k.dst, {offset, k.bag1 - k.bag0, g.dim}, g.flag_of(table, k.bag0), offset});
  }
  for (int s : source_order(topo)) {
    for (std::size_t table = g.first_table[s]; table < g.first_table[s + 1]; ++table)
      for (std::size_t b = 0; b < g.local_batch(me); b += g.tile) {
        const std::size_t b1 = std::min(g.local_batch(me), b + g.tile);
        const std::size_t offset = b * row + table * g.dim;
        r.arrivals.push_back({s, {offset, b1 - b, g.dim}, g.flag_of(table, b), offset});
      }
  }
  return r;
}

}  // namespace tilecomm::detail
