// Stream order, concurrency between streams, events and stream waits.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using namespace std::chrono_literals;
using test::config;

// Kernels on one stream never overlap and run in issue order: every WG of kernel i ends before
// any WG of kernel i+1 starts, on a device with room for both.
TEST(Streams, KernelsOnOneStreamRunInOrderWithoutOverlap) {
  Device d(config(2, 2));
  constexpr int kKernels = 6, kWgs = 5;
  std::atomic<int> clock{0};
  std::vector<std::atomic<int>> first_start(kKernels), last_end(kKernels);
  for (auto& x : first_start)
    x = 1 << 30;
  for (auto& x : last_end)
    x = -1;
  Stream s = d.create_stream();
  for (int k = 0; k < kKernels; ++k) {
    std::string name = "k";  // appended: GCC 12's -Wrestrict misfires on "k" + std::to_string(k)
    name += std::to_string(k);
    s.launch({name, {kWgs, 1}, 0}, [&, k](const WorkgroupContext&) {
      int t0 = clock.fetch_add(1);
      for (int m = first_start[k].load(); t0 < m && !first_start[k].compare_exchange_weak(m, t0);) {
      }
      std::this_thread::sleep_for(200us);
      int t1 = clock.fetch_add(1);
      for (int m = last_end[k].load(); t1 > m && !last_end[k].compare_exchange_weak(m, t1);) {
      }
    });
  }
  s.synchronize();
  for (int k = 0; k + 1 < kKernels; ++k)
    EXPECT_LT(last_end[k].load(), first_start[k + 1].load())
        << "kernel " << k << " overlaps " << k + 1;
  EXPECT_EQ(clock.load(), 2 * kKernels * kWgs);
}

// Kernels on different streams run at the same time: two single-WG kernels rendezvous, which
// times out if the device serialised them.
TEST(Streams, DifferentStreamsRunConcurrently) {
  Device d(config(1, 2));
  Stream a = d.create_stream(), b = d.create_stream();
  EXPECT_NE(a.id(), b.id());
  test::Rendezvous both(2);
  a.launch({"a", {1, 1}, 0}, [&](const WorkgroupContext&) { both.arrive_and_wait(); });
  b.launch({"b", {1, 1}, 0}, [&](const WorkgroupContext&) { both.arrive_and_wait(); });
  EXPECT_NO_THROW(d.synchronize());
}

TEST(Events, DefaultEventIsComplete) {
  Event e;
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(e.synchronize());
}

TEST(Events, RecordQuerySynchronize) {
  Device d(config(1, 1));
  Stream s = d.create_stream();
  test::Gate gate;
  std::atomic<bool> ran{false};
  s.launch({"blocked", {1, 1}, 0}, [&](const WorkgroupContext&) {
    gate.wait();
    ran = true;
  });
  Event e = s.record();
  std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(e.query());
  Event copy = e;  // shared handle
  gate.open();
  copy.synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(e.query());
  // An event recorded on an idle stream completes at once.
  Event idle = s.record();
  idle.synchronize();
  EXPECT_TRUE(idle.query());
}

// stream.wait(event): B's kernel on stream 2 starts only after A's kernel on stream 1, although
// the device has a free slot for it.
TEST(Events, StreamWaitOrdersAcrossStreams) {
  Device d(config(1, 2));
  Stream s1 = d.create_stream(), s2 = d.create_stream(Stream::kHigh);
  test::Gate gate;
  std::atomic<bool> a_done{false}, b_started{false}, b_saw_a{false};
  s1.launch({"A", {1, 1}, 0}, [&](const WorkgroupContext&) {
    gate.wait();
    a_done = true;
  });
  Event e = s1.record();
  s2.wait(e);
  s2.launch({"B", {1, 1}, 0}, [&](const WorkgroupContext&) {
    b_started = true;
    b_saw_a = a_done.load();
  });
  Event after_b = s2.record();
  std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(b_started.load());
  EXPECT_FALSE(after_b.query());
  gate.open();
  after_b.synchronize();
  EXPECT_TRUE(b_saw_a.load());
  s2.wait(Event{});  // a default event does not block
  s2.synchronize();
}

TEST(Events, WaitOnAnotherDevicesEventIsRejected) {
  Device d1(config(1, 1)), d2(config(1, 1));
  Event e = d1.default_stream().record();
  try {
    d2.default_stream().wait(e);
    ADD_FAILURE() << "no exception";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::InvalidArgument);
  }
}

TEST(Streams, ManyStreamsAndKernelsAllComplete) {
  Device d(config(2, 2));
  std::vector<Stream> streams;
  for (int i = 0; i < 5; ++i)
    streams.push_back(d.create_stream(i % 2));
  std::atomic<int> sum{0};
  for (int r = 0; r < 20; ++r)
    for (auto& s : streams)
      s.launch({"k", {3, 1}, std::size_t(r % 4) << 12},
               [&](const WorkgroupContext& wg) { sum += int(wg.id) + 1; });
  d.synchronize();
  EXPECT_EQ(sum.load(), 20 * 5 * 6);
  EXPECT_EQ(d.stats().kernels, 100u);
}

}  // namespace
}  // namespace tilecomm
