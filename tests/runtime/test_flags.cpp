// TileFlags (release/acquire handoff, epochs, timeouts, borrowed memory) and wait_until/Backoff.
#include <sys/prctl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using test::config;

// Producer WGs write a tile, then signal it with the epoch; consumer threads wait with acquire and
// check every element. Three epochs reuse the same flags without a reset.
TEST(TileFlags, HandoffUnderContention) {
  constexpr std::size_t kTiles = 64, kTileInts = 256, kConsumers = 3;
  Device d(config(2, 2));
  TileFlags flags(kTiles);
  std::vector<std::uint64_t> data(kTiles * kTileInts);
  auto value = [](std::size_t tile, std::size_t j, std::uint32_t epoch) {
    return (std::uint64_t(epoch) << 40) ^ (tile * 1000003u + j);
  };
  for (std::uint32_t epoch = 1; epoch <= 3; ++epoch) {
    std::atomic<std::size_t> wrong{0};
    std::vector<std::thread> consumers;
    for (std::size_t c = 0; c < kConsumers; ++c)
      consumers.emplace_back([&, c] {
        for (std::size_t k = 0; k < kTiles; ++k) {
          std::size_t tile =
              (k * 7 + c * 13) % kTiles;  // consumers visit tiles in different orders
          flags.wait(tile, epoch, test::kDeadlineS, "tile");
          for (std::size_t j = 0; j < kTileInts; ++j)
            if (data[tile * kTileInts + j] != value(tile, j, epoch)) ++wrong;
        }
      });
    d.default_stream().launch({"produce", {kTiles, 1}, 0}, [&](const WorkgroupContext& wg) {
      for (std::size_t j = 0; j < kTileInts; ++j)
        data[wg.id * kTileInts + j] = value(wg.id, j, epoch);
      flags.signal(wg.id, epoch);
    });
    for (auto& t : consumers)
      t.join();
    d.synchronize();
    EXPECT_EQ(wrong.load(), 0u) << "epoch " << epoch;
  }
}

// Many threads add to one counting flag; a waiter for the total sees every contribution.
TEST(TileFlags, CountingAddUnderContention) {
  constexpr int kThreads = 8, kAdds = 2000;
  TileFlags flags(2);
  std::vector<std::uint32_t> contributed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) {
        contributed[t] = std::uint32_t(i + 1);  // published by the release in add()
        flags.add(1);
      }
    });
  flags.wait(1, kThreads * kAdds, test::kDeadlineS, "counter");
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(contributed[t], std::uint32_t(kAdds));
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(flags.load(1), std::uint32_t(kThreads * kAdds));
  EXPECT_EQ(flags.load(0), 0u);
}

TEST(TileFlags, EpochComparisonWrapsAround) {
  TileFlags flags(1);
  flags.signal(0, 0xFFFFFFFFu);
  EXPECT_TRUE(flags.test(0, 0xFFFFFFFEu));
  EXPECT_TRUE(flags.test(0, 0xFFFFFFFFu));
  EXPECT_FALSE(flags.test(0, 0u));  // epoch 0 after the wrap is later
  flags.signal(0, 2u);              // two epochs after the wrap
  EXPECT_TRUE(flags.test(0, 0xFFFFFFFFu));
  EXPECT_TRUE(flags.test(0, 0u));
  EXPECT_TRUE(flags.test(0, 2u));
  EXPECT_FALSE(flags.test(0, 3u));
  EXPECT_NO_THROW(flags.wait(0, 0xFFFFFFF0u, 0.01));
  EXPECT_EQ(flags.add(0, 0xFFFFFFFEu), 0u);  // counting wraps as well
}

TEST(TileFlags, WaitTimeoutThrowsNamingTheFlag) {
  TileFlags flags(4);
  flags.signal(3, 5);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    flags.wait(3, 6, 0.05, "gemv tile");
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(e.message().find("gemv tile 3"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("did not reach 6"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("holds 5"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("0.05 s"), std::string::npos) << e.what();  // not "0 s"
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 2.0);
  try {
    flags.wait(4, 1, 0.01);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
}

TEST(TileFlags, BorrowedMemory) {
  alignas(64) std::uint32_t memory[4 * 4] = {};
  ASSERT_EQ(TileFlags::bytes_for(4, 4), sizeof(memory));
  TileFlags flags(memory, 4, 4);
  EXPECT_EQ(flags.size(), 4u);
  flags.signal(2, 7);
  EXPECT_EQ(memory[8], 7u);  // flag i lives at i * stride
  memory[12] = 9;            // another process's store is visible
  EXPECT_TRUE(flags.test(3, 9));
  flags.reset(1);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(memory[i * 4], 1u);
  EXPECT_EQ(memory[1], 0u);  // padding untouched

  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  EXPECT_EQ(code_of([&] { TileFlags f(reinterpret_cast<char*>(memory) + 1, 2, 1); }),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([] { TileFlags f(nullptr, 2, 1); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { TileFlags f(memory, 2, 0); }), ErrorCode::InvalidArgument);
}

TEST(WaitUntil, ReturnsWhenReadyAndTimesOutNamingTheWait) {
  std::atomic<bool> ready{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ready = true;
  });
  EXPECT_NO_THROW(wait_until([&] { return ready.load(); }, 5.0, [] { return "ready"; }));
  t.join();
  try {
    wait_until([] { return false; }, 0.02, [] { return std::string("the moon"); });
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_EQ(e.message().rfind("the moon", 0), 0u) << e.what();
  }
}

TEST(Backoff, SpinsThenSleeps) {
  Backoff b(20.0);  // 20 us of spinning
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20))
    b.pause();
  // Spinning for 20 ms would take millions of polls; sleeping (<= 200 us each) takes few.
  EXPECT_LT(b.polls(), 50000u);
  EXPECT_GT(b.elapsed_s(), 0.015);
}

// The general wait spins at most 2 us before it yields, whatever TILECOMM_SPIN_US says: with the
// whole spin_us (50 us) of spinning first, two ranks sharing a core paid it on every hand-over
// (~55 us per 8-byte AllReduce instead of ~7 us; docs/runtime.md, "Waiting").
TEST(Backoff, GeneralWaitYieldsAfterTwoMicroseconds) {
  const WaitPolicy p = WaitPolicy::backoff(50.0);
  EXPECT_LE(p.spin, std::chrono::microseconds(2));
  EXPECT_EQ(p.yield_until, std::chrono::microseconds(164));  // polls as long as before
  EXPECT_EQ(WaitPolicy::backoff(0.0).spin, std::chrono::nanoseconds(0));
}

// A wait on MPI requests (the collectives' point-to-point waits) polls as often as backoff() until
// its yield phase ends, then keeps sleeping short: its requests move only while it calls MPI. With
// backoff()'s sleeps, growing to 256 us, a 64 KiB-per-peer All-to-All across 2 emulated nodes at
// 1 Gbit/s took 714 us against the link's 524 (docs/collectives.md, "Waits on MPI requests").
TEST(Backoff, ProgressWaitKeepsItsSleepsShort) {
  const WaitPolicy p = WaitPolicy::progress(50.0), general = WaitPolicy::backoff(50.0);
  EXPECT_EQ(p.spin, general.spin);
  EXPECT_EQ(p.yield_until, general.yield_until);
  EXPECT_EQ(p.sleep_max, kProgressSleepMax);
  EXPECT_LE(kProgressSleepMax, std::chrono::microseconds(16));
  // 20 ms past the yield phase: ~1000 polls at 16 us per sleep; backoff()'s 256 us make ~80.
  Backoff b(p);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t at_sleep = 0;
  while (std::chrono::steady_clock::now() - t0 < p.yield_until + std::chrono::milliseconds(20)) {
    if (at_sleep == 0 && std::chrono::steady_clock::now() - t0 > p.yield_until)
      at_sleep = b.polls();
    b.pause();
  }
  EXPECT_GT(b.polls() - at_sleep, 200u);
}

// A wait's sleeps last what they ask for: the thread's timer slack is 1 us while the Backoff
// sleeps and is restored when the wait ends (Linux's default 50 us stretched a 1 us sleep ~50x).
TEST(Backoff, SleepsWithPreciseTimerSlackAndRestoresIt) {
  const long before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  ASSERT_GT(before, kSleepTimerSlackNs) << "test thread already has a precise timer slack";
  {
    Backoff b(WaitPolicy::fixed_sleep(std::chrono::microseconds(1)));
    b.pause();
    EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), kSleepTimerSlackNs);
  }
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), before);
}

}  // namespace
}  // namespace tilecomm
