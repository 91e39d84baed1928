#pragma once
// What examples 01-03 share: the --mode flag, timing on the slowest rank, medians, and a count of
// elements that differ from the sequential result. Nothing here is tilecomm API; it is the harness
// around it, kept apart so each example reads as the use of one operator.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tilecomm/ops.hpp"

namespace examples {

/// Slots of per-mode arrays, indexed by int(Mode): sequential, shaped, fused, auto.
inline constexpr int kModeSlots = 4;

/// The modes an example runs for `--mode NAME` ("all": sequential, shaped and fused; or one mode,
/// "auto" included). Sequential always comes first:
/// it is the reference every other mode is compared with, so it runs even when not asked for.
inline std::vector<tilecomm::Mode> modes_to_run(const std::string& flag) {
  using tilecomm::Mode;
  if (flag == "all") return {Mode::Sequential, Mode::Shaped, Mode::Fused};
  const Mode m = tilecomm::parse_mode(flag);  // throws Error(InvalidArgument) listing the names
  if (m == Mode::Sequential) return {Mode::Sequential};
  return {Mode::Sequential, m};
}

/// `modes` rotated left by `step`: each mode takes its turn at running first. The first call after
/// host-side work (building inputs, checking results) pays for waking the device's idle workers
/// and for cold caches; rotating spreads that cost over all modes instead of charging one (and
/// rotation_speedups() compares whole rotations).
inline std::vector<tilecomm::Mode> in_turn(std::vector<tilecomm::Mode> modes, int step) {
  std::rotate(modes.begin(), modes.begin() + step % static_cast<int>(modes.size()), modes.end());
  return modes;
}

/// True when `m` was asked for (so it appears in the report).
inline bool reported(const std::string& flag, tilecomm::Mode m) {
  return flag == "all" ? m != tilecomm::Mode::Auto : tilecomm::parse_mode(flag) == m;
}

/// "auto settled on <mode>" or "auto still trying modes", for an op's Mode::Auto state.
inline std::string auto_state(std::optional<tilecomm::Mode> choice) {
  return choice ? fmt::format("auto settled on {}", tilecomm::to_string(*choice))
                : std::string("auto still trying modes (more calls needed)");
}

/// Wall time of fn() in milliseconds as seen by the slowest rank: all ranks start together (a
/// barrier), and the maximum over ranks is returned on every rank. Collective.
template <class Fn>
double timed_ms(Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  fn();
  double ms = (MPI_Wtime() - t0) * 1e3;
  MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return ms;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Elements of `got` that are not bitwise equal to `want` (sizes must match; a size difference
/// counts every element as wrong).
inline long long count_wrong(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return static_cast<long long>(std::max(got.size(), want.size()));
  long long wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    wrong += got[i] != want[i];
  return wrong;
}

/// Sum of a count over all ranks (so rank 0 can report a job-wide number). Collective.
inline long long sum_over_ranks(long long v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

/// Median, min and max of `v` (zeros when empty).
struct Spread {
  double median = 0, min = 0, max = 0;
};
inline Spread spread(const std::vector<double>& v) {
  if (v.empty()) return {};
  return {median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

/// The speed-ups of `t` over `seq` (samples of the same steps), one per rotation of the `n` modes:
/// the sum of sequential's times over n consecutive steps divided by the mode's. in_turn() gives
/// every mode every position once in n consecutive steps, and the position weighs as much as the
/// mode: the first call after the host work finds cold caches (in 01 at np 2, the first call of a
/// step takes ~1.4x the time of the third, whatever the mode). A ratio of two calls of one step
/// compares two positions; a ratio over a rotation compares like with like, still side by side.
inline std::vector<double> rotation_speedups(const std::vector<double>& seq,
                                             const std::vector<double>& t, std::size_t n) {
  std::vector<double> out;
  const std::size_t samples = std::min(seq.size(), t.size());
  n = std::max<std::size_t>(n, 1);
  for (std::size_t i = 0; i + n <= samples; i += n) {
    double s = 0, m = 0;
    for (std::size_t j = i; j < i + n; ++j) {
      s += seq[j];
      m += t[j];
    }
    if (m > 0) out.push_back(s / m);
  }
  return out;
}

/// One line per mode: median time [min, max], and the speed-up over sequential as the median
/// [min, max] of rotation_speedups() (samples taken side by side, in every position). Call on
/// rank 0.
inline void print_times(const std::string& what, const std::string& mode_flag,
                        const std::vector<double> (&ms)[kModeSlots]) {
  using tilecomm::Mode;
  const std::vector<double>& seq = ms[0];
  const std::size_t n = modes_to_run(mode_flag).size();
  for (Mode m : {Mode::Sequential, Mode::Shaped, Mode::Fused, Mode::Auto}) {
    if (m != Mode::Sequential && !reported(mode_flag, m)) continue;  // the reference: always
    const std::vector<double>& t = ms[static_cast<int>(m)];
    const std::vector<double> ratios = rotation_speedups(seq, t, n);
    const Spread time = spread(t), speedup = spread(ratios);
    // The first line is the examples' original format (tools read it); the ranges follow on a
    // line of their own.
    fmt::print("  {:<10} {} median {:8.3f} ms  (x{:.2f} vs sequential, {} samples)\n",
               tilecomm::to_string(m), what, time.median, speedup.median, t.size());
    fmt::print("      range {:.3f}-{:.3f} ms, x{:.2f}-x{:.2f} over {} rotations of {} steps\n",
               time.min, time.max, speedup.min, speedup.max, ratios.size(), n);
  }
}

}  // namespace examples
