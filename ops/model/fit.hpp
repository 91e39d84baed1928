#pragma once
// Least-squares fits of measured times (LAPACKE_dgelsy), with their residuals.
#include <span>

#include "ops/model/profile.hpp"

namespace tilecomm::model {

/// Fits t = c0 + c1 x1 (+ c2 x2 when `unknowns` = 3) to the points (x1[i], x2[i], t[i]) by least
/// squares of the relative residuals (each row weighted by 1 / t[i]) through LAPACKE_dgelsy (QR
/// with column pivoting), and reports the residuals (rms in seconds, largest relative). Unused
/// coefficients are 0. Error(InvalidArgument) when there are fewer points than unknowns or the
/// design's numerical rank (relative tolerance 1e-10, columns scaled to unit max) is below the
/// unknowns (the sweep did not vary the features independently).
Fit least_squares(std::span<const double> x1, std::span<const double> x2, std::span<const double> t,
                  int unknowns);

}  // namespace tilecomm::model
