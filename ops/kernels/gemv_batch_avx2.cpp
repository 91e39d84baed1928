// Batched bf16 GEMV, AVX2 path (compiled with -mavx2 -mfma; ops/CMakeLists.txt): out [rows x n] =
// W x with x [k x n], row-major, W read from memory once for all n columns. Vectorised over
// columns (8 per ymm; x regrouped per call into zero-padded groups of 8, a masked store for a
// partial group) and over 8 rows (independent
// accumulators); along k each output element is the chain acc = fma(w[i][j], x[j][c], acc) in
// increasing j from +0, as the scalar reference (gemv.hpp, "Batched"), so the two agree bitwise.
// A block of 8 rows is first widened to float32 in a per-thread buffer (8 x k floats, L2-sized
// for decode's K), so the inner loop is a broadcast load and an FMA per row.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "ops/kernels/gemv.hpp"

namespace tilecomm::kernels::detail {
namespace {

constexpr std::size_t kRows = 8;

/// The first `lanes` (1..8) lanes set.
inline __m256i lane_mask(std::size_t lanes) {
  static const int bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - lanes));
}

/// out[r][c0 .. c0 + lanes) for R rows already widened in `wide` (row stride k); xg: x's columns
/// c0 .. c0 + 8 as [k x 8], zero-padded past `lanes`.
template <std::size_t R>
inline void columns(const float* wide, std::size_t k, const float* xg, std::size_t n,
                    std::size_t c0, std::size_t lanes, float* out) {
  const __m256i mask = lane_mask(lanes);
  __m256 acc[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    acc[r] = _mm256_setzero_ps();
  for (std::size_t j = 0; j < k; ++j) {
    const __m256 xv = _mm256_loadu_ps(xg + j * 8);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(wide + r * k + j), xv, acc[r]);
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    _mm256_maskstore_ps(out + r * n + c0, mask, acc[r]);
}

template <std::size_t R>
inline void row_block(const std::uint16_t* w, std::size_t k, std::size_t n, const float* xg,
                      float* out, std::vector<float>& wide) {
  // Exact: bf16 is the upper half of a float32. 8 at a time, then the tail.
  const std::size_t total = R * k;
  std::size_t i = 0;
  for (; i + 8 <= total; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(wide.data() + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
  for (; i < total; ++i)
    wide[i] = std::bit_cast<float>(static_cast<std::uint32_t>(w[i]) << 16);
  for (std::size_t c0 = 0; c0 < n; c0 += 8)
    columns<R>(wide.data(), k, xg + c0 * k, n, c0, std::min<std::size_t>(8, n - c0), out);
}

}  // namespace

void gemv_bf16_batch_avx2(const std::uint16_t* w, std::size_t rows, std::size_t k, std::size_t n,
                          const float* x, float* out) {
  // x regrouped: group g (columns 8g .. 8g + 8) as [k x 8], zero-padded, at xg + 8 g k.
  thread_local std::vector<float> wide, xg;
  const std::size_t groups = (n + 7) / 8;
  wide.resize(kRows * k);
  xg.assign(groups * 8 * k, 0.0f);
  for (std::size_t j = 0; j < k; ++j)
    for (std::size_t c = 0; c < n; ++c)
      xg[(c / 8) * 8 * k + j * 8 + c % 8] = x[j * n + c];
  std::size_t i = 0;
  for (; i + kRows <= rows; i += kRows)
    row_block<kRows>(w + i * k, k, n, xg.data(), out + i * n, wide);
  for (; i < rows; ++i)
    row_block<1>(w + i * k, k, n, xg.data(), out + i * n, wide);
}

}  // namespace tilecomm::kernels::detail
