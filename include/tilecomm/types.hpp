#pragma once
/// \file types.hpp
/// Element types and reduction operators of the collectives.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tilecomm {

/// Element types. BFloat16 is stored as 16 bits and reduced in float32 (rounded once, to nearest
/// even, when stored).
enum class DataType { Float32, Float64, Int32, Int64, BFloat16 };

/// Reduction operators.
enum class ReduceOp { Sum, Max, Min };

/// Bytes per element.
constexpr std::size_t size_of(DataType t) {
  switch (t) {
    case DataType::Float32:
      return 4;
    case DataType::Float64:
      return 8;
    case DataType::Int32:
      return 4;
    case DataType::Int64:
      return 8;
    case DataType::BFloat16:
      return 2;
  }
  return 0;
}

std::string_view to_string(DataType t) noexcept;
std::string_view to_string(ReduceOp op) noexcept;

/// A bfloat16 value: the upper 16 bits of an IEEE float32.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  /// Rounds to nearest even (NaN stays NaN).
  explicit bfloat16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<std::uint16_t>((u >> 16) | 0x40u);
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<std::uint16_t>(u >> 16);
    }
  }
  explicit operator float() const {
    std::uint32_t u = std::uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// The DataType of a C++ element type (float, double, int32_t, int64_t, bfloat16).
template <class T>
constexpr DataType data_type_of();
template <>
constexpr DataType data_type_of<float>() {
  return DataType::Float32;
}
template <>
constexpr DataType data_type_of<double>() {
  return DataType::Float64;
}
template <>
constexpr DataType data_type_of<std::int32_t>() {
  return DataType::Int32;
}
template <>
constexpr DataType data_type_of<std::int64_t>() {
  return DataType::Int64;
}
template <>
constexpr DataType data_type_of<bfloat16>() {
  return DataType::BFloat16;
}

}  // namespace tilecomm
