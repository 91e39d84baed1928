// The ReduceScatter algorithms and the default table.
#include "collectives/algorithm.hpp"
#include "collectives/default_thresholds.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm reduce_scatter_mpi;
extern const Algorithm reduce_scatter_ring;
extern const Algorithm reduce_scatter_shm;
extern const Algorithm reduce_scatter_hierarchical;

const std::vector<const Algorithm*>& reduce_scatter_algorithms() {
  static const std::vector<const Algorithm*> list = {
      &reduce_scatter_mpi, &reduce_scatter_ring, &reduce_scatter_shm, &reduce_scatter_hierarchical};
  return list;
}

// The table. Thresholds: collectives/default_thresholds.hpp; the measurements behind them:
// docs/collectives.md, "Where the default thresholds come from".
const Algorithm& reduce_scatter_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return reduce_scatter_shm;
  if (comm.topo.num_nodes == 1) return reduce_scatter_mpi;
  const bool large = args.bytes() >= DefaultThresholds::reduce_scatter_ring_min;
  const bool ring =
      large && comm.topo.num_nodes > DefaultThresholds::reduce_scatter_hierarchical_max_nodes;
  if (!ring && reduce_scatter_hierarchical.can_use(comm, args).empty())
    return reduce_scatter_hierarchical;
  return large ? reduce_scatter_ring : reduce_scatter_mpi;
}

}  // namespace tilecomm::detail
