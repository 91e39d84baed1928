#pragma once
// GemmAllToAll's tiling rule, pure so that the model (ops/model) plans with the operator's tiles.
#include <algorithm>
#include <cstddef>

#include "ops/common/plan_layout.hpp"

namespace tilecomm::detail {

/// Rows of a result tile between ranks of one node (this rank included) for a K x N expert GEMM
/// in tiles of `tile_rows` x min(N, 256): the fewest whole row tiles, up to 16, whose GEMM (per
/// row: K x columns multiply-adds, K floats of X read and the columns' results stored) pays for the
/// tile's fixed cost (min_node_tile_rows). K = 1, N = 256: 128 rows; K = N = 128:
/// `tile_rows`.
inline std::size_t gemm_alltoall_node_rows(std::size_t k, std::size_t n, std::size_t tile_rows) {
  const std::size_t cols = std::min<std::size_t>(n, 256);
  const std::size_t paying = min_node_tile_rows(double(k + cols) * sizeof(float), double(k) * cols);
  const std::size_t tiles = (paying + tile_rows - 1) / tile_rows;
  return tile_rows * std::clamp<std::size_t>(tiles, 1, 16);
}

/// Rows of a result tile bound for (or coming from) another node, for N columns: the most rows,
/// in steps of kOffNodeRowStep, whose results (min(N, 256) columns) fit in kOffNodeEagerBytes, so
/// narrow results do not go out as many small MPI messages. N >= 256: 48 rows (48 KiB).
inline std::size_t gemm_alltoall_off_rows(std::size_t n) {
  const std::size_t row_bytes = std::min<std::size_t>(n, 256) * sizeof(float);
  return std::max(kOffNodeRowStep, eager_rows(row_bytes) / kOffNodeRowStep * kOffNodeRowStep);
}

}  // namespace tilecomm::detail
