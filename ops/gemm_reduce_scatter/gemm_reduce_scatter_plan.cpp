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

std::vector<std::size_t> gemm_rs_order(const Topology& topo, std::size_t blocks,
                                       bool remote_first) {
  const std::size_t reduce_base = static_cast<std::size_t>(topo.size) * blocks;
  std::vector<std::size_t> order;
  for (int q : destination_order(topo, remote_first))
    for (std::size_t i = 0; i < blocks; ++i) {
      order.push_back(q * blocks + i);
      if (q == topo.rank && remote_first) order.push_back(reduce_base + i);
    }
  for (std::size_t i = 0; i < blocks && !remote_first; ++i)
    order.push_back(reduce_base + i);
  return order;
}

}  // namespace tilecomm::detail
