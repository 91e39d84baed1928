#pragma once
// visit_dtype: the one switch from a DataType to its C++ element type, shared by the library, its
// tests and its benchmarks.

#include <cstdint>
#include <string>

#include "tilecomm/error.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm::detail {

/// Calls f(T{}) with the element type T of `t` (float, double, std::int32_t, std::int64_t or
/// bfloat16) and returns what it returns. Throws Error(InvalidArgument) for a value that is not a
/// DataType.
template <class F>
decltype(auto) visit_dtype(DataType t, F&& f) {
  switch (t) {
    case DataType::Float32:
      return f(float{});
    case DataType::Float64:
      return f(double{});
    case DataType::Int32:
      return f(std::int32_t{});
    case DataType::Int64:
      return f(std::int64_t{});
    case DataType::BFloat16:
      return f(bfloat16{});
  }
  throw Error(ErrorCode::InvalidArgument,
              "visit_dtype: invalid DataType value " + std::to_string(static_cast<int>(t)));
}

}  // namespace tilecomm::detail
