#pragma once
// Shared helpers of the runtime unit tests: small device configurations, a host-released gate and
// a rendezvous, both waiting politely (Backoff) and with a deadline so a broken scheduler fails a
// test instead of hanging it.

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/flags.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/runtime_config.hpp"
#include "tilecomm/trace.hpp"

namespace tilecomm::test {

/// A device configuration that ignores TILECOMM_* variables, so tests are reproducible.
inline RuntimeConfig config(int cus, int slots, std::size_t lds = 64 << 10) {
  RuntimeConfig c;
  c.num_cus = cus;
  c.wg_slots_per_cu = slots;
  c.lds_bytes_per_cu = lds;
  c.pin_threads = false;  // tests share two cores with other jobs
  return c;
}

/// Deadline of every wait in the tests: generous, but a lost wake-up still fails fast.
inline constexpr double kDeadlineS = 10.0;

/// Waits (backing off) until `pred()`; throws Error(Timeout) naming `what` after kDeadlineS.
template <class Pred>
void wait_for(Pred&& pred, const std::string& what, double timeout_s = kDeadlineS) {
  wait_until(pred, timeout_s, [&] { return "test wait for " + what; });
}

/// A flag the host opens; WGs block on it.
class Gate {
 public:
  void open() { open_.store(true, std::memory_order_release); }
  bool is_open() const { return open_.load(std::memory_order_acquire); }
  void wait() const {
    wait_for([&] { return is_open(); }, "the gate");
  }

 private:
  std::atomic<bool> open_{false};
};

/// Everyone arrives, then waits until `n` have arrived: proves `n` parties run at once.
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}
  void arrive_and_wait() {
    count_.fetch_add(1, std::memory_order_acq_rel);
    wait_for([&] { return count_.load(std::memory_order_acquire) >= n_; },
             "a rendezvous of " + std::to_string(n_));
  }

 private:
  int n_;
  std::atomic<int> count_{0};
};

/// Tracks, per CU, how many WGs are inside the kernel body and the most seen at once.
class ResidencyProbe {
 public:
  explicit ResidencyProbe(int cus) : now_(cus), max_(cus) {}
  void enter(int cu) {
    int v = now_[cu].fetch_add(1, std::memory_order_acq_rel) + 1;
    for (int m = max_[cu].load(); v > m && !max_[cu].compare_exchange_weak(m, v);) {
    }
  }
  void leave(int cu) { now_[cu].fetch_sub(1, std::memory_order_acq_rel); }
  int now(int cu) const { return now_[cu].load(std::memory_order_acquire); }
  int max(int cu) const { return max_[cu].load(); }

 private:
  std::vector<std::atomic<int>> now_;
  std::vector<std::atomic<int>> max_;
};

}  // namespace tilecomm::test
