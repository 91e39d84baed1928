#include "runtime/wait.hpp"

#include <sys/prctl.h>

#include <cstdio>

namespace tilecomm {

bool Backoff::tick() {
  elapsed_ns_ = (clock::now() - start_).count();
  fresh_ = true;
  if (phase_ == Phase::Spin && elapsed_ns_ >= spin_ns_) phase_ = Phase::Yield;
  if (phase_ == Phase::Yield && elapsed_ns_ >= yield_ns_)
    phase_ = sleep_ns_ > 0 ? Phase::Sleep : Phase::Done;
  return phase_ != Phase::Done;
}

Backoff::~Backoff() {
  if (saved_slack_ >= 0)
    prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(saved_slack_), 0, 0, 0);
}

void Backoff::sleep() {
  if (saved_slack_ == -1) {  // the first sleep of this wait: make sleeps last what they ask for
    const long slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack > kSleepTimerSlackNs && prctl(PR_SET_TIMERSLACK, kSleepTimerSlackNs, 0, 0, 0) == 0)
      saved_slack_ = slack;
    else
      saved_slack_ = -2;  // already precise (a device worker): nothing to restore
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns_));
  sleep_ns_ = std::min(2 * sleep_ns_, sleep_max_ns_);
}

double Backoff::elapsed_s() const {
  if (polls_ == 0) return 0.0;
  return std::chrono::duration<double>(clock::now() - start_).count();
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
