// The AllReduce algorithms and the default table.
#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

extern const Algorithm allreduce_mpi;
extern const Algorithm allreduce_ring;
extern const Algorithm allreduce_recursive_doubling;
extern const Algorithm allreduce_one_shot;
extern const Algorithm allreduce_two_shot;
extern const Algorithm allreduce_hierarchical;

const std::vector<const Algorithm*>& allreduce_algorithms() {
  static const std::vector<const Algorithm*> list = {&allreduce_mpi, &allreduce_ring,
                                                     &allreduce_recursive_doubling,
                                                     &allreduce_one_shot,
                                                     &allreduce_two_shot,
                                                     &allreduce_hierarchical};
  return list;
}

// Figures: scratch timer (median µs per call, max over ranks; /tmp/p2p_scratch/bench.cpp), float32,
// Open MPI 4.1.4 `--mca btl tcp,self` as the inter-node stand-in, 2 vCPU host under load (noisy).
// Across nodes (MPI point-to-point):
//  - recursive_doubling up to 16 KiB per rank: log p latencies; np 2: 8 B 10 µs vs MPI 19 µs,
//    8 KiB 11.5 vs 21.5 µs; np 4: 8 B 118 vs 124 µs (equal within noise).
//  - ring up to 4 MiB: bandwidth-optimal; np 2: 512 KiB 222 vs 271 µs, 2 MiB 1.6 vs 3.6 ms;
//    np 4: 128 KiB 0.41 vs 0.50 ms, 2 MiB 8.4 vs 11.2 ms.
//  - above, MPI (ahead at 8 MiB: np 2 11.0 vs 13.2 ms, np 4 42.8 vs
//    45.9 ms; this ring does not overlap the reduction with the transfers).
// On one node (through MPI's shared-memory transport) MPI stays ahead of both; the on-node
// branches (shared memory) and whether hierarchical beats these across nodes when nodes have
// several ranks belong to the shared-memory ladder.
const Algorithm& allreduce_default(const CommImpl& comm, const CollArgs& args) {
  if (comm.num_nodes > 1) {
    if (args.bytes() <= (16u << 10)) return allreduce_recursive_doubling;
    if (args.bytes() <= (4u << 20)) return allreduce_ring;
  }
  return allreduce_mpi;
}

}  // namespace tilecomm::detail
