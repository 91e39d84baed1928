#include "ops/model/fit.hpp"

#include <fmt/format.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
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
  // Columns scaled to unit max so that dgels sees a well-conditioned matrix (x2 reaches 1e9).
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
  const lapack_int info = LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', static_cast<lapack_int>(n), unknowns,
                                        1, a.data(), unknowns, b.data(), 1);
  if (info != 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("least_squares: LAPACKE_dgels returned {} ({} points, {} unknowns)",
                            info, n, unknowns));
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

}  // namespace tilecomm::model
