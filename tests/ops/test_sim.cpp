// The simulator (ops/model/sim*.hpp) on hand-made costs whose timelines are known exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/model/sim.hpp"
#include "ops/model/sim_collectives.hpp"
#include "ops/model/sim_network.hpp"
#include "ops/model/sim_ops.hpp"
#include "sim_test_util.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::model {
namespace {

using test::bare;
using test::kMs;
using test::one_slot;

// A profile whose GEMV tiles take `tile_s` each whatever their size, both paths measured (their
// costs zero: only what a test's SimCosts set).
Profile gemv_tiles_of(double tile_s) {
  Profile p;
  p.gemv.c = {tile_s, 0, 0};
  p.shm.measured = p.mpi.measured = true;
  return p;
}

// Two ranks on two nodes, one slot and core each: 4 tiles of 1 ms, each sent to the peer (0.5 ms
// on the wire), then 4 tasks awaiting the peer's tiles. Tiles leave at 1, 2, 3, 4 ms and land
// 0.5 ms later; the last await ends at 4.5 ms.
TEST(Sim, TwoRankScheduleIsExact) {
  std::vector<SimRank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 4; ++i)
      ranks[r].tasks.push_back(
          {{SimStep::compute(1 * kMs), SimStep::send(1 - r, i, 0, SimPath::Mpi)}, "tile", i});
    for (int i = 0; i < 4; ++i)
      ranks[r].tasks.push_back({{SimStep::await(1 - r, i)}, "arrive", i});
  }
  const SimResult res = simulate(ranks, 1, bare(0.5 * kMs, 1e12), true);
  EXPECT_NEAR(res.time, 4.5 * kMs, 1e-9);
  ASSERT_EQ(res.rank_end.size(), 2u);
  EXPECT_NEAR(res.rank_end[0], 4.5 * kMs, 1e-9);
  EXPECT_EQ(res.messages, 8);
  ASSERT_EQ(res.timeline.size(), 16u);
  // Rank 0's third tile ran from 2 to 3 ms; its first arrival task waited from 4 to 4 ms (tile 0
  // had landed at 1.5 ms), its last from 4.5 ms - its start.
  for (const SimSpan& s : res.timeline)
    if (s.rank == 0 && s.label == "tile" && s.tile == 2) {
      EXPECT_NEAR(s.start, 2 * kMs, 1e-9);
      EXPECT_NEAR(s.end, 3 * kMs, 1e-9);
    }
  // Two slots on one core: the tiles share the core (processor sharing), so pairs end together
  // at 2 and 4 ms; the same end.
  for (SimRank& r : ranks)
    r.slots = 2;
  EXPECT_NEAR(simulate(ranks, 1, bare(0.5 * kMs, 1e12)).time, 4.5 * kMs, 1e-9);
  // Two cores: tiles 0-1 end at 1 ms, 2-3 at 2 ms, the last lands at 2.5 ms.
  for (SimRank& r : ranks)
    r.cores = 2;
  EXPECT_NEAR(simulate(ranks, 1, bare(0.5 * kMs, 1e12)).time, 2.5 * kMs, 1e-9);
}

// 1 MB at 1 GB/s takes 1 ms; two senders into one NIC share its ingress: 2 ms.
TEST(Sim, TwoSendersIntoOneNicTakeTwiceAsLong) {
  auto run = [](int senders) {
    std::vector<SimRank> ranks(3);
    for (int s = 0; s < senders; ++s)
      ranks[s].tasks.push_back({{SimStep::send(2, 7, 1e6, SimPath::Mpi)}, "send"});
    for (int s = 0; s < senders; ++s)
      ranks[2].tasks.push_back({{SimStep::await(s, 7)}, "recv"});
    return simulate(ranks, 1, bare(0, 1e9)).rank_end[2];
  };
  EXPECT_NEAR(run(1), 1 * kMs, 1e-9);
  EXPECT_NEAR(run(2), 2 * kMs, 1e-9);
}

// Two disjoint pairs (0 -> 1, 2 -> 3) of 1 MB at 1 GB/s: 1 ms with full bisection; with the core
// oversubscribed 4x (4 nodes x 1 GB/s / 4 = 1 GB/s shared) they take turns: 2 ms.
TEST(Sim, OversubscribedCoreSerialisesDisjointPairs) {
  auto run = [](double oversub) {
    std::vector<SimRank> ranks(4);
    ranks[0].tasks.push_back({{SimStep::send(1, 1, 1e6, SimPath::Mpi)}, "send"});
    ranks[2].tasks.push_back({{SimStep::send(3, 1, 1e6, SimPath::Mpi)}, "send"});
    ranks[1].tasks.push_back({{SimStep::await(0, 1)}, "recv"});
    ranks[3].tasks.push_back({{SimStep::await(2, 1)}, "recv"});
    SimCosts c = bare(0, 1e9);
    c.net.core_oversub = oversub;
    return simulate(ranks, 1, c).time;
  };
  EXPECT_NEAR(run(1), 1 * kMs, 1e-9);
  EXPECT_NEAR(run(4), 2 * kMs, 1e-9);
}

// A polling proxy shares the core with the slot while the kernel runs: a 1 ms tile on one core
// takes 2 ms; a rank without tasks has no kernel, so nothing polls.
TEST(Sim, PollingProxySharesTheCores) {
  std::vector<SimRank> ranks(2);
  ranks[0].tasks.push_back({{SimStep::compute(1 * kMs)}, "tile"});
  ranks[0].proxy_polls = ranks[1].proxy_polls = true;
  const SimResult r = simulate(ranks, 1, bare(0, 1e9));
  EXPECT_NEAR(r.rank_end[0], 2 * kMs, 1e-9);
  EXPECT_NEAR(r.rank_end[1], 0, 1e-12);
  ranks[0].proxy_polls = false;
  EXPECT_NEAR(simulate(ranks, 1, bare(0, 1e9)).rank_end[0], 1 * kMs, 1e-9);
}

// The sender's CPU of an off-node message: 1 us + 1 ns per byte; with NIC offload only the 1 us.
// 1 MB at 1e12 B/s is 1 us on the wire, which the copy overlaps: the message lands when the
// slower of the two ends.
TEST(Sim, NicOffloadDropsThePerByteCpu) {
  std::vector<SimRank> ranks(2);
  ranks[0].tasks.push_back({{SimStep::send(1, 1, 1e6, SimPath::Mpi)}, "send"});
  ranks[1].tasks.push_back({{SimStep::await(0, 1)}, "recv"});
  SimCosts c = bare(0, 1e12);
  c.mpi.cpu_send.c = {1e-6, 1e-9, 0};
  EXPECT_NEAR(simulate(ranks, 1, c).time, 1e-6 + 1e-3, 1e-9);
  c.nic_offload = true;
  EXPECT_NEAR(simulate(ranks, 1, c).time, 1e-6, 1e-9);
}

// A send's copy into the socket overlaps the wire (TCP sends what the copy has handed over): 1 MB
// at 1e9 B/s is 1 ms on the wire, its copy 0.4 ms; with 0.1 ms of latency it lands at 1.1 ms, not
// 1.5 ms as when the copy ran first (the validation's 1 MiB AllReduce at 5 Gbit/s: predicted
// 1.4x the measured). The sender's slot is busy for the copy only.
TEST(Sim, SendCpuOverlapsTheWire) {
  std::vector<SimRank> ranks(2);
  ranks[0].tasks.push_back(
      {{SimStep::send(1, 1, 1e6, SimPath::Mpi), SimStep::compute(0.1 * kMs)}, "send"});
  ranks[1].tasks.push_back({{SimStep::await(0, 1)}, "recv"});
  SimCosts c = bare(0.1 * kMs, 1e9);
  c.mpi.cpu_send.c = {0, 0.4e-9, 0};
  const SimResult r = simulate(ranks, 1, c);
  EXPECT_NEAR(r.rank_end[1], 1.1 * kMs, 1e-9);
  EXPECT_NEAR(r.rank_end[0], 0.5 * kMs, 1e-9);
}

// A token bucket per NIC direction (tc's tbf on the emulated links), 1 GB/s and 0.5 MB of burst:
// from full buckets, 1 MB passes half free and half at the rate, 0.5 ms; a second 1 MB right
// after finds both buckets empty, 1 ms more. 0.5 ms later (next_call) they are full again, and
// 0.2 MB passes at once. Without a bucket, 1 MB takes 1 ms.
TEST(Sim, TokenBucketLetsItsBurstThroughThenTheRate) {
  NetworkParams np;
  np.link_bytes_per_s = 1e9;
  np.latency_s = 0;
  np.burst_bytes = 0.5e6;
  Network net(2, np);
  EXPECT_NEAR(net.deliver(0, 0, 1, 1e6), 0.5 * kMs, 1e-12);
  EXPECT_NEAR(net.deliver(0.5 * kMs, 0, 1, 1e6), 1.5 * kMs, 1e-12);
  net.next_call(2 * kMs);
  EXPECT_NEAR(net.deliver(0, 0, 1, 0.2e6), 0, 1e-12);
  EXPECT_NEAR(net.deliver(0, 0, 1, 0.3e6), 0, 1e-12) << "the rest of the burst";
  EXPECT_NEAR(net.deliver(0, 0, 1, 0.1e6), 0.1 * kMs, 1e-12) << "the buckets are empty";
  np.burst_bytes = 0;
  EXPECT_NEAR(Network(2, np).deliver(0, 0, 1, 1e6), 1 * kMs, 1e-12);
}

// A receiver's NIC takes messages in the order their heads arrive, not in the order their
// senders asked: at 1 GB/s, node 0 sends 1 MB to node 1 and then 1 MB to node 2 (both ready at
// 0; the second leaves at 1 ms, its head at node 2 at 1 ms); node 1's 0.4 MB to node 2, ready
// at 0.5 ms, finds node 2's ingress idle and lands at 0.9 ms, before node 0's arrives (1-2 ms).
// A message too long for the gap goes after. (The ingress had been reserved in the senders'
// order: 0.4 MB landed at 2.4 ms, and a 3-node direct exchange with no send CPU took 96 us for
// what takes 64.) With token buckets (tbf) the queues stay first come, first served.
TEST(Sim, IngressTakesMessagesInTheOrderTheyArrive) {
  NetworkParams np;
  np.link_bytes_per_s = 1e9;
  np.latency_s = 0;
  Network net(3, np);
  EXPECT_NEAR(net.deliver(0, 0, 1, 1e6), 1 * kMs, 1e-12);
  EXPECT_NEAR(net.deliver(0, 0, 2, 1e6), 2 * kMs, 1e-12);
  EXPECT_NEAR(net.deliver(0.5 * kMs, 1, 2, 0.4e6), 0.9 * kMs, 1e-12) << "in the gap";
  EXPECT_NEAR(net.deliver(0.6 * kMs, 1, 2, 0.4e6), 2.4 * kMs, 1e-12) << "too long for the gap";
  // Three nodes, each sending 32 KB to both others at once, 1 GB/s, 1 us latency: every NIC
  // direction carries 64 KB, 65 us in all.
  std::vector<SimRank> ranks(3);
  for (int r = 0; r < 3; ++r) {
    for (int k = 1; k <= 2; ++k)
      ranks[r].tasks.push_back({{SimStep::send((r + k) % 3, 1, 32e3, SimPath::Mpi)}, "send"});
    for (int k = 1; k <= 2; ++k)
      ranks[r].tasks.push_back({{SimStep::await((r + 3 - k) % 3, 1)}, "recv"});
  }
  const SimResult r = simulate(ranks, 1, bare(1e-3 * kMs, 1e9));
  EXPECT_NEAR(r.time, 0.065 * kMs, 1e-9);
}

// The sequential GEMV of GemvSequentialAndFusedByHand with 0.1 ms tiles: 0.4 ms of compute, then
// 256 bytes at 256 B/ms (1 ms) and 0.5 ms of latency; buckets of 256 bytes. Without buckets the
// call takes 1.9 ms. One call from full buckets: 0.9 ms. In a loop (a repeated call), a call's
// bucket refills only over the call itself: the 0.5 ms after its bytes left and the next call's
// 0.4 ms of compute give 230.4 bytes, so 25.6 bytes wait 0.1 ms for the rate: 1 ms a call (the
// rate's bound: a loop cannot move more than the rate), as fused_perf's back-to-back calls
// measure on the emulated links. A gap between the calls refills the buckets.
TEST(Sim, LoopedCallsFindTheBucketsTheirPredecessorsLeft) {
  Profile p = gemv_tiles_of(0.1 * kMs);
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 2, 1);
  s.options.shaped.chunks = 1;
  SimCosts c = bare(0.5 * kMs, 64 / (0.25 * kMs));
  EXPECT_NEAR(simulate_modes(p, s, c).sequential, 1.9 * kMs, 1e-9);
  c.net.burst_bytes = 256;
  EXPECT_NEAR(simulate_modes(p, s, c).sequential, 0.9 * kMs, 1e-9);
  s.repeated_call = true;
  EXPECT_NEAR(simulate_modes(p, s, c).sequential, 1.0 * kMs, 1e-9);
  // A gap between the calls (a benchmark's barrier) refills the buckets for its length: 0.05 ms
  // gives 12.8 bytes more, and 12.8 bytes wait 0.05 ms; 0.5 ms fills them, as one call.
  s.loop_gap_s = 0.05 * kMs;
  EXPECT_NEAR(simulate_modes(p, s, c).sequential, 0.95 * kMs, 1e-9);
  s.loop_gap_s = 0.5 * kMs;
  EXPECT_NEAR(simulate_modes(p, s, c).sequential, 0.9 * kMs, 1e-9);
  s.loop_gap_s = 0;
  c.net.burst_bytes = 0;
  EXPECT_NEAR(simulate_modes(p, s, c).sequential, 1.9 * kMs, 1e-9) << "nothing to carry";
}

TEST(Sim, AwaitWithoutSenderIsAnError) {
  std::vector<SimRank> ranks(2);
  ranks[1].tasks.push_back({{SimStep::await(0, 3)}, "recv"});
  EXPECT_THROW(simulate(ranks, 1, bare(0, 1e9)), Error);
  EXPECT_THROW(simulate(ranks, 0, bare(0, 1e9)), Error);
}

// GemvAllReduce M = 64, tile 16 (4 blocks), two-shot, 2 nodes of 1 rank, one slot: every tile
// 1 ms, nothing else costs CPU; a 64-byte block takes 0.25 ms on the wire + 0.5 ms latency.
//  - sequential: 4 ms of compute, then the 256-byte AllReduce (hierarchical: nodes of one rank,
//    a slice <= 16 KiB: each node sends its whole slice to the other): 1 ms wire + 0.5 ms: 5.5 ms;
//  - fused (remote first): rank 0 computes blocks 2, 3 (sent at 1, 2 ms), 0, reduces 0 (at 3 ms,
//    rank 1's partial landed at 1.75), 1, reduces 1 at 4 ms, sends it: it lands at rank 1 at
//    4.75 ms, the end (rank 1 symmetric).
TEST(Sim, GemvSequentialAndFusedByHand) {
  Profile p = gemv_tiles_of(1 * kMs);
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 2, 1);
  s.options.fused_algorithm = FusedAlgorithm::TwoShot;
  s.options.shaped.chunks = 1;
  const SimCosts c = bare(0.5 * kMs, 64 / (0.25 * kMs));
  const SimModes m = simulate_modes(p, s, c);
  EXPECT_NEAR(m.compute, 4 * kMs, 1e-9);
  EXPECT_NEAR(m.sequential, 5.5 * kMs, 1e-9);
  EXPECT_NEAR(m.fused, 4.75 * kMs, 1e-9);
  // One chunk of shaped mode is sequential (its collective task waits for every tile).
  EXPECT_NEAR(m.shaped, 5.5 * kMs, 1e-9);
  // The fused plan is the operator's: 4 computes, 2 reduces, 2 gathers per rank.
  const std::vector<SimRank> prog = fused_program(p, s);
  ASSERT_EQ(prog.size(), 2u);
  ASSERT_EQ(prog[0].tasks.size(), 8u);
  const std::vector<long long> tiles0{2, 3, 0, 0, 1, 1, 2, 3};
  for (std::size_t i = 0; i < tiles0.size(); ++i)
    EXPECT_EQ(prog[0].tasks[i].tile, tiles0[i]) << "task " << i;
  EXPECT_EQ(prog[0].tasks[3].label, "reduce");
  EXPECT_EQ(prog[0].tasks[7].label, "gather");
}

// GemmAllToAll on two nodes of one slot, tiles of 4 rows at 1 ms each, 20 rows routed per rank
// over one expert per rank (synthetic_moe_routing: rank 0 keeps 4 and sends 16, rank 1 sends 15
// and keeps 5), N = 8 (32 bytes a row), 32 B/ms, no latency. Rank 0 computes 4 + 1 tiles, rank
// 1 4 + 2. Sequential: rank 1's 6 ms of compute, then its 16 rows (512 B, 16 ms) to rank 0
// (rank 0's 15 rows, sent at 5 ms, are there by then): 22 ms. Fused: each rank first sends its
// 24-byte header (0.75 ms), then each tile as it is done, the other rank's first; rank 1's 4
// tiles for rank 0 (128 B, 4 ms each) leave from 1 ms, back to back: 17 ms.
TEST(Sim, GemmAllToAllSequentialAndFusedByHand) {
  Profile p;
  p.gemm.c = {1 * kMs, 0, 0};
  SimSetup s = one_slot({OpKind::GemmAllToAll, 20, 1, 8, 1, 1, 4}, 2, 1);
  const SimCosts c = bare(0, 32 / kMs);
  const SimModes m = simulate_modes(p, s, c);
  EXPECT_NEAR(m.compute, 6 * kMs, 1e-9);
  EXPECT_NEAR(m.sequential, 22 * kMs, 1e-9);
  const std::vector<SimRank> prog = fused_program(p, s);
  ASSERT_EQ(prog.size(), 2u);
  // Rank 0: its header to rank 1, 4 tiles for rank 1 then 1 for itself, 4 arrivals from rank 1,
  // the header check.
  ASSERT_EQ(prog[0].tasks.size(), 11u);
  EXPECT_EQ(prog[0].tasks[0].label, "header");
  EXPECT_EQ(prog[0].tasks[1].peer, 1);
  EXPECT_EQ(prog[0].tasks[5].peer, 0);
  EXPECT_EQ(prog[0].tasks[6].label, "arrive");
  EXPECT_EQ(prog[0].tasks[10].label, "check header");
  EXPECT_NEAR(m.fused, 17 * kMs, 1e-9);
}

// GemvAllReduce's one-shot blocks across nodes are cut for the path the simulator runs
// (sim_off_node_path: its link, its MPI messages' CPU and proxy), as an op calibrated on that
// network would cut them: 32 KiB at 18 us a message is one block at 100 Gbit/s, four at 119 MB/s
// (sqrt(275 / 18) = 3.9: 72 + 69 us exposed, 3: 54 + 92). Each rank's block is two messages: its
// flag in its own segment and its send to the other node.
TEST(Sim, GemvOneShotBlocksFollowTheSimulatedPath) {
  const Profile p = gemv_tiles_of(0.01 * kMs);
  SimSetup s = one_slot({OpKind::GemvAllReduce, 8192, 16, 1}, 2, 1);
  s.options.fused_algorithm = FusedAlgorithm::OneShot;
  auto costs = [](double bytes_per_s) {
    SimCosts c = bare(0, bytes_per_s);
    c.mpi.cpu_send.c = {8.1e-6, 0, 0};
    c.mpi.cpu_recv.c = {0.5e-6, 0, 0};
    c.proxy_s = 9.4e-6;
    return c;
  };
  EXPECT_EQ(simulate_modes(p, s, costs(12.5e9)).fused_run.messages, 2 * 2 * 1);
  EXPECT_EQ(simulate_modes(p, s, costs(119e6)).fused_run.messages, 2 * 2 * 4);
  s.off_node = sim_off_node_path(costs(119e6));
  EXPECT_EQ(sim_tile(s), 2048u);

  // No message CPU simulated: the defaults' 25 us (sqrt(275 / 25) = 3.3 -> 3 blocks: 75 + 92 us
  // exposed, 4: 100 + 69).
  EXPECT_EQ(simulate_modes(p, s, bare(0, 119e6)).fused_run.messages, 2 * 2 * 3);
}

// Shaped pays the device's launch for its first compute and communication kernels, and for every
// later chunk's communication kernel, which starts when its chunk's compute ends (queued behind
// an event, it is dispatched then: a worker woken, or taken over). The setup above in two chunks,
// one slot, so every step is on the critical path: launches of 0.1 ms add 0.2 + 0.1 ms.
TEST(Sim, ShapedPaysALaunchPerChunkCollective) {
  Profile p = gemv_tiles_of(1 * kMs);
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 2, 1);
  s.options.shaped.chunks = 2;
  const SimCosts c = bare(0.5 * kMs, 64 / (0.25 * kMs));
  const double free = simulate_modes(p, s, c).shaped;
  p.launch_s = 0.1 * kMs;
  EXPECT_NEAR(simulate_modes(p, s, c).shaped - free, 0.3 * kMs, 1e-9);
  s.options.shaped.chunks = 1;  // one chunk: its two kernels only
  const double one = simulate_modes(p, s, c).shaped;
  p.launch_s = 0;
  EXPECT_NEAR(one - simulate_modes(p, s, c).shaped, 0.2 * kMs, 1e-9);
}

// The shaped mode cuts no more chunks than the op has row blocks (GemvAllReduceImpl::run_shaped):
// the 4 blocks above in 8 chunks are 4 chunks, not 4 more empty chunk collectives with their
// launches and latencies. (The simulator had cut 8: at 2 x 5 Gbit/s, M = 16384 in 2 blocks,
// shaped was predicted 123 us where 102 were measured.)
TEST(Sim, ShapedCutsNoMoreChunksThanBlocks) {
  Profile p = gemv_tiles_of(1 * kMs);
  p.launch_s = 0.1 * kMs;
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 2, 1);
  const SimCosts c = bare(0.5 * kMs, 64 / (0.25 * kMs));
  s.options.shaped.chunks = 4;
  const double four = simulate_modes(p, s, c).shaped;
  s.options.shaped.chunks = 8;
  EXPECT_NEAR(simulate_modes(p, s, c).shaped, four, 1e-12);
}

// A kernel whose WGs take more than one slot pays Profile::launch_grid_s (its workers beyond the
// first come in), a one-WG kernel launch_s; an older profile (launch_grid_s 0) launch_s for all.
// GEMV M = 64 in 16-row tiles on one rank of two slots: the compute kernel and the persistent fused
// kernel take both slots; shaped's communication kernels are one WG each; across nodes the fused
// kernel is one WG per CU.
TEST(Sim, KernelsOnSeveralSlotsPayTheGridLaunch) {
  const SimCosts c = bare(0, 1e12);
  // What launches of `one` (one WG) and `grid` (a WG per slot) add to each mode of `s`.
  auto added = [&](const SimSetup& s, double one, double grid) {
    Profile p = gemv_tiles_of(1 * kMs);
    const SimModes free = simulate_modes(p, s, c);
    p.launch_s = one;
    p.launch_grid_s = grid;
    const SimModes paid = simulate_modes(p, s, c);
    return SimModes{paid.sequential - free.sequential,
                    paid.shaped - free.shaped,
                    paid.fused - free.fused,
                    paid.compute - free.compute,
                    {}};
  };
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 1, 1);
  s.slots = 2;
  s.options.shaped.chunks = 2;
  SimModes d = added(s, 0.1 * kMs, 0.4 * kMs);
  EXPECT_NEAR(d.compute, 0.4 * kMs, 1e-9);
  EXPECT_NEAR(d.fused, 0.4 * kMs, 1e-9);
  // The compute kernel's grid launch and the first communication kernel's at the start; chunk 1's
  // communication kernel waits for its tiles, which end last, so its launch adds too.
  EXPECT_NEAR(d.shaped, 0.4 * kMs + 0.1 * kMs + 0.1 * kMs, 1e-9);
  EXPECT_NEAR(added(s, 0.1 * kMs, 0).compute, 0.1 * kMs, 1e-9);  // an older profile
  // Across nodes the fused kernel is one WG per CU (the host thread drives the proxy): one WG
  // here, launch_s; its compute kernel still takes both slots.
  SimSetup two = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 2, 1);
  two.slots = 2;
  d = added(two, 0.1 * kMs, 0.4 * kMs);
  EXPECT_NEAR(d.fused, 0.1 * kMs, 1e-9);
  EXPECT_NEAR(d.compute, 0.4 * kMs, 1e-9);
  s.slots = 1;  // one slot: every kernel's WGs run on one worker
  EXPECT_NEAR(added(s, 0.1 * kMs, 0.4 * kMs).compute, 0.1 * kMs, 1e-9);
}

// A repeated call (a benchmark's loop) charges GEMV tiles the warm points while the node's W fits
// in half the profile's cache, the streamed ones from twice the cache on, and between them a blend
// (warm_share: half warm at the cache's size); a one-off call always streams. M = 64, K = 8,
// float32: 2 KiB of W per rank, 4 KiB for a node of two ranks.
TEST(Sim, RepeatedCallsOnCachedWeightsCostTheWarmPoints) {
  Profile p;
  p.gemv.c = {1 * kMs, 0, 0};                      // streamed: 1 ms a tile
  p.gemv_warm.c = {1, 1, 1};                       // (the line is not read: a table is)
  p.gemv_warm.table = {{16, 16 * 8, 0.25 * kMs}};  // warm: 0.25 ms a 16-row tile
  p.shm.measured = p.mpi.measured = true;
  p.cache_bytes = 8 << 10;
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 1, 2);  // 4 tiles
  const SimCosts c = bare(0, 1e12);
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 4 * kMs, 1e-9);
  s.repeated_call = true;
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 1 * kMs, 1e-9);  // 4 KiB <= 4 KiB: warm
  EXPECT_DOUBLE_EQ(warm_share(p, s, p.gemv_warm, 2 << 10), 1.0);
  p.cache_bytes = 4 << 10;  // 4 KiB = the cache: half of each tile warm, half streamed
  EXPECT_DOUBLE_EQ(warm_share(p, s, p.gemv_warm, 2 << 10), 0.5);
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 2.5 * kMs, 1e-9);
  p.cache_bytes = 2 << 10;  // 4 KiB = twice the cache: streamed
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 4 * kMs, 1e-9);
  // Between: a working set of sqrt(2) caches is a quarter warm.
  p.cache_bytes = 1 << 20;
  EXPECT_NEAR(warm_share(p, s, p.gemv_warm, std::sqrt(2.0) * (1 << 19)), 0.25, 1e-12);
  p.cache_bytes = 0;  // unknown: streamed
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 4 * kMs, 1e-9);
}

// Nodes emulated on one machine share its L3 (tools/cluster): two nodes of one rank whose 2 KiB
// of W each fit a 4 KiB cache's half alone; together they fill it (half warm), and four such
// ranks stream. Before ranks_per_cache the
// validation charged such calls the warm points: GEMV M = 262144 K = 16 across 2 emulated nodes,
// 410 us predicted against 1290-1640 us measured.
TEST(Sim, RanksSharingOneCacheShareItsRoom) {
  Profile p;
  p.gemv.c = {1 * kMs, 0, 0};
  p.gemv_warm.c = {1, 1, 1};
  p.gemv_warm.table = {{16, 16 * 8, 0.25 * kMs}};
  p.shm.measured = p.mpi.measured = true;
  p.cache_bytes = 4 << 10;
  // 4 tiles, 2 KiB of W per rank.
  SimSetup s = one_slot({OpKind::GemvAllReduce, 64, 8, 1, 1, 1, 16}, 2, 1);
  s.repeated_call = true;
  const SimCosts c = bare(0, 1e12);
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 1 * kMs, 1e-9);  // one rank per cache: warm
  s.ranks_per_cache = 2;
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 2.5 * kMs, 1e-9);  // 4 KiB: half warm
  s.ranks_per_cache = 4;
  EXPECT_NEAR(simulate_modes(p, s, c).compute, 4 * kMs, 1e-9);  // 8 KiB: streamed
}

// The same rule for an embedding call on the same indices: warm when the rows it looks up (the
// global batch's bags of this rank's tables) fit, with every rank sharing the cache. Batch 64,
// one table of pool 2 and dim 8 per rank: 4 KiB of rows per rank, 8 KiB for a node of two. Before
// the warm points, the validation charged such calls cold lookups: embedding batch 1024 across 2
// emulated nodes, its compute kernel predicted at 2.0-2.3x its measured time.
TEST(Sim, RepeatedEmbeddingCallsOnCachedRowsCostTheWarmPoints) {
  Profile p;
  p.embedding.table = {{16, 16 * 8, 1 * kMs}};          // cold: 1 ms per 16 lookups of dim 8
  p.embedding_warm.table = {{16, 16 * 8, 0.25 * kMs}};  // warm: a quarter of it
  p.shm.measured = p.mpi.measured = true;
  p.cache_bytes = 16 << 10;
  SimSetup s = one_slot({OpKind::EmbeddingAllToAll, 64, 0, 8, 1, 2, 16}, 1, 2);
  const SimCosts c = bare(0, 1e12);
  const double cold = simulate_modes(p, s, c).compute;
  EXPECT_NEAR(cold, 8 * kMs, 1e-9);  // 64 bags x 2 lookups on this rank's table
  s.repeated_call = true;
  EXPECT_NEAR(simulate_modes(p, s, c).compute, cold / 4, 1e-9);  // 8 KiB <= 8 KiB: warm
  p.cache_bytes = 8 << 10;
  EXPECT_NEAR(simulate_modes(p, s, c).compute, (cold / 4 + cold) / 2, 1e-9);  // half warm
  p.cache_bytes = 4 << 10;
  EXPECT_NEAR(simulate_modes(p, s, c).compute, cold, 1e-9);  // 8 KiB = twice the cache: cold
  p.cache_bytes = 16 << 10;
  p.embedding_warm.table.clear();  // an older profile: no warm points
  EXPECT_NEAR(simulate_modes(p, s, c).compute, cold, 1e-9);
}

TEST(Sim, UnsupportedSetupsAreErrors) {
  Profile p;
  SimSetup s;
  s.shape = {OpKind::GemmAllToAll, 64, 8, 8, 0, 1, 0};  // no experts
  EXPECT_THROW(fused_program(p, s), Error);
  s.shape.tables = 2;
  EXPECT_NO_THROW(fused_program(p, s));
  s.shape.k = 0;
  EXPECT_THROW(fused_program(p, s), Error);
  s.shape.op = OpKind::GemvAllReduce;
  s.nodes = 0;
  EXPECT_THROW(fused_program(p, s), Error);
}

}  // namespace
}  // namespace tilecomm::model
