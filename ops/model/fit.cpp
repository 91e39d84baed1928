#include "ops/model/fit.hpp"

#include <fmt/format.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "tilecomm/error.hpp"

namespace tilecomm::model {

Fit least_squares(std::span<const double> x1, std::span<const double> x2, std::span<const double> t,
                  int unknowns) {
  const std::size_t n = t.size();
  if (unknowns < 1 || unknowns > 3 || n < static_cast<std::size_t>(unknowns) || x1.size() != n ||
      (unknowns == 3 && x2.size() != n))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("least_squares: {} points for {} unknowns", n, unknowns));
  // Columns scaled to unit max so that dgelsy sees a well-conditioned matrix (x2 reaches 1e9).
  std::vector<double> scale(static_cast<std::size_t>(unknowns), 1.0);
  auto feature = [&](std::size_t i, int j) { return j == 0 ? 1.0 : j == 1 ? x1[i] : x2[i]; };
  for (int j = 1; j < unknowns; ++j) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i)
      m = std::max(m, std::abs(feature(i, j)));
    scale[j] = m > 0 ? m : 1.0;
  }
  // Rows weighted by 1 / t: the sweeps span decades, and an unweighted fit would let the largest
  // points decide alone (small tiles off by several times). This minimises relative residuals.
  std::vector<double> a(n * unknowns), b(n);  // row-major
  for (std::size_t i = 0; i < n; ++i) {
    const double w = t[i] > 0 ? 1.0 / t[i] : 1.0;
    b[i] = t[i] * w;
    for (int j = 0; j < unknowns; ++j)
      a[i * unknowns + j] = feature(i, j) / scale[j] * w;
  }
  // dgelsy (QR with column pivoting) rather than dgels: dgels only refuses a matrix whose R has an
  // exactly zero diagonal, which for dependent columns is a matter of the BLAS kernel's rounding
  // (on Zen 4's AVX-512 OpenBLAS three equal columns left ~1e-17 there, and dgels returned a
  // meaningless fit). dgelsy reports the numerical rank at a relative tolerance instead.
  constexpr double kRcond = 1e-10;  // the columns are scaled to unit max above
  std::vector<lapack_int> pivots(static_cast<std::size_t>(unknowns), 0);
  lapack_int rank = 0;
  const lapack_int info =
      LAPACKE_dgelsy(LAPACK_ROW_MAJOR, static_cast<lapack_int>(n), unknowns, 1, a.data(), unknowns,
                     b.data(), 1, pivots.data(), kRcond, &rank);
  if (info != 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("least_squares: LAPACKE_dgelsy returned {} ({} points, {} unknowns)",
                            info, n, unknowns));
  if (rank < unknowns)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("least_squares: the points determine only {} of {} unknowns (their "
                            "features do not vary independently; {} points)",
                            rank, unknowns, n));
  Fit f;
  for (int j = 0; j < unknowns; ++j)
    f.c[j] = b[j] / scale[j];
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = t[i] - f.at(x1[i], unknowns == 3 ? x2[i] : 0.0);
    ss += r * r;
    if (t[i] != 0) f.max_rel = std::max(f.max_rel, std::abs(r) / std::abs(t[i]));
  }
  f.rms = std::sqrt(ss / static_cast<double>(n));
  f.points = static_cast<int>(n);
  return f;
}

double table_at(const Fit& f, double x1, double x2) {
  // Coordinates: log2 of the tile's rows (or lookups) and of its work per row (K n, dim, K N).
  auto coords = [](double a, double b) {
    return std::pair{std::log2(a), std::log2(std::max(b / a, 1e-300))};
  };
  const auto [qa, qb] = coords(x1, x2);
  // The tile's own work per row, when the sweep measured it: read along it alone.
  std::vector<std::pair<double, double>> line;  // (log2 x1, cost per unit of x2)
  for (const Sample& s : f.table) {
    if (s.x1 <= 0 || s.x2 <= 0) continue;
    const auto [a, b] = coords(s.x1, s.x2);
    if (std::abs(b - qb) < 1e-9) line.emplace_back(a, s.t / s.x2);
  }
  if (!line.empty()) {
    std::sort(line.begin(), line.end());
    // Points of one x1 (two shapes of the same work per row): their mean.
    std::vector<std::pair<double, double>> merged;
    for (std::size_t i = 0; i < line.size();) {
      std::size_t j = i;
      double sum = 0;
      for (; j < line.size() && line[j].first == line[i].first; ++j)
        sum += line[j].second;
      merged.emplace_back(line[i].first, sum / double(j - i));
      i = j;
    }
    if (qa <= merged.front().first) return merged.front().second * x2;
    if (qa >= merged.back().first) return merged.back().second * x2;
    const auto hi = std::lower_bound(merged.begin(), merged.end(), std::pair{qa, -1e300});
    const auto lo = hi - 1;
    const double w = (qa - lo->first) / (hi->first - lo->first);
    return ((1 - w) * lo->second + w * hi->second) * x2;
  }
  constexpr std::size_t kNearest = 4;
  std::vector<std::pair<double, double>> near;  // (distance^2, cost per unit of x2)
  for (const Sample& s : f.table) {
    if (s.x1 <= 0 || s.x2 <= 0) continue;
    const auto [a, b] = coords(s.x1, s.x2);
    near.emplace_back((a - qa) * (a - qa) + (b - qb) * (b - qb), s.t / s.x2);
  }
  if (near.empty()) return f.c[0] + f.c[1] * x1 + f.c[2] * x2;
  const std::size_t k = std::min(kNearest, near.size());
  std::partial_sort(near.begin(), near.begin() + static_cast<std::ptrdiff_t>(k), near.end());
  if (near.front().first < 1e-12) return near.front().second * x2;
  double wsum = 0, usum = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const double w = 1.0 / near[i].first;
    wsum += w;
    usum += w * near[i].second;
  }
  return usum / wsum * x2;
}

}  // namespace tilecomm::model
