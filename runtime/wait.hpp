#pragma once
// The one way tilecomm waits (private to the library and its tests). A waiter polls a condition
// and calls Backoff::pause() after each miss; a WaitPolicy says how pause() spends the time:
// busy-spin, then yield, then sleep (or give up, for callers that then block on a futex). tilecomm
// runs several ranks x several threads on few cores, so no wait spins unboundedly.
//
// Uses: wait_until() / poll_until() (the general wait, with a deadline: TileFlags::wait, the
// communicator's waits; on MPI requests under WaitPolicy::progress), ShmSteps::wait_for
// (WaitPolicy::backoff), the device's idle workers and host waits (WaitPolicy::idle), and the fused
// operators' MPI proxy (ops/common/proxy.cpp): its host loop sleeps as Proxy::kBackgroundPolicy
// says (20 us doubling to 160 us), then as WaitPolicy::latency() once hurried; a WG waiting on an
// off-node tile uses WaitPolicy::backoff(2.0).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {

/// How a Backoff spends a miss. Times count from the first pause(); a phase of length 0 is
/// skipped.
///  1. spin:  one cpu pause per poll, until `spin`;
///  2. yield: one sched_yield per poll, until `yield_until`;
///  3. sleep: sleeps of `sleep_min`, doubled each poll up to `sleep_max`. Without a sleep phase
///     (sleep_min == 0) pause() yields and returns false from `yield_until` on: the caller blocks
///     elsewhere (a futex), and may call pause() again after it wakes.
/// The clock is read every `spin_check_every` polls while spinning and every `check_every` polls
/// in the other phases (powers of two, >= 1), for the phase changes and for deadlines (expired()).
struct WaitPolicy {
  std::chrono::nanoseconds spin{0};
  std::chrono::nanoseconds yield_until{0};
  std::chrono::nanoseconds sleep_min{0};
  std::chrono::nanoseconds sleep_max{0};
  std::uint32_t spin_check_every = 64;
  std::uint32_t check_every = 64;

  /// The general wait: poll without sleeping for 2 x `spin_us` (< 0: TILECOMM_SPIN_US) + 64 us,
  /// spinning only the first min(spin_us, 2 us) and yielding the core between later polls, then
  /// sleep 1 us, doubling to 256 us. Yielding early costs nothing when the core is otherwise idle
  /// (a yield returns at once) and hands it over when the peer being waited for shares it: two
  /// ranks on one core took ~60 us per 8-byte AllReduce with 50 us of spinning before the first
  /// yield, 7 us with 2 us. A wait that expects its condition within a known short time (e.g. the
  /// length of a small call) passes that time as `spin_us`.
  static WaitPolicy backoff(double spin_us = -1.0);
  /// A device thread before it blocks on a futex (idle workers, host synchronize): pause for
  /// min(spin_us, 2 us), a hand-off between two running threads; then yield until spin_us, so that
  /// a thread just woken on the same core runs at once instead of after the spinner's time slice
  /// (2 cores shared by host, workers and other ranks); then pause() returns false.
  static WaitPolicy idle(double spin_us);
  /// A wait inside a short, latency-bound call (a decode step's fused GEMV): spin 2 us, yield
  /// until 20 us, then sleep 2 us doubling to only 16 us. backoff()'s sleeps grow to 256 us, more
  /// than a whole small call; sleeping (not yielding) still hands the core to whoever needs it,
  /// such as another rank's compute on an oversubscribed node. Meant for threads with a 1 us timer
  /// slack (the device's workers), whose sleeps last what they ask for.
  static WaitPolicy latency();
  /// A wait on MPI requests in flight (the collectives' point-to-point algorithms): backoff()'s
  /// spin and yield, then sleeps of 1 us doubling to only kProgressSleepMax. Open MPI's TCP
  /// transport moves a message's bytes between its socket and the user's buffer only inside MPI
  /// calls (here, the poll's MPI_Testsome), so a poller asleep for backoff()'s 256 us finds its
  /// requests done up to 256 us late: a 64 KiB-per-peer All-to-All across 2 (4) emulated nodes at
  /// 1 Gbit/s took 714 (2098) us against the link's 524 (1573), and 588-598 (1587-1611) with these
  /// sleeps (docs/collectives.md, "Waits on MPI requests").
  static WaitPolicy progress(double spin_us = -1.0);
  /// No spinning: sleep a fixed `period` after each miss. For a background progress loop that
  /// shares its core with the threads it serves.
  static WaitPolicy fixed_sleep(std::chrono::nanoseconds period);
};

/// Default timings of WaitPolicy::backoff.
inline constexpr std::chrono::nanoseconds kBackoffYieldExtra = std::chrono::microseconds(64);
inline constexpr std::chrono::nanoseconds kBackoffSleepMin = std::chrono::microseconds(1);
/// The sleeps of WaitPolicy::backoff: 1, 2, 4, ..., 128, 256, 256, ... us.
inline constexpr std::chrono::nanoseconds kBackoffSleepMax = std::chrono::microseconds(256);
/// The longest sleep of WaitPolicy::progress: under one 63 KiB eager piece's time on the wire up to
/// 25 Gbit/s (20 us; 516 us at 1 Gbit/s). Sleeps of at most 4 us gained a little more (547 against
/// 588-598 us above) for four times the wake-ups, CPU that ranks sharing cores need.
inline constexpr std::chrono::nanoseconds kProgressSleepMax = std::chrono::microseconds(16);
/// WaitPolicy::idle pauses at most this long before it yields.
inline constexpr std::chrono::nanoseconds kIdlePureSpin = std::chrono::microseconds(2);

inline WaitPolicy WaitPolicy::backoff(double spin_us) {
  const std::chrono::nanoseconds s(
      static_cast<std::int64_t>((spin_us < 0 ? env().spin_us : spin_us) * 1000.0));
  return {std::min(s, kIdlePureSpin),
          2 * s + kBackoffYieldExtra,
          kBackoffSleepMin,
          kBackoffSleepMax,
          64,
          64};
}

inline WaitPolicy WaitPolicy::progress(double spin_us) {
  WaitPolicy p = backoff(spin_us);
  p.sleep_max = kProgressSleepMax;
  return p;
}

inline WaitPolicy WaitPolicy::idle(double spin_us) {
  const std::chrono::nanoseconds s(static_cast<std::int64_t>(spin_us * 1000.0));
  return {std::min(s, kIdlePureSpin), s, {}, {}, 16, 1};
}

inline WaitPolicy WaitPolicy::latency() {
  using std::chrono::microseconds;
  return {kIdlePureSpin, microseconds(20), microseconds(2), microseconds(16), 64, 16};
}

inline WaitPolicy WaitPolicy::fixed_sleep(std::chrono::nanoseconds period) {
  return {{}, {}, period, period, 1, 1};
}

/// The state of one wait under a WaitPolicy. Construct it where the wait starts.
class Backoff {
 public:
  explicit Backoff(const WaitPolicy& policy);
  /// WaitPolicy::backoff(spin_us).
  explicit Backoff(double spin_us = -1.0) : Backoff(WaitPolicy::backoff(spin_us)) {}
  /// Restores the thread's timer slack if a sleep lowered it.
  ~Backoff();
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  /// Call after each unsuccessful poll: spins, yields or sleeps once. False once a policy without
  /// a sleep phase has used its time (block elsewhere now); true otherwise.
  bool pause();
  /// Whether `timeout_s` (> 0) seconds have passed since the first pause(), as of the clock read
  /// of the last pause() (false when that pause() did not read the clock, or timeout_s <= 0).
  bool expired(double timeout_s) const {
    return fresh_ && timeout_s > 0 && static_cast<double>(elapsed_ns_) > timeout_s * 1e9;
  }
  /// Seconds since the first pause() (reads the clock).
  double elapsed_s() const;
  /// Polls so far.
  std::uint64_t polls() const { return polls_; }

 private:
  using clock = std::chrono::steady_clock;
  enum class Phase : std::uint8_t { Spin, Yield, Sleep, Done };
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  // Reads the clock and moves on through the phases; false in Done.
  bool tick();
  void sleep();

  clock::time_point start_{};
  std::int64_t spin_ns_, yield_ns_, sleep_ns_, sleep_max_ns_;
  std::uint64_t spin_mask_, check_mask_;
  std::int64_t elapsed_ns_ = 0;  // at the last clock read
  std::uint64_t polls_ = 0;
  Phase phase_;
  bool fresh_ = false;  // the last pause() read the clock
  // The thread's timer slack before the first sleep lowered it to kSleepTimerSlackNs (-1: no
  // sleep yet, -2: it was that low already). Linux stretches a sleep by the thread's slack, 50 us
  // by default: the first 1 us sleep of a host thread's wait lasted ~55 us, the whole latency of a
  // small collective.
  long saved_slack_ = -1;
};

/// Timer slack a Backoff gives its thread while it sleeps (the device's workers have it anyway).
inline constexpr long kSleepTimerSlackNs = 1000;

inline Backoff::Backoff(const WaitPolicy& p)
    : spin_ns_(p.spin.count()),
      yield_ns_(p.yield_until.count()),
      sleep_ns_(p.sleep_min.count()),
      sleep_max_ns_(p.sleep_max.count()),
      spin_mask_(p.spin_check_every - 1),
      check_mask_(p.check_every - 1),
      phase_(spin_ns_ > 0    ? Phase::Spin
             : yield_ns_ > 0 ? Phase::Yield
             : sleep_ns_ > 0 ? Phase::Sleep
                             : Phase::Done) {}

inline bool Backoff::pause() {
  if (polls_++ == 0) start_ = clock::now();
  fresh_ = false;
  std::uint64_t mask = check_mask_;
  switch (phase_) {
    case Phase::Spin:
      cpu_relax();
      mask = spin_mask_;
      break;
    case Phase::Yield:
    case Phase::Done:
      std::this_thread::yield();
      break;
    case Phase::Sleep:
      sleep();
      break;
  }
  if ((polls_ & mask) != 0) return phase_ != Phase::Done;
  return tick();
}

namespace detail {
/// Seconds for messages: "0.05", "2", "300" (shortest form, at most 3 significant digits).
std::string format_seconds(double s);
}  // namespace detail

/// The configured default deadline of every wait, seconds (TILECOMM_TIMEOUT_S; 0 = none).
double default_timeout_s();

/// Polls `ready()` through a Backoff with `policy` until it returns true, then returns true. After
/// `timeout_s` seconds (<= 0: never) asks ready() once more and returns its answer. `policy` needs
/// a sleep phase (or the loop only yields).
template <class Ready>
bool poll_until(Ready&& ready, double timeout_s, const WaitPolicy& policy) {
  if (ready()) return true;
  Backoff backoff(policy);
  while (!ready()) {
    backoff.pause();
    if (backoff.expired(timeout_s)) return ready();
  }
  return true;
}

/// poll_until(), but a deadline throws Error(Timeout) whose message is `describe()` followed by
/// the time waited, so the message names what was waited for. Use default_timeout_s() for the
/// configured deadline.
template <class Ready, class Describe>
void wait_until(Ready&& ready, double timeout_s, Describe&& describe,
                const WaitPolicy& policy = WaitPolicy::backoff()) {
  if (poll_until(ready, timeout_s, policy)) return;
  throw Error(ErrorCode::Timeout,
              std::string(describe()) + " (waited " + detail::format_seconds(timeout_s) + " s)");
}

}  // namespace tilecomm
