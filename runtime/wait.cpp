#include "runtime/wait.hpp"

#include <cstdio>
#include <thread>

#include "tilecomm/env.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TILECOMM_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TILECOMM_CPU_RELAX() asm volatile("yield")
#else
#define TILECOMM_CPU_RELAX() ((void)0)
#endif

namespace tilecomm {

Backoff::Backoff(double spin_us)
    : spin_ns_(static_cast<std::int64_t>((spin_us < 0 ? env().spin_us : spin_us) * 1000.0)) {}

double Backoff::elapsed_s() const {
  if (polls_ == 0) return 0.0;
  return std::chrono::duration<double>(clock::now() - start_).count();
}

void Backoff::pause() {
  if (polls_++ == 0) start_ = clock::now();
  switch (phase_) {
    case 0:  // busy spin; look at the clock every 64 polls only
      TILECOMM_CPU_RELAX();
      if ((polls_ & 63) == 0 && (clock::now() - start_).count() >= spin_ns_) phase_ = 1;
      return;
    case 1:  // yield for as long again as we spun (at least 64 yields)
      std::this_thread::yield();
      if ((polls_ & 63) == 0 && (clock::now() - start_).count() >= 2 * spin_ns_ + 64000) phase_ = 2;
      return;
    default:  // sleep, doubling up to 200 us
      std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns_));
      if (sleep_ns_ < 200000) sleep_ns_ *= 2;
      return;
  }
}

double default_timeout_s() {
  return env().timeout_s;
}

std::string detail::format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", s);
  return buf;
}

}  // namespace tilecomm
