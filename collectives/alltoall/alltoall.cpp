// The All-to-All and All-to-Allv algorithms and their default tables.
#include "collectives/algorithm.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm alltoall_mpi;
extern const Algorithm alltoallv_mpi;
extern const Algorithm alltoall_pairwise;
extern const Algorithm alltoallv_pairwise;
extern const Algorithm alltoall_shm;
extern const Algorithm alltoallv_shm;

const std::vector<const Algorithm*>& alltoall_algorithms() {
  static const std::vector<const Algorithm*> list = {&alltoall_mpi, &alltoall_pairwise,
                                                     &alltoall_shm};
  return list;
}
const std::vector<const Algorithm*>& alltoallv_algorithms() {
  static const std::vector<const Algorithm*> list = {&alltoallv_mpi, &alltoallv_pairwise,
                                                     &alltoallv_shm};
  return list;
}

// The tables: shm on one node, else pairwise. Until 2026-11-27 mpi across nodes: pairwise (then
// lock-step batches of slot-sized messages) was never clearly ahead of it. With eager pieces in a
// window it is level up to 64 KiB per rank and 0.13-0.99x mpi's time above on 2-4 emulated nodes,
// and chained calls run at the link's rate (docs/collectives.md, "All-to-All across nodes").
const Algorithm& alltoall_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return alltoall_shm;
  return alltoall_pairwise;
}
const Algorithm& alltoallv_default(const CommImpl& comm, const CollArgs& args) {
  if (alltoallv_shm.can_use(comm, args).empty()) return alltoallv_shm;
  return alltoallv_pairwise;
}

}  // namespace tilecomm::detail
