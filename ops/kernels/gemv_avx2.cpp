// GEMV kernels, AVX2 path (compiled with -mavx2 -mfma; ops/CMakeLists.txt). Lanes 0-7 and 8-15 of
// gemv.hpp's 16 are two ymm accumulators per row (four for bf16: even and odd); the K tail is
// copied into zero-padded buffers (AVX2 has no 16-bit masked load), so the order and the result
// equal the other paths'. For bf16, x is split into even and odd lanes once per call (split_x).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "ops/kernels/gemv.hpp"

namespace tilecomm::kernels::detail {
namespace {

constexpr std::size_t kRows = 4;  // the row loops below are unrolled: accumulators in registers

/// The fixed tree of gemv.hpp on lanes lo = 0..7, hi = 8..15.
inline float tree_sum(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/// Zero-padded copies of the last k - j (< n) elements of R rows and of x (unless xs is null), for
/// the K tail.
template <std::size_t R, std::size_t N, class T>
struct Tail {
  T w[R][N] = {};
  float x[N] = {};
  const T* row[R];
  Tail(const T* const* rows, std::size_t j, std::size_t k, const float* xs) {
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      std::memcpy(w[r], rows[r] + j, (k - j) * sizeof(T));
      row[r] = w[r];
    }
    if (xs != nullptr) std::memcpy(x, xs + j, (k - j) * sizeof(float));
  }
};

/// fp32: out[0..R) for R rows starting at w (row stride k); lanes 0-7 in lo, 8-15 in hi.
template <std::size_t R>
inline void row_block(const float* w, std::size_t k, const float* x, float* out) {
  __m256 lo[R], hi[R];
  const float* row[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) {
    lo[r] = hi[r] = _mm256_setzero_ps();
    row[r] = w + r * k;
  }
  auto step = [&](const float* const* rows, std::size_t j, const float* xs) {
    const __m256 x0 = _mm256_loadu_ps(xs + j), x1 = _mm256_loadu_ps(xs + j + 8);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(rows[r] + j), x0, lo[r]);
      hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(rows[r] + j + 8), x1, hi[r]);
    }
  };
  std::size_t j = 0;
  for (; j + 16 <= k; j += 16)
    step(row, j, x);
  if (j < k) {
    const Tail<R, 16, float> t(row, j, k, x);
    step(t.row, 0, t.x);
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    out[r] = tree_sum(lo[r], hi[r]);
}

/// Even (0x88) or odd (0xdd) elements of x[0..16) in order.
template <int kImm>
inline __m256 split(__m256 x0, __m256 x1) {
  const __m256 s = _mm256_shuffle_ps(x0, x1, kImm);  // {0,2,8,10 | 4,6,12,14} for even
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), 0xd8));
}

/// x of the bf16 kernel, split once per call: per block of 32 elements, 32 floats — the even
/// elements of x[32 b .. 32 b + 32) in order, then the odd ones (zero past k) — so a row block's
/// step loads them instead of splitting x again for every row (two shuffles and two permutes per
/// row and 16 weights). The same values in the same lanes as splitting per row: the same bits.
struct alignas(32) XBlock {
  float v[32];
};

const XBlock* split_x(const float* x, std::size_t k) {
  const std::size_t blocks = (k + 31) / 32;
  thread_local std::vector<XBlock> buffer;
  if (buffer.size() < blocks + 1) buffer.resize(blocks + 1);  // + 1: k = 0 too
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t j = 32 * b;
    alignas(32) float tail[32] = {};
    const float* xs = x + j;
    if (k - j < 32) {
      std::memcpy(tail, xs, (k - j) * sizeof(float));
      xs = tail;
    }
    const __m256 x0 = _mm256_loadu_ps(xs), x1 = _mm256_loadu_ps(xs + 8);
    const __m256 x2 = _mm256_loadu_ps(xs + 16), x3 = _mm256_loadu_ps(xs + 24);
    float* out = buffer[b].v;
    _mm256_store_ps(out, split<0x88>(x0, x1));
    _mm256_store_ps(out + 8, split<0x88>(x2, x3));
    _mm256_store_ps(out + 16, split<0xdd>(x0, x1));
    _mm256_store_ps(out + 24, split<0xdd>(x2, x3));
  }
  return buffer.data();
}

/// bf16: the even/odd lanes of gemv.hpp; even[l] and odd[l] for l < 8 in e0/o0, l >= 8 in e1/o1.
/// xs: split_x(x, k).
template <std::size_t R>
inline void row_block(const std::uint16_t* w, std::size_t k, const XBlock* xs, float* out) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 e0[R], e1[R], o0[R], o1[R];
  const std::uint16_t* row[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) {
    e0[r] = e1[r] = o0[r] = o1[r] = _mm256_setzero_ps();
    row[r] = w + r * k;
  }
  auto half = [&](const std::uint16_t* p, __m256 xe, __m256 xo, __m256& e, __m256& o) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    e = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), xe, e);
    o = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, high)), xo, o);
  };
  auto step = [&](const std::uint16_t* const* rows, std::size_t j, const XBlock& xb) {
    const __m256 xe0 = _mm256_load_ps(xb.v), xe1 = _mm256_load_ps(xb.v + 8);
    const __m256 xo0 = _mm256_load_ps(xb.v + 16), xo1 = _mm256_load_ps(xb.v + 24);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      half(rows[r] + j, xe0, xo0, e0[r], o0[r]);
      half(rows[r] + j + 16, xe1, xo1, e1[r], o1[r]);
    }
  };
  std::size_t j = 0;
  for (; j + 32 <= k; j += 32)
    step(row, j, xs[j / 32]);
  if (j < k) {
    const Tail<R, 32, std::uint16_t> t(row, j, k, nullptr);
    step(t.row, 0, xs[j / 32]);
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    out[r] = tree_sum(_mm256_add_ps(e0[r], o0[r]), _mm256_add_ps(e1[r], o1[r]));
}

void gemv(const float* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  std::size_t i = 0;
  for (; i + kRows <= rows; i += kRows)
    row_block<kRows>(w + i * k, k, x, out + i);
  for (; i < rows; ++i)
    row_block<1>(w + i * k, k, x, out + i);
}

void gemv(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  const XBlock* xs = split_x(x, k);
  std::size_t i = 0;
  for (; i + kRows <= rows; i += kRows)
    row_block<kRows>(w + i * k, k, xs, out + i);
  for (; i < rows; ++i)
    row_block<1>(w + i * k, k, xs, out + i);
}

}  // namespace

void gemv_f32_avx2(const float* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  gemv(w, rows, k, x, out);
}
void gemv_bf16_avx2(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                    float* out) {
  gemv(w, rows, k, x, out);
}

}  // namespace tilecomm::kernels::detail
