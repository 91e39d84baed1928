// An idle device, and a host waiting on a long kernel, burn (almost) no CPU.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using namespace std::chrono_literals;
using test::config;

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

TEST(Idle, IdleDeviceBurnsNoCpu) {
  Device d(config(2, 2));  // four worker threads
  std::atomic<int> n{0};
  d.default_stream().launch({"k", {64, 1}, 0}, [&](const WorkgroupContext&) { ++n; });
  d.synchronize();
  EXPECT_EQ(n.load(), 64);
  std::this_thread::sleep_for(5ms);  // well past the 50 us spin phase
  const double cpu0 = process_cpu_s();
  std::this_thread::sleep_for(200ms);
  const double used = process_cpu_s() - cpu0;
  EXPECT_LT(used, 0.030) << "CPU seconds used by an idle device in 200 ms";
}

TEST(Idle, HostWaitingOnALongKernelSleeps) {
  Device d(config(1, 1));
  d.default_stream().launch({"sleepy", {1, 1}, 0},
                            [](const WorkgroupContext&) { std::this_thread::sleep_for(200ms); });
  const double cpu0 = process_cpu_s();
  d.synchronize();
  EXPECT_LT(process_cpu_s() - cpu0, 0.030) << "CPU seconds used by synchronize() in 200 ms";
}

}  // namespace
}  // namespace tilecomm
