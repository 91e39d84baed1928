// Mode::Auto's choice rule (ops/common/auto_mode.hpp), on hand-made timings: no MPI, no device.
#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <vector>

#include "ops/common/auto_mode.hpp"

namespace tilecomm::detail {
namespace {

// Rounds of {sequential, shaped, fused} times.
std::vector<double> rounds(std::initializer_list<std::array<double, 3>> rs) {
  std::vector<double> v;
  for (const auto& r : rs)
    v.insert(v.end(), r.begin(), r.end());
  return v;
}

TEST(AutoModeChoice, FastestMedianWins) {
  EXPECT_EQ(choose_auto_mode(rounds({{10, 12, 8}, {10, 12, 8}})), Mode::Fused);
  EXPECT_EQ(choose_auto_mode(rounds({{10, 7, 8}, {10, 7, 8}})), Mode::Shaped);
  EXPECT_EQ(choose_auto_mode(rounds({{10, 12, 11}, {10, 12, 11}})), Mode::Sequential);
}

TEST(AutoModeChoice, MediansNotMeansDecide) {
  // Fused has one outlier (50) in three rounds: median 8 beats sequential's 10.
  EXPECT_EQ(choose_auto_mode(rounds({{10, 12, 8}, {10, 12, 50}, {10, 12, 8}})), Mode::Fused);
  // Sequential's outlier does not make it lose: its median stays 10.
  EXPECT_EQ(choose_auto_mode(rounds({{90, 12, 11}, {10, 12, 11}, {10, 12, 11}})), Mode::Sequential);
  // Even count: the median is the mean of the middle two (fused: 9 < 0.95 x 10).
  EXPECT_EQ(choose_auto_mode(rounds({{10, 12, 8.5}, {10, 12, 9.5}})), Mode::Fused);
}

TEST(AutoModeChoice, ANonSequentialModeMustBeatSequentialByTheMargin) {
  EXPECT_EQ(choose_auto_mode(rounds({{100, 120, 96}})), Mode::Sequential);  // 4 % faster
  EXPECT_EQ(choose_auto_mode(rounds({{100, 120, 94}})), Mode::Fused);       // 6 % faster
  // Shaped and fused both beat the margin: the lower median wins; an exact tie goes to shaped,
  // the earlier candidate.
  EXPECT_EQ(choose_auto_mode(rounds({{100, 90, 80}})), Mode::Fused);
  EXPECT_EQ(choose_auto_mode(rounds({{100, 80, 80}})), Mode::Shaped);
}

TEST(AutoModeSchedule, WarmUpRoundThenMeasuredRoundsThenSettled) {
  AutoMode a(2);
  const Mode order[] = {Mode::Sequential, Mode::Shaped, Mode::Fused};
  for (int call = 0; call < 9; ++call) {
    EXPECT_EQ(a.next(), order[call % 3]) << "call " << call;
    EXPECT_EQ(a.record(1.0 + call), call == 8) << "call " << call;
  }
  // The warm-up round (calls 0-2) is not a sample.
  EXPECT_EQ(a.samples(), (std::vector<double>{4, 5, 6, 7, 8, 9}));
  EXPECT_FALSE(a.choice());
  a.settle(Mode::Shaped);
  for (int call = 0; call < 5; ++call) {
    EXPECT_EQ(a.next(), Mode::Shaped);
    EXPECT_FALSE(a.record(1.0));
  }
  EXPECT_EQ(a.samples().size(), 6u);
}

}  // namespace
}  // namespace tilecomm::detail
