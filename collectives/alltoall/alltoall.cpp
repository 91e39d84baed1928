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

// Figures: scratch timer (median µs per call, max over ranks; /tmp/p2p_scratch/bench.cpp), float32,
// Open MPI 4.1.4 `--mca btl tcp,self` as the inter-node stand-in, 2 vCPU host under load (noisy).
// Across nodes pairwise was never clearly ahead of MPI (np 2, per-peer: 8 B 32 vs 34 µs, 2 MiB 3.0
// vs 0.9 ms, 8 MiB 11.4 vs 10.9 ms; np 4: 8 MiB 56.1 vs 56.2 ms), so MPI stays the default.
// One node: shm (/tmp/shm_scratch/bench.cpp, np 2, per-peer bytes, interleaved with MPI_Alltoall):
// 8 B 0.36 vs 0.73 µs (LL lines), 64 KiB 5.4 vs 31 µs, 1 MiB 72 vs 120 µs, 8 MiB 1.9 vs 2.5 ms.
const Algorithm& alltoall_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return alltoall_shm;
  return alltoall_mpi;
}
const Algorithm& alltoallv_default(const CommImpl& comm, const CollArgs& args) {
  if (alltoallv_shm.can_use(comm, args).empty()) return alltoallv_shm;
  return alltoallv_mpi;
}

}  // namespace tilecomm::detail
