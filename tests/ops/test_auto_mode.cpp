// Mode::Auto's choice rule (ops/common/auto_mode.hpp), on hand-made timings: no MPI, no device.
#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <vector>

#include "ops/common/auto_mode.hpp"

namespace tilecomm::detail {
namespace {

// Rounds of {sequential, shaped, fused} times, chosen from as the schedule lists them.
Mode choose(std::initializer_list<std::array<double, 3>> rs) {
  std::vector<double> v;
  std::vector<Mode> modes;
  for (const auto& r : rs) {
    v.insert(v.end(), r.begin(), r.end());
    modes.insert(modes.end(), {Mode::Sequential, Mode::Shaped, Mode::Fused});
  }
  return choose_auto_mode(v, modes);
}

TEST(AutoModeChoice, FastestMedianWins) {
  EXPECT_EQ(choose({{10, 12, 8}, {10, 12, 8}}), Mode::Fused);
  EXPECT_EQ(choose({{10, 7, 8}, {10, 7, 8}}), Mode::Shaped);
  EXPECT_EQ(choose({{10, 12, 11}, {10, 12, 11}}), Mode::Sequential);
}

TEST(AutoModeChoice, MediansNotMeansDecide) {
  // Fused has one outlier (50) in three rounds: median 8 beats sequential's 10.
  EXPECT_EQ(choose({{10, 12, 8}, {10, 12, 50}, {10, 12, 8}}), Mode::Fused);
  // Sequential's outlier does not make it lose: its median stays 10.
  EXPECT_EQ(choose({{90, 12, 11}, {10, 12, 11}, {10, 12, 11}}), Mode::Sequential);
  // Even count: the median is the mean of the middle two (fused: 9 < 0.98 x 10).
  EXPECT_EQ(choose({{10, 12, 8.5}, {10, 12, 9.5}}), Mode::Fused);
}

TEST(AutoModeChoice, ANonSequentialModeMustBeatSequentialByTheMargin) {
  EXPECT_EQ(choose({{100, 120, 99}}), Mode::Sequential);  // 1 % faster
  EXPECT_EQ(choose({{100, 120, 97}}), Mode::Fused);       // 3 % faster
  // The margin was 5 %: fused 7 % faster by the medians of 9 trial calls each (the one-node GEMV
  // row's, whose timed rounds had it 7-13 % faster) stayed on sequential when a few calls drew
  // slow; 3 % off now still picks it.
  EXPECT_EQ(choose({{100, 120, 97}, {100, 120, 96.5}, {100, 120, 110}}), Mode::Fused);
  // Shaped and fused both beat the margin: the lower median wins; an exact tie goes to shaped,
  // the earlier candidate.
  EXPECT_EQ(choose({{100, 90, 80}}), Mode::Fused);
  EXPECT_EQ(choose({{100, 80, 80}}), Mode::Shaped);
}

TEST(AutoModeChoice, SamplesAreMatchedToTheirModesNotTheirPositions) {
  const std::vector<double> t = {5, 10, 20, 10, 20, 5};
  const std::vector<Mode> by_position = {Mode::Sequential, Mode::Shaped, Mode::Fused,
                                         Mode::Sequential, Mode::Shaped, Mode::Fused};
  const std::vector<Mode> rotated = {Mode::Fused,      Mode::Sequential, Mode::Shaped,
                                     Mode::Sequential, Mode::Shaped,     Mode::Fused};
  EXPECT_EQ(choose_auto_mode(t, by_position), Mode::Sequential);  // medians 7.5 / 15 / 12.5
  EXPECT_EQ(choose_auto_mode(t, rotated), Mode::Fused);           // medians 10 / 20 / 5
}

// A pass: per candidate a block of a lead-in (not measured) and `rounds` measured calls of that
// mode, so every measured call follows a call of its own mode; each measured call is flagged (it
// starts with a barrier). The next pass rotates the blocks' order.
TEST(AutoModeSchedule, BlocksOfOneModeEachAfterALeadInThenSettled) {
  AutoMode a(3);
  const Mode S = Mode::Sequential, H = Mode::Shaped, F = Mode::Fused;
  const Mode order[] = {S, S, S, S, H, H, H, H, F, F, F, F};
  for (int call = 0; call < 12; ++call) {
    EXPECT_EQ(a.next(), order[call]) << "call " << call;
    EXPECT_EQ(a.measuring(), call % 4 != 0) << "call " << call;
    EXPECT_EQ(a.record(1.0 + call), call == 11) << "call " << call;
  }
  // The lead-ins (calls 0, 4, 8) are not samples.
  EXPECT_EQ(a.samples(), (std::vector<double>{2, 3, 4, 6, 7, 8, 10, 11, 12}));
  EXPECT_EQ(a.sample_modes(), (std::vector<Mode>{S, S, S, H, H, H, F, F, F}));
  EXPECT_FALSE(a.choice());
  // Not clear: one more pass, rotated (shaped, fused, sequential), samples kept.
  a.extend();
  const Mode second[] = {H, H, H, H, F, F, F, F, S, S, S, S};
  for (int call = 0; call < 12; ++call) {
    EXPECT_EQ(a.next(), second[call]) << "second pass, call " << call;
    EXPECT_EQ(a.measuring(), call % 4 != 0) << "second pass, call " << call;
    EXPECT_EQ(a.record(1.0), call == 11) << "second pass, call " << call;
  }
  EXPECT_EQ(a.samples().size(), 18u);
  a.settle(Mode::Shaped);
  for (int call = 0; call < 5; ++call) {
    EXPECT_EQ(a.next(), Mode::Shaped);
    EXPECT_FALSE(a.measuring());
    EXPECT_FALSE(a.record(1.0));
  }
  EXPECT_EQ(a.samples().size(), 18u);
}

// Two candidates (a profile ruled fused out): blocks of sequential and shaped only.
TEST(AutoModeSchedule, OnlyTheCandidatesGetBlocks) {
  AutoMode a(2);
  a.set_candidates({Mode::Sequential, Mode::Shaped});
  const Mode S = Mode::Sequential, H = Mode::Shaped;
  const Mode order[] = {S, S, S, H, H, H};
  for (int call = 0; call < 6; ++call) {
    EXPECT_EQ(a.next(), order[call]) << "call " << call;
    EXPECT_EQ(a.record(1.0), call == 5) << "call " << call;
  }
  EXPECT_EQ(a.sample_modes(), (std::vector<Mode>{S, S, H, H}));
}

// Clear: every other mode's fastest call is slower than the winner's median. A close call (one of
// fused's calls below sequential's median) is not, and neither is a margin win whose runner-up
// overlaps it.
TEST(AutoModeChoice, ClearOnlyWhenNoOtherCallBeatsTheWinnersMedian) {
  const Mode S = Mode::Sequential, H = Mode::Shaped, F = Mode::Fused;
  const std::vector<Mode> modes = {S, H, F, S, H, F, S, H, F};
  const std::vector<double> apart = {10, 12, 6, 11, 13, 7, 10, 12, 8};
  EXPECT_EQ(choose_auto_mode(apart, modes), F);
  EXPECT_TRUE(auto_choice_is_clear(apart, modes, F));
  const std::vector<double> close = {10, 12, 9, 11, 13, 10.5, 10, 12, 11};
  EXPECT_EQ(choose_auto_mode(close, modes), S);  // fused's median 10.5 is not 2 % below 10
  EXPECT_FALSE(auto_choice_is_clear(close, modes, S));
  const std::vector<double> overlap = {10, 8, 7, 11, 9, 7.5, 10, 7, 9};
  EXPECT_EQ(choose_auto_mode(overlap, modes), F);  // 7.5 < 8; shaped's 7 is below it
  EXPECT_FALSE(auto_choice_is_clear(overlap, modes, F));
}

// Extends `a` for as long as it asks to, with trials that are `clear` and take `seconds` in all;
// returns how many times.
int extend_while(AutoMode& a, bool clear, double seconds) {
  int n = 0;
  for (; a.should_extend(clear, seconds); ++n)
    a.extend();
  return n;
}

// A result that is not clear adds a pass (the samples so far are kept), at most kAutoExtensions
// times; then the context settles whatever they show.
// Short trials (under the context's bound in all, here 20 ms) extend even when clear, at most
// kAutoShortExtensions times in all; long clear ones settle; unclear long ones extend twice.
TEST(AutoModeSchedule, ShortTrialsExtendUpToTheirOwnLimit) {
  AutoMode a(3, 0.02);
  EXPECT_FALSE(a.should_extend(true, 0.02));
  EXPECT_TRUE(a.should_extend(true, 0.01));
  EXPECT_TRUE(a.should_extend(false, 1.0));
  EXPECT_EQ(extend_while(a, true, 0.001), kAutoShortExtensions);
  EXPECT_FALSE(a.should_extend(false, 0.001));  // the unclear rule's two are long used
  AutoMode b(3, 0.02);
  b.extend();
  b.extend();
  EXPECT_FALSE(b.should_extend(false, 1.0));
  EXPECT_TRUE(b.should_extend(false, 0.001));
  EXPECT_FALSE(AutoMode(3).should_extend(true, 0.0));  // no bound: only the unclear rule
}

// Unclear trials go on past the two extensions while they add up to under 10x the short bound
// (here 0.2 s), up to kAutoShortExtensions in all; clear ones of that length settle.
TEST(AutoModeSchedule, UnclearTrialsOfAFewMillisecondsExtendFurther) {
  AutoMode a(3, 0.02);
  a.extend();
  a.extend();
  EXPECT_FALSE(a.can_extend());
  EXPECT_TRUE(a.should_extend(false, 0.15));
  EXPECT_FALSE(a.should_extend(true, 0.15));
  EXPECT_FALSE(a.should_extend(false, 0.25));
  EXPECT_EQ(2 + extend_while(a, false, 0.15), kAutoShortExtensions);
}

TEST(AutoModeSchedule, AnUnclearResultExtendsTheTrialsAtMostTwice) {
  AutoMode a(1);
  int last_calls = 0, extensions = 0;
  for (int call = 0; call < 20 && !a.choice(); ++call) {
    if (!a.record(1.0)) continue;
    last_calls = call + 1;
    if (a.can_extend()) {
      a.extend();
      ++extensions;
    } else {
      a.settle(Mode::Fused);
    }
  }
  EXPECT_EQ(extensions, kAutoExtensions);
  EXPECT_EQ(last_calls, 3 * 2 * (1 + kAutoExtensions));  // 3 passes of 3 blocks of 2 calls
  EXPECT_EQ(a.samples().size(), 9u);
  ASSERT_TRUE(a.choice());
}

}  // namespace
}  // namespace tilecomm::detail
