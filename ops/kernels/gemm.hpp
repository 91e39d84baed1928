#pragma once
/// \file gemm.hpp
/// The GEMM kernel of the GEMM operators (GemmAllToAll, GemmReduceScatter): C[rows x cols] =
/// A[rows x k] * B[k x cols], float32, with B (the weights) packed once per call into column
/// panels of kNr floats (PackedWeights) that every tile reads; A is read in place (row-major, any
/// row stride). One set of micro-kernels per ISA path (C[R x kNr] += R rows of A x a panel over a
/// K block, R = 1..kMr), chosen at run time by tilecomm::active_isa() (TILECOMM_ISA caps it); the
/// blocking loops and the packing are shared (docs/kernels.md, "GEMM kernel").
///
/// Determinism: every element is one chain of fused multiply-adds in increasing k, starting from
/// +0: c = fma(a[i][k], b[k][j], c) for k = 0, 1, ..., K - 1 (a K block ends by storing c as
/// float32 and the next reloads it, which changes nothing). So the result does not depend on the
/// tile an element is in, the tile's shape, the K blocking, the zero padding of the last panel, or
/// the ISA path: the scalar (std::fma), AVX2 and AVX-512 paths agree bitwise. It differs from
/// OpenBLAS's sgemm (another order) by float rounding.

#include <cstddef>
#include <memory>

#include "tilecomm/isa.hpp"

namespace tilecomm::kernels {

/// Rows of an A strip and columns of a B panel (the micro-kernel's C block), on every path.
inline constexpr std::size_t kGemmMr = 6;
inline constexpr std::size_t kGemmNr = 16;

/// C[R x kNr] (row stride ldc) = (accumulate ? C : 0) + A[R x kc] (row stride lda) x a B panel
/// of kc rows of kNr floats (b[k * kNr + j] = B[k][j], 32-byte aligned). Per element one fma per k
/// in increasing k.
using GemmMicroFn = void (*)(std::size_t kc, const float* a, std::size_t lda, const float* b,
                             float* c, std::size_t ldc, bool accumulate);

/// One ISA path's micro-kernels: micro[R - 1] computes R = 1..kMr rows (an edge strip of R rows
/// costs R rows, not kMr).
struct GemmKernels {
  Isa isa;
  const GemmMicroFn* micro;
};

/// The kernels of path `isa` (the caller checks the CPU can run it: isa <= detected_isa()).
/// Paths not compiled into this build fall back to the next narrower one (`.isa` says which).
GemmKernels gemm_kernels_for(Isa isa) noexcept;
/// The kernels of tilecomm::active_isa(), looked up once.
const GemmKernels& gemm_kernels();

/// `count` weight matrices of k x n floats, each packed into ceil(n / kNr) column panels of k rows
/// x kNr floats (the last zero-padded past n), 64-byte aligned. Packing copies: the packed form
/// stays valid until the next pack of the same index, whatever the caller does with its source.
class PackedWeights {
 public:
  /// Sizes the buffer (reused when it is large enough); the contents are undefined until packed.
  void reset(std::size_t count, std::size_t k, std::size_t n);
  std::size_t panels() const { return panels_; }
  /// Packs panels [p0, p1) of matrix `index` from b (row-major, row stride ldb >= n).
  void pack(std::size_t index, const float* b, std::size_t ldb, std::size_t p0, std::size_t p1);
  /// Panel p of matrix `index`: k rows of kNr floats.
  const float* panel(std::size_t index, std::size_t p) const {
    return data_ + (index * panels_ + p) * k_ * kGemmNr;
  }
  std::size_t k() const { return k_; }
  std::size_t n() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const noexcept;
  };
  std::unique_ptr<float, Free> storage_;
  float* data_ = nullptr;
  std::size_t capacity_ = 0, k_ = 0, n_ = 0, panels_ = 0;
};

/// C[rows x cols] (row stride ldc) = A[rows x k] (row stride lda) x columns [col0, col0 + cols)
/// of packed matrix `index` (k = w.k()). col0 must be a multiple of kGemmNr and col0 + cols <=
/// w.n(). C must not overlap A or the packed weights. k = 0 writes zeros. Uses gemm_kernels().
void gemm_tile(const float* a, std::size_t lda, std::size_t rows, const PackedWeights& w,
               std::size_t index, std::size_t col0, std::size_t cols, float* c, std::size_t ldc);
/// The same with one path's kernels (tests, benchmarks).
void gemm_tile(const GemmKernels& kernels, const float* a, std::size_t lda, std::size_t rows,
               const PackedWeights& w, std::size_t index, std::size_t col0, std::size_t cols,
               float* c, std::size_t ldc);

namespace detail {
// The per-ISA micro-kernels (gemm.cpp, gemm_avx2.cpp, gemm_avx512.cpp).
extern const GemmMicroFn kGemmMicroScalar[kGemmMr];
extern const GemmMicroFn kGemmMicroAvx2[kGemmMr];
extern const GemmMicroFn kGemmMicroAvx512[kGemmMr];
}  // namespace detail

}  // namespace tilecomm::kernels
