// Placement rules between streams of different priority.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

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

// The shaped mode's collective is a high-priority WG that polls MPI between messages, yielding
// (Open MPI's mpi_yield_when_idle), on a core it shares with compute (docs/runtime.md, "Workers").
// A thread that yields instead of sleeping earns no claim on the core: the OS gives it back only
// when the compute thread's time slice ends (a 4 ms tick here) unless compute gives it away. So a
// worker about to run a normal WG yields once per kYieldEveryNs while a high-priority WG is
// resident on its CU. Everything on one core (the test thread's affinity, which the workers
// inherit); 1 CU, 2 slots, compute shaped by LDS to one WG at a time: C is 600 WGs of 50 us
// (30 ms); H waits 20 times for 100 us to pass, polling with sched_yield. Given the core every
// ~300 us, H ends after ~6-10 ms of C; waiting for ticks, it would end after C.
TEST(Priority, ComputeYieldsTheCoreToAResidentHighPriorityWorkgroup) {
  cpu_set_t saved, one;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved))
    ++cpu;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  std::atomic<int> c_done{0}, c_done_when_h_ended{-1};
  {
    Device d(config(1, 2, 64 << 10));
    Stream compute = d.create_stream(Stream::kNormal);
    Stream comm = d.create_stream(Stream::kHigh);
    constexpr int kTiles = 600;
    compute.launch({"C", {kTiles, 1}, 48 << 10}, [&](const WorkgroupContext&) {
      const auto until = std::chrono::steady_clock::now() + 50us;
      while (std::chrono::steady_clock::now() < until) {
      }
      c_done.fetch_add(1);
    });
    test::wait_for([&] { return c_done.load() > 0; }, "C to start");
    comm.launch({"H", {1, 1}, 0}, [&](const WorkgroupContext&) {
      for (int i = 0; i < 20; ++i) {
        const auto until = std::chrono::steady_clock::now() + 100us;
        while (std::chrono::steady_clock::now() < until)
          sched_yield();
      }
      c_done_when_h_ended = c_done.load();
    });
    d.synchronize();
    EXPECT_EQ(c_done.load(), kTiles);
  }
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
  EXPECT_LT(c_done_when_h_ended.load(), 450)
      << "H (20 waits of 100 us, polling) ended only after " << c_done_when_h_ended.load()
      << " of C's 600 WGs of 50 us";
}

}  // namespace
}  // namespace tilecomm
