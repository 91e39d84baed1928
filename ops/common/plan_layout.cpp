#include "ops/common/plan_layout.hpp"

#include <algorithm>
#include <cmath>

namespace tilecomm::detail {

Topology block_topology(int rank, int nodes, int ranks_per_node) {
  Topology t;
  t.size = nodes * ranks_per_node;
  t.rank = rank;
  t.num_nodes = nodes;
  t.node = rank / ranks_per_node;
  t.local_rank = rank % ranks_per_node;
  t.local_size = ranks_per_node;
  t.node_ranks.assign(nodes, {});
  for (int r = 0; r < t.size; ++r) {
    t.node_of.push_back(r / ranks_per_node);
    t.local_of.push_back(r % ranks_per_node);
    t.node_ranks[r / ranks_per_node].push_back(r);
  }
  t.local_to_world = t.node_ranks[t.node];
  return t;
}

std::vector<int> destination_order(const Topology& topo, bool remote_first) {
  std::vector<int> order;
  if (!remote_first) {
    for (int q = 0; q < topo.size; ++q)
      order.push_back(q);
    return order;
  }
  auto cls = [&](int q) { return !topo.on_node(q) ? 0 : q != topo.rank ? 1 : 2; };
  for (int pass = 0; pass < 3; ++pass)
    for (int i = 1; i <= topo.size;
         ++i) {  // rotated: rank + 1 first, so no rank is everyone's first
      const int q = (topo.rank + i) % topo.size;
      if (cls(q) == pass) order.push_back(q);
    }
  return order;
}

int node_relay(const Topology& topo, int owner, int node) {
  const std::vector<int>& ranks = topo.node_ranks[node];
  return ranks[static_cast<std::size_t>(topo.local_of[owner]) % ranks.size()];
}

bool relays_partials(const Topology& topo) {
  return topo.num_nodes > 1 && topo.node_ranks[topo.node].size() > 1;
}

std::vector<int> relay_destination_order(const Topology& topo, bool remote_first) {
  std::vector<int> order = destination_order(topo, remote_first);
  if (!relays_partials(topo) || !remote_first) return order;
  std::vector<int> shared;
  for (int d = 1; d < topo.num_nodes; ++d)
    for (int q : topo.node_ranks[(topo.node + d) % topo.num_nodes])
      shared.push_back(q);
  for (int q : order)
    if (topo.on_node(q)) shared.push_back(q);
  return shared;
}

std::vector<int> source_order(const Topology& topo) {
  std::vector<int> order;
  for (int i = 1; i < topo.size; ++i)
    order.push_back((topo.rank - i + topo.size) % topo.size);
  return order;
}

std::size_t min_node_tile_rows(double bytes_per_row, double fmas_per_row) {
  const double row_us = bytes_per_row / kNodeStreamBytesPerUs + fmas_per_row / kNodeFmasPerUs;
  if (!(row_us > 0)) return 1;
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(kMinNodeTileUs / row_us)));
}

}  // namespace tilecomm::detail
