#include <gtest/gtest.h>
#include <atomic>
#include "tilecomm/tilecomm.hpp"
using namespace tilecomm;
TEST(Device, Smoke) {
  RuntimeConfig c; c.num_cus = 2;
  Device d(c);
  std::atomic<int> sum{0};
  d.default_stream().launch({"k", {100, 1}, 0}, [&](const WorkgroupContext& wg) { sum += int(wg.id); });
  d.synchronize();
  EXPECT_EQ(sum.load(), 4950);
}
