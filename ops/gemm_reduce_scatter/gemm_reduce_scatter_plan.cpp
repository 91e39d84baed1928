#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"

#include <algorithm>

#include "ops/common/plan_layout.hpp"

namespace tilecomm::detail {

std::size_t gemm_rs_default_tile(std::size_t m, std::size_t wg_slots, std::size_t n,
                                 bool spans_nodes) {
  const std::size_t target = 4 * wg_slots;
  std::size_t most = 256;
  if (spans_nodes)  // a tile is one MPI message of rows x n floats: under the eager limit
    most = std::clamp<std::size_t>(eager_rows(n * sizeof(float)), 8, most);
  return std::clamp<std::size_t>(m / target, 8, most);
}

std::vector<int> gemm_rs_relayed(const Topology& topo, int relay) {
  std::vector<int> owners;
  const int node = topo.node_of[relay];
  for (int q = 0; q < topo.size; ++q)
    if (topo.node_of[q] != node && node_relay(topo, q, node) == relay) owners.push_back(q);
  return owners;
}

std::vector<std::size_t> gemm_rs_order(const Topology& topo, std::size_t blocks,
                                       bool remote_first) {
  const std::size_t p = static_cast<std::size_t>(topo.size), reduce_base = p * blocks;
  const bool sums = relays_partials(topo);
  std::vector<std::size_t> order;
  bool pending = false;  // a node sum waits for the next compute to be in the list
  std::size_t node_sum = 0;
  for (int q : relay_destination_order(topo, remote_first))
    for (std::size_t i = 0; i < blocks; ++i) {
      order.push_back(q * blocks + i);
      if (pending) order.push_back(node_sum), pending = false;
      if (sums && !topo.on_node(q) && node_relay(topo, q, topo.node) == topo.rank) {
        pending = true;
        node_sum = (p + 1 + static_cast<std::size_t>(q)) * blocks + i;
      }
      if (q == topo.rank && remote_first) order.push_back(reduce_base + i);
    }
  if (pending) order.push_back(node_sum);
  for (std::size_t i = 0; i < blocks && !remote_first; ++i)
    order.push_back(reduce_base + i);
  return order;
}

}  // namespace tilecomm::detail
