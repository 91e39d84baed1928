// The AllReduce algorithms and the default table.
#include <algorithm>

#include "collectives/algorithm.hpp"
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
//
// Shared memory (/tmp/shm_scratch/bench.cpp: float32, interleaved batches of MPI_Allreduce and each
// algorithm in one run, median of 15-31 batches, max over ranks; same 2 vCPU host under load):
//  - one node: one_shot (LL lines, one cache-line transfer) up to 4 KiB at np 2 and 8 KiB at
//    np 3-4, then two_shot, whose 2 syncs cost more than one_shot's (p-1) n reads only above that.
//    np 2: 8 B 0.42 vs MPI 0.98 µs, 2 KiB 1.37 vs 2.91, 4 KiB one 0.91 / two 0.66 vs 2.50 (next
//    run 2.03 / 2.31), 8 KiB one 1.63 / two 1.13, 64 KiB two 6.2 vs 11.7 µs, 16 MiB 3.8 vs 6.6 ms.
//    np 3 (2 cores): 4 KiB one 6.9 / two 9.9 µs, 16 KiB 11.2 / 11.6, 1 MiB two 221 vs MPI 426 µs.
//  - several nodes with >= 2 ranks each, from 8 KiB: hierarchical (np 4, pretend nodes of 2,
//    `--mca btl tcp,self`): 8 KiB 59 vs recursive_doubling 57 vs MPI 101 µs, 128 KiB 120 vs ring
//    230 vs MPI 267 µs, 4 MiB 4.7 vs ring 5.3 vs MPI 6.1 ms. Nodes of one rank: the ladder above.
const Algorithm& allreduce_default(const CommImpl& comm, const CollArgs& args) {
  std::size_t smallest_node = comm.node_ranks[0].size();
  for (const auto& ranks : comm.node_ranks)
    smallest_node = std::min(smallest_node, ranks.size());
  if (shm_fits(comm).empty()) {
    if (comm.num_nodes == 1) {
      const std::size_t one_shot_max = comm.local_size <= 2 ? 4u << 10 : 8u << 10;
      return args.bytes() <= one_shot_max ? allreduce_one_shot : allreduce_two_shot;
    }
    if (smallest_node >= 2 && args.bytes() >= (8u << 10)) return allreduce_hierarchical;
  }
  if (comm.num_nodes > 1) {
    if (args.bytes() <= (16u << 10)) return allreduce_recursive_doubling;
    if (args.bytes() <= (4u << 20)) return allreduce_ring;
  }
  return allreduce_mpi;
}

}  // namespace tilecomm::detail
