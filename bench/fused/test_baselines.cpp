// The baselines' candidates and their tuning (bench/fused/baselines.hpp): which knobs each
// baseline tries, that tuning keeps the fastest candidate, drops the rest and survives a
// candidate the operator rejects, and that a tuned real operator agrees with sequential.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "bars.hpp"
#include "baselines.hpp"
#include "harness.hpp"

namespace tilecomm::bench {
namespace {

std::set<std::string> knobs(const std::vector<Candidate>& cands) {
  std::set<std::string> out;
  for (const Candidate& c : cands)
    out.insert(c.knob);
  return out;
}

TEST(Baselines, CandidatesOnOneCu) {
  OpOptions base;
  base.tile = 512;
  const auto lds = candidates(Baseline::ShapedLds, Collective::AllReduce, 1, base);
  EXPECT_EQ(knobs(lds), (std::set<std::string>{"chunks=2 free_cus=1", "chunks=4 free_cus=1",
                                               "chunks=8 free_cus=1"}));
  for (const Candidate& c : lds) {
    EXPECT_EQ(c.mode, Mode::Shaped);
    EXPECT_EQ(c.options.shaped.policy, ShapedPolicy::Lds);
    EXPECT_EQ(c.options.tile, 512u);
  }
  const auto nb = candidates(Baseline::ShapedNonBlocking, Collective::AllReduce, 1, base);
  EXPECT_EQ(knobs(nb), (std::set<std::string>{"chunks=2", "chunks=4", "chunks=8"}));
  for (const Candidate& c : nb)
    EXPECT_EQ(c.options.shaped.policy, ShapedPolicy::NonBlocking);
  EXPECT_TRUE(candidates(Baseline::ShapedCuMask, Collective::AllReduce, 1, base).empty());
}

TEST(Baselines, CandidatesOnThreeCus) {
  const auto cu = candidates(Baseline::ShapedCuMask, Collective::AllToAllv, 3, {});
  ASSERT_EQ(cu.size(), 6u);
  for (const Candidate& c : cu) {
    EXPECT_EQ(c.options.shaped.policy, ShapedPolicy::CuMask);
    EXPECT_GE(c.options.shaped.free_cus, 1);
    EXPECT_LE(c.options.shaped.free_cus, 2);
  }
  EXPECT_EQ(candidates(Baseline::ShapedLds, Collective::AllToAllv, 3, {}).size(), 6u);
}

TEST(Baselines, SequentialBestCollectiveTriesEveryAlgorithm) {
  const auto seq = candidates(Baseline::SequentialBestCollective, Collective::AllToAllv, 2, {});
  std::set<std::string> algos;
  for (const Candidate& c : seq) {
    EXPECT_EQ(c.mode, Mode::Sequential);
    EXPECT_EQ(c.knob, "algorithm=" + c.options.algorithm);
    algos.insert(c.options.algorithm);
  }
  const auto names = algorithm_names(Collective::AllToAllv);
  EXPECT_EQ(algos, std::set<std::string>(names.begin(), names.end()));
  EXPECT_TRUE(algos.count("mpi"));
}

// An OpBench whose variants take as long as their OpOptions::tile says (microseconds); tile 1
// raises tilecomm::Error, as a collective algorithm that cannot run the arguments does.
class FakeBench : public OpBench {
 public:
  void compute_only() override {}
  void collective_only() override {}
  void run(Mode, std::size_t v) override {
    ASSERT_LT(v, tiles.size());
    ASSERT_FALSE(dropped.count(v)) << "ran dropped variant " << v;
    if (tiles[v] == 1) throw Error(ErrorCode::InvalidArgument, "tile 1 rejected");
    std::this_thread::sleep_for(std::chrono::microseconds(tiles[v]));
  }
  std::size_t add_variant(const OpOptions& o) override {
    tiles.push_back(o.tile);
    return tiles.size() - 1;
  }
  void drop_variant(std::size_t v) override { dropped.insert(v); }
  std::optional<Mode> auto_choice(std::size_t) override { return std::nullopt; }
  Collective collective() const override { return Collective::AllReduce; }
  void record_reference() override {}
  long long wrong_vs_sequential(Mode) override { return 0; }
  std::size_t bytes() const override { return 0; }
  std::string shape() const override { return "fake"; }

  std::vector<std::size_t> tiles{0};  // variant 0: the bench's own operator
  std::set<std::size_t> dropped;
};

Candidate with_tile(const std::string& knob, std::size_t tile) {
  Candidate c{knob, Mode::Shaped, {}};
  c.options.tile = tile;
  return c;
}

TEST(Baselines, TuneKeepsTheFastestAndDropsTheRest) {
  FakeBench bench;
  const NodeCpu node;
  const Tuned t = tune(bench, Baseline::ShapedLds,
                       {with_tile("slow", 20000), with_tile("rejected", 1), with_tile("fast", 100),
                        with_tile("slower", 40000)},
                       3, node);
  ASSERT_TRUE(t.available);
  EXPECT_EQ(t.knob, "fast");
  EXPECT_EQ(t.mode, Mode::Shaped);
  EXPECT_EQ(bench.tiles[t.variant], 100u);
  EXPECT_EQ(bench.dropped, (std::set<std::size_t>{1, 2, 4}));  // slow, rejected, slower
  ASSERT_EQ(t.rejected.size(), 1u);
  EXPECT_NE(t.rejected[0].find("rejected: "), std::string::npos) << t.rejected[0];
  ASSERT_EQ(t.tried.size(), 4u);
  for (const auto& [knob, us] : t.tried)
    EXPECT_EQ(us < 0, knob == "rejected") << knob;
}

TEST(Baselines, TuneWithoutCandidatesIsNotAvailable) {
  FakeBench bench;
  const NodeCpu node;
  const Tuned t = tune(bench, Baseline::ShapedCuMask, {}, 3, node);
  EXPECT_FALSE(t.available);
  EXPECT_EQ(t.knob, "n/a (needs >= 2 CUs)");
  EXPECT_EQ(bench.tiles.size(), 1u);
}

// An algorithm that cannot run here is found by the probe, which leaves the caller's
// communicator usable (a declined call would not).
TEST(Baselines, ProbeRejectsWithoutHarm) {
  Communicator comm(MPI_COMM_WORLD);
  const bool one_node = comm.num_nodes() == 1;
  EXPECT_EQ(probe_algorithm(Collective::AllToAllv, 64, "shm").empty(), one_node);
  EXPECT_EQ(probe_algorithm(Collective::AllReduce, 4096, "mpi"), "");
  EXPECT_EQ(probe_algorithm(Collective::ReduceScatter, 4096, "ring"), "");
  EXPECT_NE(probe_algorithm(Collective::AllReduce, 4096, "bogus").find("bogus"), std::string::npos);
  std::vector<float> x(8, 1.0f), y(8);
  allreduce(comm, x.data(), y.data(), x.size(), DataType::Float32, ReduceOp::Sum);
  EXPECT_EQ(y[0], static_cast<float>(comm.size()));
}

// A real operator: every AllReduce algorithm either runs or is rejected on every rank alike, and
// the winner's result is sequential's, bit for bit.
TEST(Baselines, TunedGemvAgreesWithSequential) {
  Communicator comm(MPI_COMM_WORLD);
  RuntimeConfig cfg;
  cfg.num_cus = 2;
  cfg.wg_slots_per_cu = 2;
  Device dev(cfg);
  const NodeCpu node;
  Shape s;
  s.size = 4096;
  s.ratio = 64;
  auto bench = make_op_bench("gemv_allreduce", comm, dev, s, {});
  // A sequential call records no reference (the timed ones must not copy their output): only
  // record_reference() does.
  bench->run(Mode::Sequential, 0);
  EXPECT_GT(bench->wrong_vs_sequential(Mode::Sequential), 0) << "a reference without asking";
  bench->record_reference();
  EXPECT_EQ(bench->wrong_vs_sequential(Mode::Sequential), 0);
  for (Baseline b : {Baseline::SequentialBestCollective, Baseline::ShapedLds,
                     Baseline::ShapedNonBlocking, Baseline::ShapedCuMask}) {
    const Tuned t = tune(*bench, b, candidates(b, bench->collective(), dev.num_cus(), {}), 2, node);
    ASSERT_TRUE(t.available) << baseline_name(b);
    bench->run(Mode::Sequential, 0);
    bench->record_reference();
    bench->run(t.mode, t.variant);
    EXPECT_EQ(bench->wrong_vs_sequential(t.mode), 0) << baseline_name(b) << " " << t.knob;
  }
}

// The timed rounds' order: a permutation, the same on every rank (a function of the round), and
// over a benchmark's rounds every variant follows every other (a fixed rotation gave each the
// same predecessor in every round).
TEST(RoundOrder, EveryVariantFollowsEveryOther) {
  const int variants = 6;
  std::set<std::pair<int, int>> followed;  // (predecessor, variant) within a round
  for (int round = 0; round < 30; ++round) {
    const std::vector<int> order = round_order(variants, round);
    EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), std::size_t(variants));
    EXPECT_EQ(order, round_order(variants, round));
    for (std::size_t j = 1; j < order.size(); ++j)
      followed.insert({order[j - 1], order[j]});
  }
  EXPECT_EQ(followed.size(), std::size_t(variants * (variants - 1)));
  EXPECT_TRUE(round_order(0, 3).empty());
  EXPECT_EQ(round_order(1, 3), std::vector<int>{0});
}

// The A/B that judges Auto: both sides every round, either going first, and the ratio of their
// medians (a side's outlier does not move it).
TEST(AutoAb, BothSidesEveryRoundEitherFirst) {
  std::vector<int> calls;
  const AutoAb ab = auto_ab(9, 0, [&](int v) {
    calls.push_back(v);
    const bool outlier = v == 1 && calls.size() == 2;
    return Timing{v == 0 ? 105.0 : (outlier ? 1e6 : 100.0), 0};
  });
  ASSERT_EQ(calls.size(), 18u);
  int auto_first = 0;
  for (std::size_t r = 0; r < 9; ++r) {
    EXPECT_NE(calls[2 * r], calls[2 * r + 1]);
    auto_first += calls[2 * r] == 0;
  }
  EXPECT_GT(auto_first, 0);
  EXPECT_LT(auto_first, 9);
  EXPECT_EQ(ab.rounds, 9);
  EXPECT_DOUBLE_EQ(ab.autom.median, 105.0);
  EXPECT_DOUBLE_EQ(ab.best.median, 100.0);
  EXPECT_DOUBLE_EQ(ab.ratio(), 1.05);
  EXPECT_DOUBLE_EQ(auto_ab(0, 0, [](int) { return Timing{}; }).ratio(), 0.0);
}

// With a lead-in, each timed call follows untimed calls of its own side adding up to the lead-in
// (here 3 calls of 400 us for 1 ms), and only the timed ones are kept.
TEST(AutoAb, EachTimedCallFollowsItsOwnLeadIn) {
  std::vector<int> calls;
  const AutoAb ab = auto_ab(4, 1.0, [&](int v) {
    calls.push_back(v);
    return Timing{calls.size() % 4 == 0 ? 400.0 + v : 400.0, 0};
  });
  ASSERT_EQ(calls.size(), 4u * 2 * 4);
  for (std::size_t i = 0; i < calls.size(); i += 4)
    EXPECT_EQ(std::set<int>(calls.begin() + i, calls.begin() + i + 4).size(), 1u) << i;
  EXPECT_DOUBLE_EQ(ab.autom.median, 400.0);
  EXPECT_DOUBLE_EQ(ab.best.median, 401.0);
}
// Issue 13's bars from a row's medians (docs/workloads.md).
TEST(Bars, OverlapRowMeetsAllThree) {
  // compute 100, comm 50, sequential 150, best other 130, fused 105 (2 cores, CPU 120).
  const Bars b = judge(100, 50, 100, 20, 2, 150, 130, 105);
  EXPECT_EQ(b.ideal_cpu, 100);
  EXPECT_EQ(b.possible_saving, 50);
  EXPECT_FALSE(b.small_saving);
  ASSERT_TRUE(b.recovered);
  EXPECT_DOUBLE_EQ(*b.recovered, 0.9);
  EXPECT_TRUE(b.faster_than_all && b.recovered_075 && b.within_115_ideal);
  EXPECT_EQ(b.text(), "faster than all yes; recovered >= 0.75 yes; <= 1.15 ideal_cpu yes");
}

TEST(Bars, CpuTimeRaisesTheIdeal) {
  // Compute and communication each keep both cores busy: the ideal is their sum over 2 cores.
  const Bars b = judge(100, 50, 200, 100, 2, 150, 150, 150);
  EXPECT_EQ(b.ideal_cpu, 150);
  EXPECT_TRUE(b.small_saving);  // nothing to gain
  EXPECT_FALSE(b.recovered);
}

TEST(Bars, MissesAreReported) {
  const Bars b = judge(100, 50, 50, 10, 2, 150, 120, 125);
  ASSERT_TRUE(b.recovered);
  EXPECT_DOUBLE_EQ(*b.recovered, 0.5);
  EXPECT_FALSE(b.faster_than_all);
  EXPECT_FALSE(b.recovered_075);
  EXPECT_FALSE(b.within_115_ideal);  // 125 > 115
  EXPECT_EQ(b.text(), "faster than all **no**; recovered >= 0.75 **no**; <= 1.15 ideal_cpu **no**");
}

TEST(Bars, SmallSavingOnlyAsksNotSlower) {
  // Decode-like: comm 1 of a 100 call; sequential sat 10 above compute by noise, which the cap
  // at min(compute, comm) does not take for room to save.
  const Bars tie = judge(100, 1, 60, 1, 2, 110, 104, 104);
  EXPECT_EQ(tie.possible_saving, 1);
  EXPECT_TRUE(tie.small_saving);
  EXPECT_FALSE(tie.recovered);
  EXPECT_TRUE(tie.not_slower_than_best);
  EXPECT_FALSE(tie.faster_than_all);
  EXPECT_EQ(tie.text(), "saving < 5 %: not slower than best other yes");
  EXPECT_EQ(judge(100, 1, 60, 1, 2, 110, 104, 105).text(),
            "saving < 5 %: not slower than best other **no**");
}

}  // namespace
}  // namespace tilecomm::bench
