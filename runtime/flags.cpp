#include "runtime/flags.hpp"

#include <fmt/format.h>

#include "runtime/wait.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {

TileFlags::TileFlags(std::size_t count, std::size_t stride)
    : owned_(new std::uint32_t[count * stride]()),
      base_(owned_.get()),
      count_(count),
      stride_(stride) {
  if (stride == 0) throw Error(ErrorCode::InvalidArgument, "TileFlags: stride = 0");
}

TileFlags::TileFlags(void* memory, std::size_t count, std::size_t stride)
    : base_(static_cast<std::uint32_t*>(memory)), count_(count), stride_(stride) {
  if (stride == 0) throw Error(ErrorCode::InvalidArgument, "TileFlags: stride = 0");
  if (memory == nullptr && count > 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("TileFlags: memory = null, count = {}", count));
  if (reinterpret_cast<std::uintptr_t>(memory) % alignof(std::uint32_t) != 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("TileFlags: memory = {} is not 4-byte aligned", memory));
}

void TileFlags::wait(std::size_t i, std::uint32_t value, double timeout_s, const char* what) const {
  wait(i, value, timeout_s, what, WaitPolicy::backoff());
}

void TileFlags::wait(std::size_t i, std::uint32_t value, double timeout_s, const char* what,
                     const WaitPolicy& policy) const {
  if (i >= count_)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("TileFlags::wait: index {} out of range (size {})", i, count_));
  wait_until(
      [&] { return test(i, value); }, timeout_s < 0 ? default_timeout_s() : timeout_s,
      [&] { return fmt::format("{} {} did not reach {} (it holds {})", what, i, value, load(i)); },
      policy);
}

void TileFlags::reset(std::uint32_t value) noexcept {
  for (std::size_t i = 0; i < count_; ++i)
    ref(i).store(value, std::memory_order_relaxed);
}

}  // namespace tilecomm
