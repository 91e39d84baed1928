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

/// Prefetches the `bytes` bytes at p into L1 (every cache line they touch).
inline void prefetch_bytes(const void* p, std::size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (std::size_t off = 0; off < bytes; off += 64)
    _mm_prefetch(c + off, _MM_HINT_T0);
  _mm_prefetch(c + bytes - 1, _MM_HINT_T0);
}

/// Pools columns [col0, col0 + NV * kLanes) (the last vector masked by `tail`) of every bag, with
/// NV accumulators in registers; rows job.prefetch indices ahead are prefetched (within the
/// indices of this call's bags).
template <class V, int NV, bool Weighted, class T>
void pool_block(const T* table, const PoolJob& job, std::size_t col0, typename V::Mask tail,
                std::size_t width) {
  // No prefetch: last = 0, so `ahead < last` never holds.
  const std::int64_t last = job.prefetch > 0 ? job.offsets[job.bag1] : 0;
  const auto distance = static_cast<std::int64_t>(job.prefetch);
  const std::size_t dim = job.dim;
  float* dst = job.dst + col0;
  for (std::size_t g = job.bag0; g < job.bag1; ++g, dst += job.stride) {
    typename V::Reg acc[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      acc[v] = V::zero();
    const std::int64_t begin = job.offsets[g], end = job.offsets[g + 1];
    for (std::int64_t j = begin; j < end; ++j) {
      const std::int64_t ahead = j + distance;
      if (ahead < last)
        prefetch_bytes(table + static_cast<std::size_t>(job.indices[ahead]) * dim + col0,
                       width * sizeof(T));
      const T* row = table + static_cast<std::size_t>(job.indices[j]) * dim + col0;
      if constexpr (Weighted) {
        const typename V::Reg w = V::set1(job.weights[j]);
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          const typename V::Mask m = v + 1 < NV ? V::full_mask() : tail;
          acc[v] = V::add(acc[v], V::mul(w, V::load(row + v * V::kLanes, m)));
        }
      } else {
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          const typename V::Mask m = v + 1 < NV ? V::full_mask() : tail;
          acc[v] = V::add(acc[v], V::load(row + v * V::kLanes, m));
        }
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
}

template <class V, class T>
using BlockFn = void (*)(const T*, const PoolJob&, std::size_t, typename V::Mask, std::size_t);

/// pool_block<V, 1..kMaxVecs, Weighted, T>, indexed by NV - 1.
template <class V, bool Weighted, class T, std::size_t... I>
struct BlockTable {
  static constexpr BlockFn<V, T> fns[] = {&pool_block<V, static_cast<int>(I) + 1, Weighted, T>...};
};
template <class V, bool Weighted, class T, std::size_t... I>
constexpr const BlockFn<V, T>* block_table(std::index_sequence<I...>) {
  return BlockTable<V, Weighted, T, I...>::fns;
}

/// The whole kernel: passes of up to kMaxVecs vectors over dim, then the scalar tail columns when
/// V has no masked tail.
template <class V, class T>
void pool_simd(const T* table, const PoolJob& job) {
  constexpr std::size_t kBlock = V::kMaxVecs * V::kLanes;
  const std::size_t vec_dim = V::kMaskedTail ? job.dim : job.dim / V::kLanes * V::kLanes;
  const BlockFn<V, T>* fns =
      job.weights != nullptr ? block_table<V, true, T>(std::make_index_sequence<V::kMaxVecs>{})
                             : block_table<V, false, T>(std::make_index_sequence<V::kMaxVecs>{});
  for (std::size_t col0 = 0; col0 < vec_dim; col0 += kBlock) {
    const std::size_t width = vec_dim - col0 < kBlock ? vec_dim - col0 : kBlock;
    const std::size_t vecs = (width + V::kLanes - 1) / V::kLanes;
    const std::size_t rem = width % V::kLanes;
    fns[vecs - 1](table, job, col0, rem == 0 ? V::full_mask() : V::tail_mask(rem), width);
  }
  if (vec_dim < job.dim) pool_columns_scalar(table, job, vec_dim, job.dim);
}

}  // namespace
}  // namespace tilecomm::kernels
