// GEMM kernel: the scalar micro-kernel (the reference: gemm.hpp's fma chain), the run-time
// dispatch, weight packing and the blocking loops every path shares.
#include "ops/kernels/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tilecomm::kernels {
namespace {

constexpr std::size_t kMr = kGemmMr, kNr = kGemmNr;
// Blocking (results do not depend on it, gemm.hpp): per tile, column blocks of kNc, row blocks of
// at most kMc (a multiple of kMr; the rows split evenly) and K blocks of kKc. A is read in place:
// a row block (<= kMc x kKc, 192 KiB) stays in L2 across the column block's panels; a B panel's K
// block (kKc x kNr, 64 KiB) streams from L2 (prefetched in the micro-kernel) across the block's
// strips. Measured on Zen 3 at K = 1024 (32- to 256-row tiles, gemm_perf): kKc 256 / 512 / 1024
// gave 66-75 / 74-81 / 74-82 GFLOP/s (fewer passes over C win over a B panel in L1); kMc 48 / 96 /
// 192 rows the same within the noise; copying A's row block into a buffer first (as BLAS packs A)
// cost 4-8 % (77-81 vs 82-85 GFLOP/s, two runs side by side).
constexpr std::size_t kKc = 1024, kMc = 8 * kMr, kNc = 256;

/// Rows per row block: `rows` split into equal blocks of at most kMc, rounded up to kMr.
std::size_t row_block(std::size_t rows) {
  const std::size_t blocks = (rows + kMc - 1) / kMc;
  const std::size_t per = (rows + blocks - 1) / blocks;
  return (per + kMr - 1) / kMr * kMr;
}

/// Rows of the next strip when `left` rows remain: kMr, except that the last kMr + 1..3 rows go
/// as two strips of at least 4 (an R-row micro-kernel keeps 2R FMAs in flight; 8 fill the
/// core's two 4-cycle FMA pipes, so strips of 1-3 rows would run at 25-75 % speed).
std::size_t strip_rows(std::size_t left) {
  if (left <= kMr) return left;
  if (left < kMr + 4) return (left + 1) / 2;
  return kMr;
}

template <std::size_t R>
void micro_scalar(std::size_t kc, const float* a, std::size_t lda, const float* b, float* c,
                  std::size_t ldc, bool accumulate) {
  float acc[R][kNr];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < kNr; ++j)
      acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
  for (std::size_t k = 0; k < kc; ++k, b += kNr)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < kNr; ++j)
        acc[r][j] = std::fma(a[r * lda + k], b[j], acc[r][j]);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < kNr; ++j)
      c[r * ldc + j] = acc[r][j];
}

}  // namespace

namespace detail {
const GemmMicroFn kGemmMicroScalar[kMr] = {micro_scalar<1>, micro_scalar<2>, micro_scalar<3>,
                                           micro_scalar<4>, micro_scalar<5>, micro_scalar<6>};
}  // namespace detail

GemmKernels gemm_kernels_for(Isa isa) noexcept {
  switch (isa) {
    case Isa::Avx512:
      return {Isa::Avx512, detail::kGemmMicroAvx512};
    case Isa::Avx2:
      return {Isa::Avx2, detail::kGemmMicroAvx2};
    case Isa::Scalar:
      break;
  }
  return {Isa::Scalar, detail::kGemmMicroScalar};
}

const GemmKernels& gemm_kernels() {
  static const GemmKernels kernels = gemm_kernels_for(active_isa());
  return kernels;
}

void PackedWeights::Free::operator()(float* p) const noexcept {
  std::free(p);
}

void PackedWeights::reset(std::size_t count, std::size_t k, std::size_t n) {
  k_ = k;
  n_ = n;
  panels_ = (n + kNr - 1) / kNr;
  const std::size_t floats = count * panels_ * k * kNr;
  if (floats > capacity_ || !storage_) {
    const std::size_t bytes = (std::max<std::size_t>(floats, 1) * sizeof(float) + 63) / 64 * 64;
    storage_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!storage_) throw std::bad_alloc();
    capacity_ = floats;
  }
  data_ = storage_.get();
}

void PackedWeights::pack(std::size_t index, const float* b, std::size_t ldb, std::size_t p0,
                         std::size_t p1) {
  p1 = std::min(p1, panels_);
  // Chunks of kChunk panels, row by row: 512 contiguous bytes of each row of b per pass (one TLB
  // entry per row serves 8 cache lines; b's rows are often 4 KiB or more apart).
  constexpr std::size_t kChunk = 8;
  for (std::size_t q0 = p0; q0 < p1; q0 += kChunk) {
    const std::size_t q1 = std::min(p1, q0 + kChunk);
    const bool full = q1 * kNr <= n_;
    for (std::size_t k = 0; k < k_; ++k) {
      const float* src = b + k * ldb;
      float* dst = data_ + (index * panels_) * k_ * kNr + k * kNr;
      for (std::size_t p = q0; p < q1; ++p) {
        float* out = dst + p * k_ * kNr;
        if (full) {
          std::memcpy(out, src + p * kNr, kNr * sizeof(float));  // a fixed size: inlined
          continue;
        }
        const std::size_t w = std::min(kNr, n_ - p * kNr);
        std::memcpy(out, src + p * kNr, w * sizeof(float));
        std::fill(out + w, out + kNr, 0.0f);
      }
    }
  }
}

void gemm_tile(const GemmKernels& kernels, const float* a, std::size_t lda, std::size_t rows,
               const PackedWeights& w, std::size_t index, std::size_t col0, std::size_t cols,
               float* c, std::size_t ldc) {
  const std::size_t k = w.k();
  if (rows == 0 || cols == 0) return;
  if (k == 0) {
    for (std::size_t i = 0; i < rows; ++i)
      std::fill(c + i * ldc, c + i * ldc + cols, 0.0f);
    return;
  }
  const std::size_t mc = row_block(rows);
  alignas(64) float edge[kMr * kNr] = {};  // padding stays 0: zero A rows, B columns
  for (std::size_t j0 = 0; j0 < cols; j0 += kNc) {
    const std::size_t jb = std::min(kNc, cols - j0);
    for (std::size_t i0 = 0; i0 < rows; i0 += mc) {
      const std::size_t ib = std::min(mc, rows - i0);
      for (std::size_t k0 = 0; k0 < k; k0 += kKc) {
        const std::size_t kb = std::min(kKc, k - k0);
        const bool accumulate = k0 > 0;
        const float* block = a + i0 * lda + k0;
        for (std::size_t j = j0; j < j0 + jb; j += kNr) {
          const std::size_t nb = std::min(kNr, j0 + jb - j);
          const float* panel = w.panel(index, (col0 + j) / kNr) + k0 * kNr;
          for (std::size_t s = 0, rb = 0; s < ib; s += rb) {
            rb = strip_rows(ib - s);
            const float* strip = block + s * lda;
            float* out = c + (i0 + s) * ldc + j;
            const GemmMicroFn micro = kernels.micro[rb - 1];
            if (nb == kNr) {
              micro(kb, strip, lda, panel, out, ldc, accumulate);
              continue;
            }
            // Last panel of fewer than kNr columns: through a buffer (its padding computes zeros).
            for (std::size_t r = 0; r < rb && accumulate; ++r)
              std::memcpy(edge + r * kNr, out + r * ldc, nb * sizeof(float));
            micro(kb, strip, lda, panel, edge, kNr, accumulate);
            for (std::size_t r = 0; r < rb; ++r)
              std::memcpy(out + r * ldc, edge + r * kNr, nb * sizeof(float));
          }
        }
      }
    }
  }
}

void gemm_tile(const float* a, std::size_t lda, std::size_t rows, const PackedWeights& w,
               std::size_t index, std::size_t col0, std::size_t cols, float* c, std::size_t ldc) {
  gemm_tile(gemm_kernels(), a, lda, rows, w, index, col0, cols, c, ldc);
}

}  // namespace tilecomm::kernels
