#pragma once
// Polite waiting: a bounded busy-spin, then yielding, then short sleeps, with a deadline.
// tilecomm runs several ranks x several threads on few cores, so no wait spins unboundedly.
// Private to the library and its tests.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "tilecomm/error.hpp"

namespace tilecomm {

/// Busy-spin `spin_us`, then yield for a while, then sleep in growing steps (at most 200 us).
class Backoff {
 public:
  /// `spin_us` < 0 takes the configured default (TILECOMM_SPIN_US).
  explicit Backoff(double spin_us = -1.0);
  /// Call after each unsuccessful poll.
  void pause();
  /// Seconds since the first pause().
  double elapsed_s() const;
  /// Polls so far.
  std::uint64_t polls() const { return polls_; }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_{};
  std::int64_t spin_ns_;
  std::int64_t sleep_ns_ = 1000;
  std::uint64_t polls_ = 0;
  int phase_ = 0;  // 0 spin, 1 yield, 2 sleep
};

namespace detail {
/// Seconds for messages: "0.05", "2", "300" (shortest form, at most 3 significant digits).
std::string format_seconds(double s);
}  // namespace detail

/// The configured default deadline of every wait, seconds (TILECOMM_TIMEOUT_S; 0 = none).
double default_timeout_s();

/// Polls `ready()` with Backoff until it returns true. After `timeout_s` seconds (<= 0: never;
/// use default_timeout_s() for the configured one) throws Error(Timeout) whose message is
/// `describe()` followed by the time waited, so the message names what was waited for.
template <class Ready, class Describe>
void wait_until(Ready&& ready, double timeout_s, Describe&& describe) {
  if (ready()) return;
  Backoff backoff;
  while (!ready()) {
    backoff.pause();
    if (timeout_s > 0 && (backoff.polls() & 63) == 0 && backoff.elapsed_s() > timeout_s) {
      if (ready()) return;
      throw Error(ErrorCode::Timeout, std::string(describe()) + " (waited " +
                                          detail::format_seconds(timeout_s) + " s)");
    }
  }
}

}  // namespace tilecomm
