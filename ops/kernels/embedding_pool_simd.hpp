#pragma once
// The vector pooling loop shared by the AVX2 and AVX-512 paths, written once over a traits type V
// (embedding_pool_avx2.cpp, embedding_pool_avx512.cpp). Everything here is in an anonymous
// namespace: each per-ISA source compiles its own copy with its own ISA flags, and internal
// linkage keeps the linker from handing one ISA's copy to the other path. Include it only there.
//
// V provides: Reg (a vector of V::kLanes floats), Mask, kMaxVecs (vectors kept in registers per
// pass over a bag), kMaskedTail (whether the last vector of a pass may be partial; otherwise the
// dim % kLanes tail columns go to pool_columns_scalar), zero(), set1(f), load(const float*, Mask),
// load(const std::uint16_t*, Mask), add, mul, div, store(float*, Reg, Mask), full_mask(),
// tail_mask(lanes).
//
// Order of additions: as the scalar reference (embedding_pool.hpp), lane by lane.

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ops/kernels/embedding_pool.hpp"

namespace tilecomm::kernels {
namespace {  // NOLINT(google-build-namespaces): see above

/// Adds the columns [col0, col0 + NV * kLanes) (the last vector masked by `tail`) of the rows of
/// bag g into NV accumulators in index order, divides by the bag size for mean, stores them at dst.
/// For every index j it prefetches, one prefetch per cache line and each issued right after the
/// load of that line of row j, the same columns of the row `distance` indices ahead (FBGEMM's
/// scheme: no separate prefetch loop, no branch); past the call's last index (`last`) it
/// prefetches row j itself instead of branching.
template <class V, int NV, bool Weighted, class T>
inline void pool_bag_block(const T* table, const PoolJob& job, std::size_t g, std::size_t col0,
                           typename V::Mask tail, std::int64_t last, std::int64_t distance,
                           float* dst) {
  // Vectors per cache line of T elements: prefetch at every this-many-th vector.
  constexpr int kPerLine =
      64 / (V::kLanes * sizeof(T)) > 0 ? static_cast<int>(64 / (V::kLanes * sizeof(T))) : 1;
  const std::size_t dim = job.dim;
  typename V::Reg acc[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v)
    acc[v] = V::zero();
  const std::int64_t begin = job.offsets[g], end = job.offsets[g + 1];
  for (std::int64_t j = begin; j < end; ++j) {
    const std::int64_t ahead = j + distance < last ? j + distance : j;
    const T* next = table + static_cast<std::size_t>(job.indices[ahead]) * dim + col0;
    const T* row = table + static_cast<std::size_t>(job.indices[j]) * dim + col0;
    [[maybe_unused]] typename V::Reg w;
    if constexpr (Weighted) w = V::set1(job.weights[j]);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const typename V::Mask m = v + 1 < NV ? V::full_mask() : tail;
      if constexpr (Weighted)
        acc[v] = V::add(acc[v], V::mul(w, V::load(row + v * V::kLanes, m)));
      else
        acc[v] = V::add(acc[v], V::load(row + v * V::kLanes, m));
      if (v % kPerLine == 0)
        _mm_prefetch(reinterpret_cast<const char*>(next + v * V::kLanes), _MM_HINT_T0);
    }
  }
  if (job.mean && end > begin) {
    const typename V::Reg n = V::set1(static_cast<float>(end - begin));
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      acc[v] = V::div(acc[v], n);
  }
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v)
    V::store(dst + v * V::kLanes, acc[v], v + 1 < NV ? V::full_mask() : tail);
}

/// Pools every bag of the job, one bag at a time: `full` passes of kMaxVecs vectors over its
/// columns, then one pass of NVLast vectors (the last masked by `tail`; none when NVLast is 0),
/// back to back, so a bag's later passes find its indices in L1 and its rows' pages in the TLB.
/// Rows job.prefetch indices ahead are prefetched (within the indices of this call's bags).
template <class V, int NVLast, bool Weighted, class T>
void pool_rows(const T* table, const PoolJob& job, std::size_t full, typename V::Mask tail) {
  constexpr std::size_t kBlock = V::kMaxVecs * V::kLanes;
  // No prefetch: last = 0, so every row prefetches itself (a no-op next to its own loads).
  const std::int64_t last = job.prefetch > 0 ? job.offsets[job.bag1] : 0;
  const auto distance = static_cast<std::int64_t>(job.prefetch);
  float* dst = job.dst;
  for (std::size_t g = job.bag0; g < job.bag1; ++g, dst += job.stride) {
    for (std::size_t b = 0; b < full; ++b)
      pool_bag_block<V, static_cast<int>(V::kMaxVecs), Weighted>(
          table, job, g, b * kBlock, V::full_mask(), last, distance, dst + b * kBlock);
    if constexpr (NVLast > 0)
      pool_bag_block<V, NVLast, Weighted>(table, job, g, full * kBlock, tail, last, distance,
                                          dst + full * kBlock);
  }
}

template <class V, class T>
using RowsFn = void (*)(const T*, const PoolJob&, std::size_t, typename V::Mask);

/// pool_rows<V, 0..kMaxVecs - 1, Weighted, T>, indexed by NVLast.
template <class V, bool Weighted, class T, std::size_t... I>
struct RowsTable {
  static constexpr RowsFn<V, T> fns[] = {&pool_rows<V, static_cast<int>(I), Weighted, T>...};
};
template <class V, bool Weighted, class T, std::size_t... I>
constexpr const RowsFn<V, T>* rows_table(std::index_sequence<I...>) {
  return RowsTable<V, Weighted, T, I...>::fns;
}

/// The whole kernel: per bag, passes of up to kMaxVecs vectors over the columns; then the scalar
/// tail columns when V has no masked tail.
template <class V, class T>
void pool_simd(const T* table, const PoolJob& job) {
  constexpr std::size_t kBlock = V::kMaxVecs * V::kLanes;
  const std::size_t vec_dim = V::kMaskedTail ? job.dim : job.dim / V::kLanes * V::kLanes;
  const RowsFn<V, T>* fns = job.weights != nullptr
                                ? rows_table<V, true, T>(std::make_index_sequence<V::kMaxVecs>{})
                                : rows_table<V, false, T>(std::make_index_sequence<V::kMaxVecs>{});
  if (vec_dim > 0) {
    const std::size_t full = vec_dim / kBlock, width = vec_dim % kBlock;
    const std::size_t vecs = (width + V::kLanes - 1) / V::kLanes;
    const std::size_t rem = width % V::kLanes;
    fns[vecs](table, job, full, rem == 0 ? V::full_mask() : V::tail_mask(rem));
  }
  if (vec_dim < job.dim) pool_columns_scalar(table, job, vec_dim, job.dim);
}

}  // namespace
}  // namespace tilecomm::kernels
