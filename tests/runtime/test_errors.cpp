// Exceptions thrown by workgroups: captured, cancelling, rethrown where the host waits.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using test::config;

std::string caught(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// 1 CU, 1 slot: WG 3 throws, WGs 4..99 are never dispatched, the device stays usable.
TEST(Errors, ThrowCancelsTheRestOfTheKernelAndIsRethrownOnce) {
  Device d(config(1, 1));
  std::atomic<int> ran{0};
  d.default_stream().launch({"boom", {100, 1}, 0}, [&](const WorkgroupContext& wg) {
    ++ran;
    if (wg.id == 3) throw std::runtime_error("boom at 3");
  });
  EXPECT_EQ(caught([&] { d.synchronize(); }), "boom at 3");
  EXPECT_EQ(ran.load(), 4);
  EXPECT_NO_THROW(d.synchronize());  // reported once
  std::atomic<int> after{0};
  d.default_stream().launch({"after", {10, 1}, 0}, [&](const WorkgroupContext&) { ++after; });
  d.synchronize();
  EXPECT_EQ(after.load(), 10);
  EXPECT_EQ(d.stats().kernels, 2u);
}

// Cancellation stops dispatch once the error is recorded; WGs already placed still run. The other
// WGs take 1 ms each, so without cancellation the kernel would run all 1000 (about 330 ms on 3
// slots); the first throw of a process can take a while (unwinder set-up), hence the loose bound.
TEST(Errors, CancellationStopsDispatchingTheKernel) {
  Device d(config(2, 2));
  std::atomic<int> ran{0};
  d.default_stream().launch({"boom", {1000, 1}, 0}, [&](const WorkgroupContext& wg) {
    ++ran;
    if (wg.id == 0) throw std::runtime_error("first WG");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_EQ(caught([&] { d.synchronize(); }), "first WG");
  EXPECT_LT(ran.load(), 500);
}

// The first error wins: B (ordered after A through an event) also throws, but A's is reported.
TEST(Errors, FirstErrorWins) {
  Device d(config(1, 2));
  Stream s1 = d.create_stream(), s2 = d.create_stream();
  s1.launch({"A", {1, 1}, 0}, [](const WorkgroupContext&) { throw std::runtime_error("first"); });
  s2.wait(s1.record());
  s2.launch({"B", {1, 1}, 0}, [](const WorkgroupContext&) { throw std::runtime_error("second"); });
  EXPECT_EQ(caught([&] { d.synchronize(); }), "first");
  EXPECT_NO_THROW(d.synchronize());
}

TEST(Errors, StreamSynchronizeRethrows) {
  Device d(config(1, 2));
  Stream s = d.create_stream();
  s.launch({"k", {4, 1}, 0}, [](const WorkgroupContext& wg) {
    if (wg.id == 2) throw Error(ErrorCode::Internal, "wg 2 failed");
  });
  try {
    s.synchronize();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal);
    EXPECT_EQ(e.message(), "wg 2 failed");
  }
}

TEST(Errors, EventSynchronizeRethrows) {
  Device d(config(1, 1));
  Stream s = d.create_stream();
  s.launch({"k", {2, 1}, 0}, [](const WorkgroupContext&) { throw std::runtime_error("in event"); });
  Event e = s.record();
  EXPECT_EQ(caught([&] { e.synchronize(); }), "in event");
  EXPECT_TRUE(e.query());
}

TEST(Errors, PersistentKernelTaskThrows) {
  Device d(config(1, 2));
  std::atomic<int> ran{0};
  d.default_stream().launch_persistent({"p", 1, 0}, {0, 1, 2, 3},
                                       [&](const WorkgroupContext&, std::size_t t) {
                                         ++ran;
                                         if (t == 1) throw std::runtime_error("task 1");
                                       });
  EXPECT_EQ(caught([&] { d.synchronize(); }), "task 1");
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace tilecomm
