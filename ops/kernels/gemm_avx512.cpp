// GEMM kernel, AVX-512 path (compiled with -mavx512f; ops/CMakeLists.txt): R x 16 micro-kernels
// (R = 1..6 rows of the strip), one zmm accumulator per row, per k one load of the B panel row
// and R fused multiply-adds with A's element broadcast from memory ({1to16}). _mm512_fmadd_ps
// rounds once, as std::fma: bitwise the scalar and AVX2 paths (gemm.hpp).
#include <immintrin.h>

#include "ops/kernels/gemm.hpp"

namespace tilecomm::kernels::detail {
namespace {

static_assert(kGemmNr == 16, "the AVX-512 micro-kernels hold one 16-float panel row per zmm");

// Prefetch the B panel this many rows (1 KiB) ahead, as the AVX2 path does.
constexpr std::size_t kPrefetch = 16;

template <std::size_t R>
void micro(std::size_t kc, const float* a, std::size_t lda, const float* b, float* c,
           std::size_t ldc, bool accumulate) {
  __m512 acc[R];
#pragma GCC unroll 6
  for (std::size_t r = 0; r < R; ++r)
    acc[r] = accumulate ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
#pragma GCC unroll 4
  for (std::size_t k = 0; k < kc; ++k, ++a, b += kGemmNr) {
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetch * kGemmNr), _MM_HINT_T0);
    const __m512 bk = _mm512_load_ps(b);
#pragma GCC unroll 6
    for (std::size_t r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda]), bk, acc[r]);
  }
#pragma GCC unroll 6
  for (std::size_t r = 0; r < R; ++r)
    _mm512_storeu_ps(c + r * ldc, acc[r]);
}

}  // namespace

const GemmMicroFn kGemmMicroAvx512[kGemmMr] = {micro<1>, micro<2>, micro<3>,
                                               micro<4>, micro<5>, micro<6>};

}  // namespace tilecomm::kernels::detail
