// The AllReduce algorithms and the default table.
#include "collectives/algorithm.hpp"
#include "collectives/default_thresholds.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm allreduce_mpi;
extern const Algorithm allreduce_ring;
extern const Algorithm allreduce_recursive_doubling;
extern const Algorithm allreduce_one_shot;
extern const Algorithm allreduce_two_shot;
extern const Algorithm allreduce_hierarchical;

const std::vector<const Algorithm*>& allreduce_algorithms() {
  static const std::vector<const Algorithm*> list = {
      &allreduce_mpi,      &allreduce_ring,     &allreduce_recursive_doubling,
      &allreduce_one_shot, &allreduce_two_shot, &allreduce_hierarchical};
  return list;
}

// The table. Thresholds: collectives/default_thresholds.hpp; the measurements behind them:
// docs/collectives.md, "Where the default thresholds come from".
const Algorithm& allreduce_default(const CommImpl& comm, const CollArgs& args) {
  const Topology& topo = comm.topo;
  const std::size_t bytes = args.bytes();
  if (shm_fits(comm.segment).empty()) {
    if (topo.num_nodes == 1)
      return bytes <= DefaultThresholds::allreduce_one_shot_max_for(topo.local_size)
                 ? allreduce_one_shot
                 : allreduce_two_shot;
    if (topo.smallest_node_size() >= 2 && bytes >= DefaultThresholds::allreduce_hierarchical_min)
      return allreduce_hierarchical;
  }
  if (topo.num_nodes > 1) {
    if (bytes <= DefaultThresholds::allreduce_one_round_max_for(topo.num_nodes))
      return allreduce_recursive_doubling;
    return allreduce_ring;
  }
  return allreduce_mpi;
}

}  // namespace tilecomm::detail
