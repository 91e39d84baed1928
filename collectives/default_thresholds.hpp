#pragma once
// The message sizes at which the default tables (collectives/<coll>/<coll>.cpp) switch algorithm,
// in bytes of one rank's contribution (CollArgs::bytes(): AllReduce count, ReduceScatter
// recv_count, times the element size). Where the values come from: docs/collectives.md, "Where the
// default thresholds come from". Regenerate from benchmark JSON with
//   tools/tune_collectives.py --emit-header FILE.json ... > collectives/default_thresholds.hpp

#include <cstddef>

namespace tilecomm::detail {

struct DefaultThresholds {
  static constexpr std::size_t kKiB = 1024;
  static constexpr std::size_t kMiB = 1024 * kKiB;

  /// Nodes with at most this many ranks count as small (one_shot's limit below).
  static constexpr int small_node_ranks = 2;
  /// AllReduce, every rank on one small node: one_shot up to this size, two_shot above.
  static constexpr std::size_t allreduce_one_shot_max_small_node = 4 * kKiB;
  /// AllReduce, every rank on one node of more than small_node_ranks ranks: one_shot up to this
  /// size, two_shot above.
  static constexpr std::size_t allreduce_one_shot_max = 8 * kKiB;
  /// AllReduce across nodes of at least two ranks each: hierarchical from this size on.
  static constexpr std::size_t allreduce_hierarchical_min = 8 * kKiB;
  /// AllReduce across nodes (below the hierarchical threshold, or nodes of one rank):
  /// recursive_doubling up to this size, ring above (with 16 pieces in flight the ring is at the
  /// link's rate from 4 MiB on, ahead of hierarchical and mpi on 2, 3 and 4 nodes of one rank).
  static constexpr std::size_t allreduce_recursive_doubling_max = 16 * kKiB;
  /// ReduceScatter across more than reduce_scatter_hierarchical_max_nodes nodes: ring from this
  /// size on, hierarchical below (mpi when hierarchical declines the arguments).
  static constexpr std::size_t reduce_scatter_ring_min = 64 * kKiB;
  /// ReduceScatter across at most this many nodes: hierarchical at every size.
  static constexpr int reduce_scatter_hierarchical_max_nodes = 2;
  /// AllGather across more than allgather_hierarchical_max_nodes nodes: ring from this size (one
  /// rank's block) on, mpi below.
  static constexpr std::size_t allgather_ring_min = 256 * kKiB;
  /// AllGather across at most this many nodes: hierarchical at every size.
  static constexpr int allgather_hierarchical_max_nodes = 2;

  /// Messages between nodes — the ring's (16 rounds in flight), the hierarchical AllReduce's,
  /// ReduceScatter's and AllGather's: under Open MPI's TCP eager limit (btl_tcp_eager_limit,
  /// 64 KiB with the header), so no message waits for a clear-to-send, which over TCP queues
  /// behind bulk data (docs/collectives.md, "The ring over TCP"). The hierarchical ReduceScatter
  /// and AllGather sent 256 KiB messages until 2026-11-27: chained calls (a shaped operator's
  /// chunks) stalled on them, 4 x 1 MiB on 2 x 1 at 1 Gbit/s in 49-56 ms against 35.
  static constexpr std::size_t eager_message_bytes = 63 * kKiB;

  /// one_shot's limit for a node of `local_size` ranks.
  static constexpr std::size_t allreduce_one_shot_max_for(int local_size) {
    return local_size <= small_node_ranks ? allreduce_one_shot_max_small_node
                                          : allreduce_one_shot_max;
  }

  /// AllReduce between `nodes` nodes in one round — recursive doubling across nodes of one rank,
  /// the hierarchical AllReduce's node slices (cross one-shot) — up to this size, in two rounds
  /// (ring; direct reduce-scatter + all-gather) above. Between two nodes both move the same bytes
  /// and one round saves a message latency, so one round holds while its message stays eager:
  /// 2 x 1 at 5 Gbit/s, a 21.9 KiB AllReduce took 18 us in one round against 33 in the ring's two
  /// (2026-11-28; the limit was 16 KiB for every node count before).
  static constexpr std::size_t allreduce_one_round_max_for(int nodes) {
    return nodes == 2 ? eager_message_bytes : allreduce_recursive_doubling_max;
  }
  /// The hierarchical AllReduce's inter-node step (one rank of each node, each with a slice): in
  /// one round (every node sends its slice to every other in eager pieces and reduces them all)
  /// up to this slice size, in two (direct reduce-scatter + all-gather) above. Between two nodes
  /// both move the same bytes, and one round saves a message latency for a reduce of the whole
  /// slice instead of half: 2 x 1 at 10 Gbit/s, 64 KiB took 39 us against 59 in two rounds,
  /// 256 KiB 124-149 against 148-157; 2 x 2 at 5 Gbit/s, 128 KiB 96 against 127. At 1 Gbit/s
  /// level within 1-7 %, and from 512 KiB slices on no gain anywhere (2026-11-29,
  /// docs/collectives.md).
  static constexpr std::size_t allreduce_cross_one_round_max_for(int nodes) {
    return nodes == 2 ? 256 * kKiB : allreduce_recursive_doubling_max;
  }
};

}  // namespace tilecomm::detail
