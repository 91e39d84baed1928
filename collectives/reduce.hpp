#pragma once
// Element-wise reduction kernels. Inputs are combined in the order given (callers pass them in rank
// order), so results are deterministic. bfloat16 accumulates in float32 and rounds once.
//
// One scalar reference and one vector kernel per ISA (reduce_avx2.cpp, reduce_avx512.cpp, each
// compiled with its own -m flags); reduce_n uses the one for tilecomm::active_isa(). Every kernel
// combines each element in the same order with the same operations, so all of them return
// bitwise-identical results (tests/collectives/test_reduce_isa.cpp checks it).

#include <cstddef>

#include "tilecomm/isa.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm::detail {

/// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], for i < count, left to right for each
/// element (Sum: (s0 + s1) + s2 ...; Max/Min: std::max/std::min(acc, s), so a NaN in acc stays and
/// a NaN in s is dropped). Integers wrap around; bfloat16 is accumulated in float32 and rounded
/// once to nearest even when stored. dst may alias srcs[0] (only srcs[0]); no other overlap. n
/// >= 1. Uses the kernel of tilecomm::active_isa() (chosen on the first call).
void reduce_n(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
              ReduceOp op);

/// The signature of one ISA's reduce_n.
using ReduceKernel = void (*)(void* dst, const void* const* srcs, int n, std::size_t count,
                              DataType dtype, ReduceOp op);

/// reduce_n's contract, portable C++: the reference the vector kernels are tested against.
void reduce_n_scalar(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                     ReduceOp op);
/// reduce_n's contract with AVX2 (8 floats a register). Only call when the CPU has AVX2 + FMA.
void reduce_n_avx2(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                   ReduceOp op);
/// reduce_n's contract with AVX-512 F/BW/VL (16 floats a register). Only call when the CPU has
/// them.
void reduce_n_avx512(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                     ReduceOp op);

/// The kernel for `isa` (the scalar one off x86-64). Does not check that the CPU can run it.
ReduceKernel reduce_kernel(Isa isa) noexcept;

/// dst[i] = dst[i] op src[i].
inline void reduce_into(void* dst, const void* src, std::size_t count, DataType dtype,
                        ReduceOp op) {
  const void* srcs[2] = {dst, src};
  reduce_n(dst, srcs, 2, count, dtype, op);
}

}  // namespace tilecomm::detail
