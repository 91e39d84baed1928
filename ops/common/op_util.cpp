#include "ops/common/op_util.hpp"

#include <cblas.h>

#include <fmt/format.h>
#include <algorithm>
#include <mutex>

#include "tilecomm/error.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm {

std::string_view to_string(Mode mode) noexcept {
  switch (mode) {
    case Mode::Sequential:
      return "sequential";
    case Mode::Shaped:
      return "shaped";
    case Mode::Fused:
      return "fused";
    case Mode::Auto:
      return "auto";
  }
  return "?";
}

std::string_view to_string(FusedAlgorithm algorithm) noexcept {
  switch (algorithm) {
    case FusedAlgorithm::Auto:
      return "auto";
    case FusedAlgorithm::OneShot:
      return "one_shot";
    case FusedAlgorithm::TwoShot:
      return "two_shot";
  }
  return "?";
}

FusedAlgorithm parse_fused_algorithm(std::string_view name) {
  for (FusedAlgorithm a : {FusedAlgorithm::Auto, FusedAlgorithm::OneShot, FusedAlgorithm::TwoShot})
    if (name == to_string(a)) return a;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("fused_algorithm '{}' is not one of: auto, one_shot, two_shot", name));
}

std::string_view to_string(ShapedPolicy policy) noexcept {
  switch (policy) {
    case ShapedPolicy::Lds:
      return "lds";
    case ShapedPolicy::CuMask:
      return "cu_mask";
    case ShapedPolicy::NonBlocking:
      return "nonblocking";
  }
  return "?";
}

ShapedPolicy parse_shaped_policy(std::string_view name) {
  for (ShapedPolicy p : {ShapedPolicy::Lds, ShapedPolicy::CuMask, ShapedPolicy::NonBlocking})
    if (name == to_string(p)) return p;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("shaped policy '{}' is not one of: lds, cu_mask, nonblocking", name));
}

Mode parse_mode(std::string_view name) {
  for (Mode m : {Mode::Sequential, Mode::Shaped, Mode::Fused, Mode::Auto})
    if (name == to_string(m)) return m;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("mode '{}' is not one of: sequential, shaped, fused, auto", name));
}

namespace detail {

std::size_t shaped_lds_bytes(const Device& device, int free_cus) {
  if (free_cus <= 0) return 0;
  const int c = device.num_cus(), s = device.wg_slots_per_cu();
  const int r = std::max(1, s - (free_cus * s + c - 1) / c);
  return std::min(device.lds_bytes_per_cu(), device.lds_bytes_per_cu() / (r + 1) + 1);
}

void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace detail
}  // namespace tilecomm
