#pragma once
// The loop every vector reduce kernel shares (included only by reduce_avx2.cpp and
// reduce_avx512.cpp). Each of those files defines, in an unnamed namespace, one lane type per
// DataType (D below) built on its own intrinsics, so every instantiation of these templates is
// local to that file and compiled with that file's -m flags: no inline function compiled for
// AVX-512 can be picked by the linker for code that runs on a narrower CPU. For the same reason
// this header calls no inline library functions (std::min, ...), only memcpy.
//
// A lane type D provides: T (element type), Reg (register of accumulators), kLanes (elements per
// Reg), Reg load(const T*), void store(T*, Reg) (unaligned) and Reg apply<ReduceOp>(Reg acc, Reg x)
// = acc op x lane by lane, with the scalar kernel's semantics (reduce.cpp).

#include <cstddef>
#include <cstring>

#include "tilecomm/types.hpp"

namespace tilecomm::detail::simd {

/// One full register of elements at i: acc = s0[i..] op s1[i..] op ... (left to right).
template <class D, ReduceOp Op>
typename D::Reg reduce_reg(const void* const* srcs, int n, std::size_t i) {
  using T = typename D::T;
  typename D::Reg acc = D::load(static_cast<const T*>(srcs[0]) + i);
  for (int s = 1; s < n; ++s)
    acc = D::template apply<Op>(acc, D::load(static_cast<const T*>(srcs[s]) + i));
  return acc;
}

/// The last m < kLanes elements at i, through a zero-padded register-sized buffer (the padding
/// lanes are computed and dropped).
template <class D, ReduceOp Op>
void reduce_tail(void* dst, const void* const* srcs, int n, std::size_t i, std::size_t m) {
  using T = typename D::T;
  T buf[D::kLanes] = {};
  std::memcpy(buf, static_cast<const T*>(srcs[0]) + i, m * sizeof(T));
  typename D::Reg acc = D::load(buf);
  for (int s = 1; s < n; ++s) {
    std::memcpy(buf, static_cast<const T*>(srcs[s]) + i, m * sizeof(T));
    acc = D::template apply<Op>(acc, D::load(buf));
  }
  D::store(buf, acc);
  std::memcpy(static_cast<T*>(dst) + i, buf, m * sizeof(T));
}

/// reduce_n for one element type and operator: four registers (4 * kLanes elements) per step, all
/// sources read before dst is written (so dst may alias srcs[0]), then single registers, then the
/// tail.
template <class D, ReduceOp Op>
void reduce_loop(void* dst_, const void* const* srcs, int n, std::size_t count) {
  using T = typename D::T;
  using Reg = typename D::Reg;
  constexpr std::size_t L = D::kLanes;
  T* dst = static_cast<T*>(dst_);
  const T* s0 = static_cast<const T*>(srcs[0]);
  std::size_t i = 0;
  for (; i + 4 * L <= count; i += 4 * L) {
    Reg a0 = D::load(s0 + i), a1 = D::load(s0 + i + L);
    Reg a2 = D::load(s0 + i + 2 * L), a3 = D::load(s0 + i + 3 * L);
    for (int s = 1; s < n; ++s) {
      const T* p = static_cast<const T*>(srcs[s]) + i;
      a0 = D::template apply<Op>(a0, D::load(p));
      a1 = D::template apply<Op>(a1, D::load(p + L));
      a2 = D::template apply<Op>(a2, D::load(p + 2 * L));
      a3 = D::template apply<Op>(a3, D::load(p + 3 * L));
    }
    D::store(dst + i, a0);
    D::store(dst + i + L, a1);
    D::store(dst + i + 2 * L, a2);
    D::store(dst + i + 3 * L, a3);
  }
  for (; i + L <= count; i += L)
    D::store(dst + i, reduce_reg<D, Op>(srcs, n, i));
  if (i < count) reduce_tail<D, Op>(dst, srcs, n, i, count - i);
}

/// reduce_loop for the operator `op`.
template <class D>
void reduce_op(void* dst, const void* const* srcs, int n, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return reduce_loop<D, ReduceOp::Sum>(dst, srcs, n, count);
    case ReduceOp::Max:
      return reduce_loop<D, ReduceOp::Max>(dst, srcs, n, count);
    case ReduceOp::Min:
      return reduce_loop<D, ReduceOp::Min>(dst, srcs, n, count);
  }
}

}  // namespace tilecomm::detail::simd
