// The AllGather algorithms and the default table.
#include "collectives/algorithm.hpp"
#include "collectives/default_thresholds.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm allgather_mpi;
extern const Algorithm allgather_ring;
extern const Algorithm allgather_shm;
extern const Algorithm allgather_hierarchical;

const std::vector<const Algorithm*>& allgather_algorithms() {
  static const std::vector<const Algorithm*> list = {&allgather_mpi, &allgather_ring,
                                                     &allgather_shm, &allgather_hierarchical};
  return list;
}

// The table: shm on one node; across at most allgather_hierarchical_max_nodes nodes hierarchical;
// across more the ring from allgather_ring_min, else mpi (figures in docs/collectives.md, "Where
// the default thresholds come from").
const Algorithm& allgather_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return allgather_shm;
  if (comm.topo.num_nodes == 1) return allgather_mpi;
  if (comm.topo.num_nodes <= DefaultThresholds::allgather_hierarchical_max_nodes &&
      allgather_hierarchical.can_use(comm, args).empty())
    return allgather_hierarchical;
  return args.bytes() >= DefaultThresholds::allgather_ring_min ? allgather_ring : allgather_mpi;
}

}  // namespace tilecomm::detail
