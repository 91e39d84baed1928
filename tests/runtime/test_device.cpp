// Device construction, occupancy under the LDS limit, the LDS memory a WG gets, launch validation.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "helpers.hpp"
#include "runtime/device_impl.hpp"

namespace tilecomm {
namespace {

using namespace std::chrono_literals;
using test::config;

TEST(Device, ReportsItsShape) {
  Device d(config(3, 2, 32 << 10));
  EXPECT_EQ(d.num_cus(), 3);
  EXPECT_EQ(d.wg_slots_per_cu(), 2);
  EXPECT_EQ(d.lds_bytes_per_cu(), std::size_t{32} << 10);
  EXPECT_FALSE(d.pinned());
  EXPECT_EQ(d.default_stream().priority(), Stream::kNormal);
}

TEST(Device, PinsOnlyWhenCusCoverTheMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  RuntimeConfig c = config(CPU_COUNT(&set), 1);
  c.pin_threads = true;
  EXPECT_TRUE(Device(c).pinned());
  if (CPU_COUNT(&set) > 1) {
    // Two ranks on an unbound 2-core mask asking for 1 CU each must not both land on core 0.
    c.num_cus = CPU_COUNT(&set) - 1;
    EXPECT_FALSE(Device(c).pinned());
  }
  c.num_cus = CPU_COUNT(&set);
  c.pin_threads = false;
  EXPECT_FALSE(Device(c).pinned());
}

TEST(Device, ZeroCusMeansCoresInMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  Device d(config(0, 1));
  EXPECT_EQ(d.num_cus(), CPU_COUNT(&set));
  EXPECT_EQ(d.config().num_cus, CPU_COUNT(&set));
}

// The default CU count shares the node's cores among ranks whose masks overlap (mpirun without
// binding), and keeps every core of a mask that cannot overlap (ranks bound to their own cores).
TEST(Device, DefaultCusShareOverlappingMasks) {
  using detail::default_cus;
  EXPECT_EQ(default_cus(2, 2, 1), 2);    // one rank: the whole mask
  EXPECT_EQ(default_cus(2, 2, 2), 1);    // np 2 unbound on 2 cores: one core each
  EXPECT_EQ(default_cus(2, 2, 4), 1);    // oversubscribed: never zero
  EXPECT_EQ(default_cus(1, 2, 2), 1);    // bound to a core each
  EXPECT_EQ(default_cus(8, 16, 2), 8);   // bound to a socket each: no overlap
  EXPECT_EQ(default_cus(16, 16, 4), 4);  // unbound, 4 ranks on 16 cores
  EXPECT_EQ(default_cus(4, 16, 8), 2);   // masks of 4 overlapping among 8 ranks on 16 cores
  EXPECT_EQ(default_cus(0, 2, 1), 0);    // empty mask: the caller raises
}

TEST(Device, ZeroCusWithNodeRanksTakesAShare) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int mask = CPU_COUNT(&set), online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  RuntimeConfig c = config(0, 1);
  c.node_ranks = 2 * online;  // more ranks than cores: the masks must overlap
  Device d(c);
  EXPECT_EQ(d.num_cus(), 1);
  EXPECT_EQ(d.config().num_cus, detail::default_cus(mask, online, 2 * online));
  c.node_ranks = 0;
  try {
    Device bad(c);
    ADD_FAILURE() << "node_ranks = 0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("node_ranks = 0"), std::string::npos) << e.what();
  }
}

// Device threads sleep what they ask for: a 1 us timer slack, not Linux's default 50 us, which
// turned every short sleep of a backing-off wait into 55-80 us.
TEST(Device, WorkersHavePreciseTimerSlack) {
  Device d(config(2, 2));
  std::vector<long> slack(8, -1);
  d.default_stream().launch({"slack", {8, 1}, 0}, [&](const WorkgroupContext& wg) {
    slack[wg.id] = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  });
  d.default_stream().synchronize();
  for (long s : slack)
    EXPECT_EQ(s, static_cast<long>(detail::kWorkerTimerSlackNs));
}

TEST(Device, RunsEveryWorkgroupOnceWithItsPosition) {
  Device d(config(2, 2));
  const Dim2 grid{7, 5};
  std::vector<std::atomic<int>> seen(grid.x * grid.y);
  std::atomic<int> bad{0};
  d.default_stream().launch({"grid", grid, 0}, [&](const WorkgroupContext& wg) {
    if (wg.id != wg.y * grid.x + wg.x || wg.grid.x != grid.x || wg.grid.y != grid.y) ++bad;
    if (wg.cu < 0 || wg.cu >= 2 || wg.slot < 0 || wg.slot >= 2 || !wg.lds.empty()) ++bad;
    if (wg.device != &d) ++bad;
    seen[wg.id].fetch_add(1);
  });
  d.synchronize();
  EXPECT_EQ(bad.load(), 0);
  for (std::size_t i = 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i].load(), 1) << "WG " << i;
  const DeviceStats st = d.stats();
  EXPECT_EQ(st.kernels, 1u);
  EXPECT_EQ(st.workgroups, grid.x * grid.y);
}

// 64 KiB per CU and 48 KiB per WG: only one WG fits, whatever the slot count.
TEST(Occupancy, LargeLdsRequestAllowsOneResidentWgPerCu) {
  constexpr int kCus = 2;
  Device d(config(kCus, 4, 64 << 10));
  test::ResidencyProbe probe(kCus);
  d.default_stream().launch({"big-lds", {16, 1}, 48 << 10}, [&](const WorkgroupContext& wg) {
    probe.enter(wg.cu);
    std::this_thread::sleep_for(2ms);  // give a wrongly placed second WG time to show up
    probe.leave(wg.cu);
  });
  d.synchronize();
  const DeviceStats st = d.stats();
  for (int c = 0; c < kCus; ++c) {
    EXPECT_EQ(probe.max(c), 1) << "CU " << c;
    EXPECT_EQ(st.max_resident[c], 1) << "CU " << c;
    EXPECT_EQ(st.max_lds_in_use[c], std::size_t{48} << 10) << "CU " << c;
  }
}

// 16 KiB per WG and 4 slots: four WGs are resident at once (they rendezvous, which would time out
// if the scheduler held any of them back), never more.
TEST(Occupancy, SmallLdsRequestFillsEverySlot) {
  Device d(config(1, 4, 64 << 10));
  test::ResidencyProbe probe(1);
  test::Rendezvous all(4);
  d.default_stream().launch({"small-lds", {4, 1}, 16 << 10}, [&](const WorkgroupContext& wg) {
    probe.enter(wg.cu);
    all.arrive_and_wait();
    probe.leave(wg.cu);
  });
  d.synchronize();
  EXPECT_EQ(probe.max(0), 4);
  const DeviceStats st = d.stats();
  EXPECT_EQ(st.max_resident[0], 4);
  EXPECT_EQ(st.max_lds_in_use[0], std::size_t{64} << 10);
}

TEST(Occupancy, ThirtyTwoKibAllowsTwoOfFourSlots) {
  Device d(config(1, 4, 64 << 10));
  test::ResidencyProbe probe(1);
  d.default_stream().launch({"half-lds", {12, 1}, 32 << 10}, [&](const WorkgroupContext& wg) {
    probe.enter(wg.cu);
    std::this_thread::sleep_for(1ms);
    probe.leave(wg.cu);
  });
  d.synchronize();
  EXPECT_LE(probe.max(0), 2);
  EXPECT_EQ(d.stats().max_resident[0], probe.max(0));
}

TEST(Occupancy, ResetStatsStartsAfresh) {
  Device d(config(1, 2, 64 << 10));
  d.default_stream().launch({"a", {4, 1}, 8 << 10}, [](const WorkgroupContext&) {});
  d.synchronize();
  d.reset_stats();
  DeviceStats st = d.stats();
  EXPECT_EQ(st.kernels, 0u);
  EXPECT_EQ(st.workgroups, 0u);
  EXPECT_EQ(st.max_resident[0], 0);
  EXPECT_EQ(st.max_lds_in_use[0], 0u);
}

// Co-resident WGs get real, disjoint, 64-byte aligned LDS of the requested size. 100 bytes is
// deliberately not a multiple of 64.
TEST(Lds, SpansAreRealAlignedAndDisjoint) {
  for (std::size_t bytes : {std::size_t{100}, std::size_t{16} << 10}) {
    SCOPED_TRACE(bytes);
    Device d(config(1, 4, 64 << 10));
    test::Rendezvous written(4), checked(4);
    std::mutex mu;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
    std::atomic<int> bad_size{0}, bad_align{0}, clobbered{0};
    d.default_stream().launch({"lds", {4, 1}, bytes}, [&](const WorkgroupContext& wg) {
      if (wg.lds.size() != bytes) ++bad_size;
      if (reinterpret_cast<std::uintptr_t>(wg.lds.data()) % 64 != 0) ++bad_align;
      const auto pattern = static_cast<std::byte>(0xA0 + wg.id);
      std::fill(wg.lds.begin(), wg.lds.end(), pattern);
      {
        std::lock_guard lock(mu);
        auto b = reinterpret_cast<std::uintptr_t>(wg.lds.data());
        ranges.emplace_back(b, b + wg.lds.size());
      }
      written.arrive_and_wait();  // every WG has written before anyone checks
      for (std::byte x : wg.lds)
        if (x != pattern) {
          ++clobbered;
          break;
        }
      checked.arrive_and_wait();
    });
    d.synchronize();
    EXPECT_EQ(bad_size.load(), 0);
    EXPECT_EQ(bad_align.load(), 0);
    EXPECT_EQ(clobbered.load(), 0);
    ASSERT_EQ(ranges.size(), 4u);
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  }
}

TEST(Lds, OddSizesStillPackIntoTheCapacity) {
  // 4 x 16000 bytes, each at a 64-byte aligned offset, must still fit 4 at once in 64 KiB.
  Device d(config(1, 4, 64 << 10));
  test::Rendezvous all(4);
  d.default_stream().launch({"odd", {4, 1}, 16000},
                            [&](const WorkgroupContext&) { all.arrive_and_wait(); });
  d.synchronize();
  EXPECT_EQ(d.stats().max_resident[0], 4);
}

// ------------------------------------------------------------------ bad parameters

template <class F>
void expect_invalid(F&& f, std::initializer_list<const char*> needles) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    for (const char* n : needles)
      EXPECT_NE(e.message().find(n), std::string::npos) << e.what();
  }
}

TEST(LaunchValidation, RejectsBadParametersNamingThem) {
  Device d(config(1, 1, 64 << 10));
  Stream& s = d.default_stream();
  auto nop = [](const WorkgroupContext&) {};
  expect_invalid(
      [&] {
        s.launch({"k", {1, 1}, (64 << 10) + 1}, nop);
      },
      {"lds_bytes", "65537", "65536"});
  expect_invalid([&] { s.launch({"k", {0, 1}, 0}, nop); }, {"grid", "0x1"});
  expect_invalid([&] { s.launch({"k", {3, 0}, 0}, nop); }, {"grid", "3x0"});
  expect_invalid(
      [&] {
        s.launch({"k", {std::size_t{1} << 20, std::size_t{1} << 20}, 0}, nop);
      },
      {"grid", "1048576x1048576"});
  expect_invalid([&] { s.launch({"k", {1, 1}, 0}, KernelFn{}); }, {"fn"});
  expect_invalid(
      [&] {
        s.launch_persistent({"p", 1, 1 << 20}, {0}, [](auto&, std::size_t) {});
      },
      {"lds_bytes", "1048576"});
  expect_invalid([&] { s.launch_persistent({"p", 1, 0}, {0}, TaskFn{}); }, {"fn"});
  // Nothing was enqueued: the device is idle and still works.
  std::atomic<int> ran{0};
  s.launch({"ok", {2, 1}, 0}, [&](const WorkgroupContext&) { ++ran; });
  d.synchronize();
  EXPECT_EQ(ran.load(), 2);
}

TEST(DeviceValidation, RejectsBadConfigNamingTheField) {
  expect_invalid([] { Device d(config(-1, 1)); }, {"num_cus", "-1"});
  expect_invalid([] { Device d(config(1, 0)); }, {"wg_slots_per_cu", "0"});
  RuntimeConfig c = config(1, 1);
  c.spin_us = -3;
  expect_invalid([&] { Device d(c); }, {"spin_us", "-3"});
}

}  // namespace
}  // namespace tilecomm
