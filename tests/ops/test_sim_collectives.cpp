// The simulator's collectives (ops/model/sim_collectives.hpp) on hand-made costs whose timelines
// are known exactly: how each folds, stages, copies and finds its input in the caches.
#include <gtest/gtest.h>

#include "collectives/default_thresholds.hpp"
#include "ops/common/plan_layout.hpp"
#include "ops/model/sim.hpp"
#include "ops/model/sim_collectives.hpp"
#include "ops/model/sim_ops.hpp"
#include "sim_test_util.hpp"

namespace tilecomm::model {
namespace {

using test::bare;
using test::kMs;
using test::one_slot;

// reduce_scatter(hierarchical) across 2 nodes x 1 rank, as the simulator replays it: 252 KiB for
// the other node goes as 4 messages of 63 KiB (the eager size), all posted at once, each folded as
// it lands. A message at 252 KiB/ms is 0.25 ms and a fold 0.1 ms: messages land at 0.25, 0.5,
// 0.75, 1 ms (+ 0 latency), the folds of the first three hide behind the next arrivals, the last
// ends at 1.1 ms (in one message and one fold: 1 + 0.4 = 1.4 ms).
TEST(Sim, ReduceScatterFoldsEachMessageAsItArrives) {
  Profile p;
  constexpr double kPart = 4.0 * detail::DefaultThresholds::eager_message_bytes;
  p.reduce.c = {0, 0.4 * kMs / kPart, 0};  // 0.1 ms per message
  std::vector<SimRank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    const detail::Topology topo = detail::block_topology(r, 2, 1);
    std::vector<SimStep> steps;
    reduce_scatter_steps(steps, topo, 2 * kPart, p, 0);
    ASSERT_EQ(steps.size(), 12u) << "4 sends, then 4 x (await, fold)";
    ranks[r].tasks.push_back({steps, "collective"});
  }
  EXPECT_NEAR(simulate(ranks, 1, bare(0, kPart / kMs)).time, 1.1 * kMs, 1e-9);
}

// The hierarchical AllReduce between nodes of one rank, as the simulator replays it: between two
// nodes in one round of eager pieces (63 KiB) up to 256 KiB, in two (reduce-scatter, all-gather)
// above; beyond two nodes in two from 16 KiB. At 1 KiB/us and no latency or CPU, 128 KiB is 3
// pieces each way, 128 us; 512 KiB two rounds of 256 KiB (5 pieces), 512 us; before 2026-11-29
// 128 KiB also took two rounds (of one 64 KiB message each).
TEST(Sim, AllReduceBetweenTwoNodesTakesOneRoundUpTo256KiB) {
  const Profile p;
  constexpr double kKiB = 1024, kRate = kKiB / 1e-6;
  auto run = [&](int nodes, double bytes, std::size_t want_steps) {
    std::vector<SimRank> ranks(nodes);
    for (int r = 0; r < nodes; ++r) {
      const detail::Topology topo = detail::block_topology(r, nodes, 1);
      std::vector<SimStep> steps;
      allreduce_steps(steps, topo, bytes, p, 0);
      EXPECT_EQ(steps.size(), want_steps) << nodes << " nodes, " << bytes << " bytes";
      ranks[r].tasks.push_back({steps, "collective"});
    }
    return simulate(ranks, 1, bare(0, kRate)).time;
  };
  EXPECT_NEAR(run(2, 128 * kKiB, 3 + 3 + 1), 128e-6, 1e-9);  // sends, awaits, the reduce
  EXPECT_NEAR(run(2, 256 * kKiB, 5 + 5 + 1), 256e-6, 1e-9);
  EXPECT_NEAR(run(2, 512 * kKiB, 2 * (5 + 5) + 1), 512e-6, 1e-9);
  // Three nodes: a 48 KiB slice goes in two rounds of 16 KiB, one piece to each other node.
  run(3, 48 * kKiB, 2 * (2 + 2) + 1);
}

// Two ranks of one node run an AllReduce (else a ReduceScatter) of `bytes` per rank, its input
// `hot` (hot_share); the time the simulator gives it.
double on_node_collective(const Profile& p, double bytes, bool allreduce, double hot = 0) {
  std::vector<SimRank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    const detail::Topology topo = detail::block_topology(r, 1, 2);
    std::vector<SimStep> steps;
    if (allreduce)
      allreduce_steps(steps, topo, bytes, p, 0, hot);
    else
      reduce_scatter_steps(steps, topo, bytes, p, 0, hot);
    ranks[r].tasks.push_back({steps, "collective"});
  }
  return simulate(ranks, 2, bare(0, 1e12)).time;
}

// The on-node collectives as the simulator replays them, two ranks on one node, 1 MB: copies at
// 1 ns/B, adds at 0.5 ns/B. AllReduce two_shot stages all but its own half in the segment (0.5 ms),
// adds the peer's copy of its half (0.25 ms), then copies both reduced halves into its output
// (1 ms): 1.75 ms. ReduceScatter(shm) stages the peer's block (0.5 ms) and adds (0.25 ms). Before,
// the replay left out the staging and the own half's copy: 0.75 and 0.25 ms, and the one-node
// sequential GEMV M = 262144 was predicted at 0.74-0.80x its measured time.
TEST(Sim, OnNodeCollectivesStageTheirInput) {
  Profile p;
  p.shm.measured = true;
  p.shm.time.c = {0, 1e-9, 0};
  p.reduce.c = {0, 0.5e-9, 0};
  EXPECT_NEAR(on_node_collective(p, 1e6, true), 1.75 * kMs, 1e-9);
  EXPECT_NEAR(on_node_collective(p, 1e6, false), 0.75 * kMs, 1e-9);
}

// An All-to-Allv's last step copies what the collective itself copies -- this rank's own bytes
// and the on-node peers' out of their segments -- plus, for an op that reshapes its output
// (EmbeddingAllToAll), the off-node bytes too: rank 0 of 2 nodes x 2 ranks receiving 100 B from
// itself, 200 from its node mate and 400 + 800 from the other node, at 1 ns a byte.
TEST(Sim, AllToAllvCopiesOffNodeBytesOnlyToReshape) {
  Profile p;
  p.shm.measured = true;
  p.shm.time.c = {0, 1e-9, 0};
  const detail::Topology topo = detail::block_topology(0, 2, 2);
  const std::vector<double> send{100, 100, 100, 100}, recv{100, 200, 400, 800};
  for (const bool reshape : {true, false}) {
    std::vector<SimStep> steps;
    alltoallv_steps(steps, topo, send, recv, p, 1, 0, reshape);
    ASSERT_EQ(steps.back().kind, SimStep::Kind::Compute);
    EXPECT_NEAR(steps.back().seconds, (reshape ? 1500 : 300) * 1e-9, 1e-15);
  }
}

// The collective after a compute kernel finds its input in the L2 as far as the kernel's
// footprint leaves it there (hot_share: the L2 keeps the last l2_bytes touched): its adds cost the
// hot points and its copies the shm path's ping-pong per byte. The setup above (1 MB: 1.75 ms
// cold) with hot copies at 0.25 ns/B and hot adds at 0.125: 0.4375 ms hot. Before, every on-node
// collective was charged cold: the one-node sequential GEMV M = 16384 (a 64 KiB AllReduce after a
// compute over 1 MiB of W) at 1.24-1.25x its measured time.
TEST(Sim, OnNodeCollectivesFindWhatTheComputeLeftInTheL2) {
  Profile p;
  p.shm.measured = true;
  p.shm.time.c = {0, 0.25e-9, 0};  // the ping-pong: hot copies
  p.shm.bulk_beta = 1e-9;          // cold copies
  p.reduce.c = {0, 0.5e-9, 0};
  p.reduce_hot.c = {0, 0.125e-9, 0};
  p.reduce_hot.points = 4;
  p.l2_bytes = 1e6;
  EXPECT_DOUBLE_EQ(hot_share(p, 0.5e6), 1.0);  // the whole footprint fits
  EXPECT_DOUBLE_EQ(hot_share(p, 4e6), 0.25);   // the last quarter of it
  auto run = [&](double hot) { return on_node_collective(p, 1e6, true, hot); };
  EXPECT_NEAR(run(0), 1.75 * kMs, 1e-9);
  EXPECT_NEAR(run(1), 0.4375 * kMs, 1e-9);
  EXPECT_NEAR(run(0.25), (0.25 * 0.4375 + 0.75 * 1.75) * kMs, 1e-9);
  // The sequential call passes its compute's footprint: GEMV M = 64, K = 8 per rank (2 KiB of W,
  // 256 B of y, 32 B of x) fits the L2, so its 256 B AllReduce is hot; with no hot points (an
  // older profile), cold.
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 1, 2);
  const SimCosts c = bare(0, 1e12);
  const double hot_call = simulate_modes(p, s, c).sequential;
  p.reduce_hot.points = 0;
  EXPECT_DOUBLE_EQ(hot_share(p, 0.5e6), 0.0);
  const double cold_call = simulate_modes(p, s, c).sequential;
  // q - 1 = 1 peer's 256 B staged and added: cold 256 ns + 128 ns, hot 64 ns + 32 ns.
  EXPECT_NEAR(cold_call - hot_call, (256 + 128 - 64 - 32) * 1e-9, 1e-12);
  EXPECT_GT(cold_call, hot_call);
}

}  // namespace
}  // namespace tilecomm::model
