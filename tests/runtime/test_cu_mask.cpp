// Streams restricted to a subset of CUs (Device::create_stream with a CU mask, as HIP's
// hipExtStreamCreateWithCUMask): placement, persistent kernels, partitioning against other
// streams, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using test::config;

std::set<int> cus_used(Stream& s, std::size_t wgs) {
  std::mutex mu;
  std::set<int> used;
  s.launch({"probe", {wgs, 1}, 0}, [&](const WorkgroupContext& wg) {
    std::lock_guard lock(mu);
    used.insert(wg.cu);
  });
  s.synchronize();
  return used;
}

TEST(CuMask, KernelsRunOnlyOnTheMasksCus) {
  Device d(config(4, 2));
  const int mask[] = {3, 1, 1};  // unordered, with a duplicate
  Stream s = d.create_stream(Stream::kNormal, mask);
  EXPECT_EQ(s.cu_mask(), (std::vector<int>{1, 3}));
  EXPECT_EQ(cus_used(s, 64), (std::set<int>{1, 3}));
  Stream all = d.create_stream(Stream::kNormal);
  EXPECT_EQ(all.cu_mask(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d.default_stream().cu_mask().size(), 4u);
}

// The WGs of a masked stream wait for their CUs even while the other CUs are idle.
TEST(CuMask, WorkgroupsWaitForTheirCusWhileOthersIdle) {
  Device d(config(2, 1));
  const int only0[] = {0};
  Stream s = d.create_stream(Stream::kNormal, only0);
  std::atomic<int> running{0}, most{0};
  s.launch({"serial", {6, 1}, 0}, [&](const WorkgroupContext& wg) {
    EXPECT_EQ(wg.cu, 0);
    const int now = ++running;
    int m = most.load();
    while (now > m && !most.compare_exchange_weak(m, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running;
  });
  s.synchronize();
  EXPECT_EQ(most.load(), 1);  // one slot on CU 0: never two at once
}

// Disjoint masks partition the device: a high-priority stream confined to CU 0 never takes a
// slot on CU 1, and the compute stream confined to CU 1 never waits for CU 0's long WG.
TEST(CuMask, DisjointMasksPartitionTheDevice) {
  Device d(config(2, 1));
  const int comm_cus[] = {0}, compute_cus[] = {1};
  Stream comm = d.create_stream(Stream::kHigh, comm_cus);
  Stream compute = d.create_stream(Stream::kNormal, compute_cus);
  test::Gate gate;
  std::atomic<bool> comm_started{false};
  comm.launch({"comm", {1, 1}, 0}, [&](const WorkgroupContext& wg) {
    EXPECT_EQ(wg.cu, 0);
    comm_started = true;
    gate.wait();  // holds CU 0 until the compute kernel has finished on CU 1
  });
  test::wait_for([&] { return comm_started.load(); }, "the comm WG to start");
  std::atomic<int> done{0};
  compute.launch({"compute", {8, 1}, 0}, [&](const WorkgroupContext& wg) {
    EXPECT_EQ(wg.cu, 1);
    ++done;
  });
  compute.synchronize();  // would deadlock here if compute needed CU 0
  EXPECT_EQ(done.load(), 8);
  gate.open();
  comm.synchronize();
}

TEST(CuMask, PersistentKernelDefaultsToOneWgPerMaskedCu) {
  Device d(config(4, 1));
  const int mask[] = {0, 2};
  Stream s = d.create_stream(Stream::kNormal, mask);
  std::mutex mu;
  std::set<std::size_t> wgs;
  std::set<int> cus;
  std::vector<std::size_t> order(20);
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::atomic<int> tasks{0};
  s.launch_persistent({"persist", 0, 0}, order, [&](const WorkgroupContext& wg, std::size_t) {
    std::lock_guard lock(mu);
    wgs.insert(wg.id);
    cus.insert(wg.cu);
    ++tasks;
  });
  s.synchronize();
  EXPECT_EQ(tasks.load(), 20);
  EXPECT_LE(wgs.size(), 2u);
  EXPECT_TRUE(std::includes(std::set<int>{0, 2}.begin(), std::set<int>{0, 2}.end(), cus.begin(),
                            cus.end()));
}

TEST(CuMask, ACuOutsideTheDeviceIsNamed) {
  Device d(config(2, 1));
  for (int bad : {2, -1}) {
    const int mask[] = {0, bad};
    try {
      d.create_stream(Stream::kNormal, mask);
      FAIL() << "no error for CU " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("cu_mask names CU " + std::to_string(bad)),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tilecomm
