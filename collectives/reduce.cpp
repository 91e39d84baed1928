#include "collectives/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "collectives/visit_dtype.hpp"

namespace tilecomm::detail {
namespace {

template <class Acc>
struct Sum {
  static Acc apply(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>) {  // wrap around like MPI, without signed overflow
      using U = std::make_unsigned_t<Acc>;
      return static_cast<Acc>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
template <class Acc>
struct Max {
  static Acc apply(Acc a, Acc b) { return std::max(a, b); }
};
template <class Acc>
struct Min {
  static Acc apply(Acc a, Acc b) { return std::min(a, b); }
};

template <class T, class Acc>
Acc load(const T& v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return v;
}
template <class T, class Acc>
T store(Acc v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(v);
  else
    return v;
}

// Blocks of elements so the accumulator stays in registers/L1 while sources stream through.
template <class T, class Acc, template <class> class Op>
void reduce_typed(void* dst_, const void* const* srcs_, int n, std::size_t count) {
  T* dst = static_cast<T*>(dst_);
  constexpr std::size_t kBlock = 1024;
  Acc acc[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t m = std::min(kBlock, count - base);
    const T* s0 = static_cast<const T*>(srcs_[0]) + base;
    for (std::size_t i = 0; i < m; ++i)
      acc[i] = load<T, Acc>(s0[i]);
    for (int s = 1; s < n; ++s) {
      const T* src = static_cast<const T*>(srcs_[s]) + base;
      for (std::size_t i = 0; i < m; ++i)
        acc[i] = Op<Acc>::apply(acc[i], load<T, Acc>(src[i]));
    }
    for (std::size_t i = 0; i < m; ++i)
      dst[base + i] = store<T, Acc>(acc[i]);
  }
}

template <class T, class Acc>
void by_op(void* dst, const void* const* srcs, int n, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return reduce_typed<T, Acc, Sum>(dst, srcs, n, count);
    case ReduceOp::Max:
      return reduce_typed<T, Acc, Max>(dst, srcs, n, count);
    case ReduceOp::Min:
      return reduce_typed<T, Acc, Min>(dst, srcs, n, count);
  }
}

}  // namespace

void reduce_n_scalar(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                     ReduceOp op) {
  visit_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    using Acc = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;  // bfloat16: in float32
    by_op<T, Acc>(dst, srcs, n, count, op);
  });
}

ReduceKernel reduce_kernel(Isa isa) noexcept {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::Avx512:
      return reduce_n_avx512;
    case Isa::Avx2:
      return reduce_n_avx2;
    case Isa::Scalar:
      break;
  }
#endif
  return reduce_n_scalar;
}

void reduce_n(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
              ReduceOp op) {
  static const ReduceKernel kernel = reduce_kernel(active_isa());
  kernel(dst, srcs, n, count, dtype, op);
}

}  // namespace tilecomm::detail
