#pragma once
// Timing helpers and sample points shared by tilecomm::calibrate's measurements (calibrate.cpp:
// the compute sweeps and overheads; calibrate_paths.cpp: the message paths). Internal.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "ops/model/fit.hpp"
#include "ops/model/profile.hpp"
#include "tilecomm/collectives.hpp"

namespace tilecomm::model::calib {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
// The lower quartile of a ping-pong's round trips: a round trip stretches whenever either process
// is descheduled (on a shared machine, a waiter spinning on the core its partner needs costs
// TILECOMM_SPIN_US per hop), so the quartile describes the path, the median the load.
inline double lower_quartile(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 4];
}
// Repetitions for a compute point: at least kMinReps, and enough to run kMinPoint seconds (a
// call's time estimated from `one`). A short point is over before the node's other ranks reach
// theirs, so it times a rank streaming memory alone, while a real call's tiles stream while every
// rank of the node does.
inline constexpr int kMinReps = 31;
inline constexpr double kMinPoint = 3e-3;
inline int reps_for(double one) {
  return static_cast<int>(std::clamp(kMinPoint / std::max(one, 1e-7), double(kMinReps), 2e4));
}
inline int reps_for(const std::function<void(int)>& f) {
  const double t0 = now();
  f(0);
  return reps_for(now() - t0);
}

// Median wall time of `reps` calls of f(rep) after one warm-up call.
inline double time_median(int reps, const std::function<void(int)>& f) {
  f(0);
  std::vector<double> t;
  for (int r = 1; r <= reps; ++r) {
    const double t0 = now();
    f(r);
    t.push_back(now() - t0);
  }
  return median(std::move(t));
}

// Sample points of a fit.
struct Points {
  std::vector<double> x1, x2, t;
  void add(double a, double b, double s) {
    x1.push_back(a);
    x2.push_back(b);
    t.push_back(s);
  }
  Fit fit(int unknowns) const { return least_squares(x1, x2, t, unknowns); }
  // Every point becomes the slowest rank's time of it (an operator's call lasts as long as its
  // slowest rank's tiles). Collective.
  Points& slowest(Communicator& comm) {
    allreduce(comm, t.data(), t.data(), t.size(), DataType::Float64, ReduceOp::Max);
    return *this;
  }
  // A compute sweep's fit and table, from the slowest rank's points. Collective.
  Fit compute_fit(Communicator& comm) {
    slowest(comm);
    Fit f = fit(3);
    for (std::size_t i = 0; i < t.size(); ++i)
      f.table.push_back({x1[i], x2[i], t[i]});
    return f;
  }
};

}  // namespace tilecomm::model::calib
