// The ReduceScatter algorithms and the default table.
#include "collectives/algorithm.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

extern const Algorithm reduce_scatter_mpi;
extern const Algorithm reduce_scatter_ring;
extern const Algorithm reduce_scatter_shm;

const std::vector<const Algorithm*>& reduce_scatter_algorithms() {
  static const std::vector<const Algorithm*> list = {&reduce_scatter_mpi, &reduce_scatter_ring,
                                                     &reduce_scatter_shm};
  return list;
}

// Figures: scratch timer (median µs per call, max over ranks; /tmp/p2p_scratch/bench.cpp), float32,
// Open MPI 4.1.4 `--mca btl tcp,self` as the inter-node stand-in, 2 vCPU host under load (noisy).
// Across nodes: ring from 32 KiB per rank (recv_count bytes): np 2: 32 KiB 44 vs MPI 77 µs,
// 2 MiB 1.26 vs 1.97 ms, 8 MiB 10.7 vs 34.3 ms; np 4: 32 KiB 133 vs 198 µs, 8 MiB 85 vs 171 ms.
// Below, MPI (np 4, 8 B: 74 vs 87 µs: the ring pays p-1 latencies).
// One node: shm (/tmp/shm_scratch/bench.cpp, np 2, interleaved with MPI_Reduce_scatter_block):
// 8 B 0.23 vs 0.80 µs, 64 KiB 13.5 vs 13.5 µs (level), 1 MiB 0.25 vs 1.54 ms, 8 MiB 2.7 vs 16.9 ms.
const Algorithm& reduce_scatter_default(const CommImpl& comm, const CollArgs& args) {
  if (shm_single_node(comm, args).empty()) return reduce_scatter_shm;
  if (comm.num_nodes > 1 && args.bytes() >= (32u << 10)) return reduce_scatter_ring;
  return reduce_scatter_mpi;
}

}  // namespace tilecomm::detail
