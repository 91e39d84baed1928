// The Broadcast algorithms and the default table.
#include "collectives/algorithm.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm broadcast_mpi;
extern const Algorithm broadcast_shm;
extern const Algorithm broadcast_hierarchical;

const std::vector<const Algorithm*>& broadcast_algorithms() {
  static const std::vector<const Algorithm*> list = {&broadcast_mpi, &broadcast_shm,
                                                     &broadcast_hierarchical};
  return list;
}

// The table: shm on one node; across nodes hierarchical (one MPI message per node instead of one
// per off-node rank), else mpi when the segment is too small. Figures in docs/collectives.md
// ("Broadcast and barrier").
const Algorithm& broadcast_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return broadcast_shm;
  if (broadcast_hierarchical.can_use(comm, args).empty()) return broadcast_hierarchical;
  return broadcast_mpi;
}

}  // namespace tilecomm::detail
