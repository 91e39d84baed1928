// GEMM kernel, AVX2 path (compiled with -mavx2 -mfma; ops/CMakeLists.txt): R x 16 micro-kernels
// (R = 1..6 rows of the strip), two ymm accumulators per row, per k two loads of the B panel row
// and R broadcasts from the A block's rows. _mm256_fmadd_ps rounds once, as std::fma: bitwise the
// scalar path.
#include <immintrin.h>

#include "ops/kernels/gemm.hpp"

namespace tilecomm::kernels::detail {
namespace {

static_assert(kGemmMr == 6 && kGemmNr == 16, "the AVX2 micro-kernels are written for 6 x 16");

// Prefetch the B panel this many rows (1 KiB) ahead: the panel streams from L2 (L3 for a tile's
// first strip). Without it 32-row tiles ran at 51 instead of 71 GFLOP/s at 1024^3 (kKc 256).
constexpr std::size_t kPrefetch = 16;

template <std::size_t R>
void micro(std::size_t kc, const float* a, std::size_t lda, const float* b, float* c,
           std::size_t ldc, bool accumulate) {
  __m256 lo[R], hi[R];
#pragma GCC unroll 6
  for (std::size_t r = 0; r < R; ++r) {
    lo[r] = accumulate ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    hi[r] = accumulate ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
#pragma GCC unroll 2
  for (std::size_t k = 0; k < kc; ++k, ++a, b += kGemmNr) {
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetch * kGemmNr), _MM_HINT_T0);
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (std::size_t r = 0; r < R; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * lda);
      lo[r] = _mm256_fmadd_ps(ar, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(ar, b1, hi[r]);
    }
  }
#pragma GCC unroll 6
  for (std::size_t r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, lo[r]);
    _mm256_storeu_ps(c + r * ldc + 8, hi[r]);
  }
}

}  // namespace

const GemmMicroFn kGemmMicroAvx2[kGemmMr] = {micro<1>, micro<2>, micro<3>,
                                             micro<4>, micro<5>, micro<6>};

}  // namespace tilecomm::kernels::detail
