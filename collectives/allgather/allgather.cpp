// The AllGather algorithms and the default table.
#include "collectives/algorithm.hpp"
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

// Figures: scratch timer (median µs per call, max over ranks; /tmp/p2p_scratch/bench.cpp), float32,
// Open MPI 4.1.4 `--mca btl tcp,self` as the inter-node stand-in, 2 vCPU host under load (noisy).
// Across nodes the ring measured level with MPI (np 2: 8 B 10.3 vs 11.2 µs, 8 MiB 15.9 vs
// 15.9 ms; np 4: 128 KiB 2.7 vs 1.8 ms, 2 MiB 21.0 vs 23.5 ms), so MPI stays the default.
// One node: shm (/tmp/shm_scratch/bench.cpp, np 2, interleaved with MPI_Allgather): 8 B 0.21 vs
// 0.73 µs, 64 KiB 3.1 vs 9.6 µs, 1 MiB 62 vs 117 µs, 8 MiB 1.4 vs 2.3 ms.
const Algorithm& allgather_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return allgather_shm;
  return allgather_mpi;
}

}  // namespace tilecomm::detail
