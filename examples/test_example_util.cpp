// The examples' harness: the speed-up statistic must compare modes in the same positions.
#include <gtest/gtest.h>

#include "example_util.hpp"

namespace {

// Step times that depend on the position in the step (first call after the host work 0.9 ms,
// second 0.75, third 0.6) and on the mode (fused 10 % faster), with the modes taking turns as
// examples::in_turn() orders them. Per-step ratios pair different positions (0.89, 0.93 or 1.67,
// median 0.93: "fused is slower"); over every rotation the ratio is the modes' own, 1/0.9.
TEST(ExampleUtil, SpeedupPerRotationComparesEveryPosition) {
  using tilecomm::Mode;
  const std::vector<Mode> modes{Mode::Sequential, Mode::Shaped, Mode::Fused};
  const double position_ms[] = {0.9, 0.75, 0.6};
  std::vector<double> ms[examples::kModeSlots];
  for (int step = 1; step <= 12; ++step) {  // step 0 is the warm-up, as in the examples
    const auto order = examples::in_turn(modes, step);
    for (std::size_t pos = 0; pos < order.size(); ++pos)
      ms[int(order[pos])].push_back(position_ms[pos] * (order[pos] == Mode::Fused ? 0.9 : 1.0));
  }
  const auto per_rotation = examples::rotation_speedups(ms[0], ms[int(Mode::Fused)], 3);
  ASSERT_EQ(per_rotation.size(), 4u);
  for (double r : per_rotation)
    EXPECT_NEAR(r, 1 / 0.9, 1e-12);

  // The old statistic, the median of per-step ratios, reads the opposite.
  std::vector<double> per_step;
  for (std::size_t i = 0; i < ms[0].size(); ++i)
    per_step.push_back(ms[0][i] / ms[int(Mode::Fused)][i]);
  EXPECT_LT(examples::median(per_step), 1.0);
}

TEST(ExampleUtil, SpeedupPerRotationDropsAnIncompleteRotation) {
  const std::vector<double> seq{1, 2, 3, 4, 5}, mode{1, 1, 1, 1, 1};
  EXPECT_EQ(examples::rotation_speedups(seq, mode, 2), (std::vector<double>{1.5, 3.5}));
  EXPECT_TRUE(examples::rotation_speedups(seq, mode, 6).empty());
  EXPECT_EQ(examples::rotation_speedups(seq, mode, 1).size(), 5u);
}

}  // namespace
