// Placement rules between streams of different priority.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using namespace std::chrono_literals;
using test::config;

class OrderLog {
 public:
  /// Logs "<kernel><wg>", e.g. "H0". (Built by appending: GCC 12's -Wrestrict misfires on
  /// "H" + std::to_string(wg).)
  void add(char kernel, std::size_t wg) {
    std::string s(1, kernel);
    s += std::to_string(wg);
    std::lock_guard lock(mu_);
    log_.push_back(std::move(s));
  }
  std::vector<std::string> get() const {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> log_;
};

// 1 CU, 1 slot. L0 holds the slot until the host opens the gate; L1..L3 queue behind it. A
// high-priority kernel launched meanwhile takes the slot as soon as it frees, before L1.
TEST(Priority, HighKernelOvertakesQueuedLowWorkgroups) {
  Device d(config(1, 1));
  Stream low = d.create_stream(Stream::kNormal);
  Stream high = d.create_stream(Stream::kHigh);
  EXPECT_EQ(high.priority(), Stream::kHigh);
  test::Gate gate;
  std::atomic<bool> l0_started{false};
  OrderLog log;
  low.launch({"low", {4, 1}, 0}, [&](const WorkgroupContext& wg) {
    log.add('L', wg.id);
    if (wg.id == 0) {
      l0_started = true;
      gate.wait();
    }
  });
  test::wait_for([&] { return l0_started.load(); }, "L0 to start");
  high.launch({"high", {3, 1}, 0}, [&](const WorkgroupContext& wg) { log.add('H', wg.id); });
  gate.open();
  d.synchronize();
  const std::vector<std::string> want{"L0", "H0", "H1", "H2", "L1", "L2", "L3"};
  EXPECT_EQ(log.get(), want);
}

// Equal priorities: the kernel launched first is served first.
TEST(Priority, EqualPrioritiesGoInLaunchOrder) {
  Device d(config(1, 1));
  Stream a = d.create_stream(), b = d.create_stream();
  test::Gate gate;
  std::atomic<bool> started{false};
  OrderLog log;
  d.default_stream().launch({"block", {1, 1}, 0}, [&](const WorkgroupContext&) {
    started = true;
    gate.wait();
  });
  test::wait_for([&] { return started.load(); }, "the blocker to start");
  b.launch({"b", {2, 1}, 0}, [&](const WorkgroupContext& wg) { log.add('B', wg.id); });
  a.launch({"a", {2, 1}, 0}, [&](const WorkgroupContext& wg) { log.add('A', wg.id); });
  gate.open();
  d.synchronize();
  const std::vector<std::string> want{"B0", "B1", "A0", "A1"};
  EXPECT_EQ(log.get(), want);
}

// The rule observed (and documented in docs/runtime.md): a slot goes to the highest-priority
// kernel whose next WG *fits the free LDS*; there is no reservation, so a lower-priority WG that
// fits runs ahead of a high-priority WG that does not ("backfill").
// 1 CU, 2 slots, 64 KiB: A (low, 40 KiB) holds 40 KiB; H (high, 32 KiB) cannot fit the 24 KiB
// left; B (low, 16 KiB) fits and runs to completion while H waits; H runs once A is gone.
TEST(Priority, LowerPriorityWorkgroupThatFitsRunsAheadOfOneThatDoesNot) {
  Device d(config(1, 2, 64 << 10));
  Stream s_a = d.create_stream(Stream::kNormal);
  Stream s_b = d.create_stream(Stream::kNormal);
  Stream s_h = d.create_stream(Stream::kHigh);
  test::Gate gate;
  std::atomic<bool> a_started{false}, b_done{false}, h_started{false};
  std::atomic<bool> h_saw_b_done{false};
  s_a.launch({"A", {1, 1}, 40 << 10}, [&](const WorkgroupContext&) {
    a_started = true;
    gate.wait();
  });
  test::wait_for([&] { return a_started.load(); }, "A to start");
  s_h.launch({"H", {1, 1}, 32 << 10}, [&](const WorkgroupContext&) {
    h_started = true;
    h_saw_b_done = b_done.load();
  });
  s_b.launch({"B", {1, 1}, 16 << 10}, [&](const WorkgroupContext&) { b_done = true; });
  s_b.synchronize();  // B completes although A still holds its LDS and H is queued
  EXPECT_TRUE(b_done.load());
  EXPECT_FALSE(h_started.load());
  gate.open();
  d.synchronize();
  EXPECT_TRUE(h_started.load());
  EXPECT_TRUE(h_saw_b_done.load());
}

// The shaped mode's hand-over (docs/runtime.md): a worker that has run a long compute WG without
// sleeping (past kNearSliceEndNs, near the end of its OS time slice) does not take the
// high-priority WG its finish releases: a sleeping worker of the CU does, which the OS runs on
// waking, and the running one takes the next normal WG. 1 CU, 2 slots, the compute WGs shaped by
// LDS to one at a time (48 of 64 KiB each): C0 runs 3 ms, then the collective H (waiting on C0's
// event) and C1 become ready together.
TEST(Priority, LongRunningWorkerHandsTheHighPriorityWorkgroupToASleepingOne) {
  Device d(config(1, 2, 64 << 10));
  Stream compute = d.create_stream(Stream::kNormal);
  Stream comm = d.create_stream(Stream::kHigh);
  std::atomic<int> c0_slot{-1}, c1_slot{-1}, h_slot{-1};
  compute.launch({"C0", {1, 1}, 48 << 10}, [&](const WorkgroupContext& wg) {
    c0_slot = wg.slot;
    const auto until = std::chrono::steady_clock::now() + 3ms;
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  comm.wait(compute.record());
  comm.launch({"H", {1, 1}, 0}, [&](const WorkgroupContext& wg) { h_slot = wg.slot; });
  compute.launch({"C1", {1, 1}, 48 << 10}, [&](const WorkgroupContext& wg) { c1_slot = wg.slot; });
  d.synchronize();
  EXPECT_NE(h_slot.load(), c0_slot.load()) << "the worker that ran C0 for 3 ms kept H";
  EXPECT_EQ(c1_slot.load(), c0_slot.load());
}

}  // namespace
}  // namespace tilecomm
