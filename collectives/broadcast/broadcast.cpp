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

// The table: shm on one node (1.2-2.1x faster than MPI_Ibcast from 8 B to 8 MiB at np 2), else
// mpi: hierarchical runs its three phases one after the other without pipelining and measured
// slower than MPI_Ibcast from 4 KiB up on pretend nodes (np 4, nodes of 2). Figures in
// docs/collectives.md ("Broadcast and barrier").
const Algorithm& broadcast_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return broadcast_shm;
  return broadcast_mpi;
}

}  // namespace tilecomm::detail
