#pragma once
// The planning half of EmbeddingAllToAll: its default tile, its tiles (per destination, local
// table and block of bags) and the fused call's routes. Pure functions of the shape and the
// layout, no MPI and no device: the real call (embedding_alltoall{,_fused}.cpp) and the simulator
// (ops/model/sim_ops.cpp) plan with the same code.
#include <cstddef>
#include <span>
#include <vector>

#include "collectives/topology.hpp"
#include "ops/common/block_route.hpp"

namespace tilecomm::detail {

/// A tile: local table `table`, destination rank `dst`, bags [bag0, bag1) of dst's batch slice.
struct EmbeddingTile {
  std::size_t table;
  int dst;
  std::size_t bag0, bag1;
};

/// Where the tables and bags are: per rank prefix sums of tables (first_table[p]: tables in the
/// job) and of the global batch (batch_begin[p] = batch); `tile` bags per tile; this rank's
/// `local_tables`; `max_blocks` tiles of bags in the largest slice (flag_of's stride).
struct EmbeddingGrid {
  std::span<const std::size_t> first_table, batch_begin;
  std::size_t dim = 0, tile = 1, local_tables = 0, max_blocks = 0;
  std::size_t local_batch(int q) const { return batch_begin[q + 1] - batch_begin[q]; }
  /// Flag index (and MPI tag) of global table `table`, block starting at bag `bag0`.
  std::size_t flag_of(std::size_t table, std::size_t bag0) const {
    return table * max_blocks + bag0 / tile;
  }
};

/// The default tile: about 4 tiles per WG slot for each destination, 1..256 bags; when the job
/// spans nodes, at most kOffNodeEagerBytes of pooled output (bags x dim floats, one MPI message).
std::size_t embedding_default_tile(std::size_t batch, int ranks, std::size_t total_tables,
                                   std::size_t wg_slots, std::size_t dim, bool spans_nodes);
/// Tiles of chunk c of nc of every destination's slice, for every local table, destinations in
/// destination_order(topo, remote_first).
std::vector<EmbeddingTile> embedding_tiles(const Topology& topo, const EmbeddingGrid& g,
                                           std::size_t c, std::size_t nc, bool remote_first);

/// The fused call (one BlockExchange::run): the tiles this rank computes, in order, each one's
/// produced block, and the blocks arriving from every other rank (source_order).
struct EmbeddingFusedRoutes {
  std::vector<EmbeddingTile> tiles;
  std::vector<BlockRoute> produced, arrivals;
};
EmbeddingFusedRoutes embedding_fused_routes(const Topology& topo, const EmbeddingGrid& g,
                                            bool remote_first);

}  // namespace tilecomm::detail
