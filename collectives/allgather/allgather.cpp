// The AllGather algorithms and the default table.
#include "collectives/algorithm.hpp"
#include "collectives/default_thresholds.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm allgather_mpi;
extern const Algorithm allgather_ring;
extern const Algorithm allgather_shm;

const std::vector<const Algorithm*>& allgather_algorithms() {
  static const std::vector<const Algorithm*> list = {&allgather_mpi, &allgather_ring,
                                                     &allgather_shm};
  return list;
}

// The table: shm on one node; across nodes the ring from allgather_ring_min, else mpi (figures in
// docs/collectives.md, "Where the default thresholds come from").
const Algorithm& allgather_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return allgather_shm;
  if (comm.topo.num_nodes > 1 && args.bytes() >= DefaultThresholds::allgather_ring_min)
    return allgather_ring;
  return allgather_mpi;
}

}  // namespace tilecomm::detail
