#pragma once
// Per-tile ready flags: the producer signals with release, the consumer waits with acquire.
// Private to the library (the fused operators, the MPI proxy) and its tests.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tilecomm {

struct WaitPolicy;

/// An array of 32-bit flags, each on its own cache line by default. Flags hold epoch values: a
/// producer signals tile i of call e with signal(i, e); a consumer waits for value >= e (compared
/// modulo 2^32), so flags need no reset between calls. reset() exists for code that counts.
/// Storage may be owned, or borrowed memory such as an MPI shared-memory window, which makes the
/// flags usable between processes (32-bit atomics are lock-free and address-free on our targets).
class TileFlags {
 public:
  /// uint32 slots between consecutive flags (16 = one 64-byte cache line each).
  static constexpr std::size_t kDefaultStride = 16;

  TileFlags() = default;
  /// `count` flags in owned, zeroed storage.
  explicit TileFlags(std::size_t count, std::size_t stride = kDefaultStride);
  /// `count` flags in borrowed `memory` (4-byte aligned, at least bytes_for(count, stride) bytes).
  /// The memory is not cleared: the owner zeroes it once before any process uses it.
  TileFlags(void* memory, std::size_t count, std::size_t stride = kDefaultStride);

  /// Bytes needed for `count` flags.
  static std::size_t bytes_for(std::size_t count, std::size_t stride = kDefaultStride) {
    return count * stride * sizeof(std::uint32_t);
  }
  std::size_t size() const { return count_; }

  /// Sets flag i to `value` with release order: writes before it are visible to a waiter.
  void signal(std::size_t i, std::uint32_t value = 1) noexcept {
    ref(i).store(value, std::memory_order_release);
  }
  /// Adds `delta` to flag i with release order (for counting contributions); returns the new value.
  std::uint32_t add(std::size_t i, std::uint32_t delta = 1) noexcept {
    return ref(i).fetch_add(delta, std::memory_order_acq_rel) + delta;
  }
  /// Current value with acquire order.
  std::uint32_t load(std::size_t i) const noexcept {
    return ref(i).load(std::memory_order_acquire);
  }
  /// True when flag i has reached `value` (modulo 2^32 comparison), with acquire order.
  bool test(std::size_t i, std::uint32_t value) const noexcept {
    return static_cast<std::int32_t>(load(i) - value) >= 0;
  }
  /// Waits (backing off) until test(i, value). Throws Error(Timeout) after `timeout_s` seconds
  /// (< 0: the configured TILECOMM_TIMEOUT_S), naming `what`, the flag and both values.
  void wait(std::size_t i, std::uint32_t value, double timeout_s = -1.0,
            const char* what = "tile flag") const;
  /// The same, pausing between polls as `policy` says (runtime/wait.hpp).
  void wait(std::size_t i, std::uint32_t value, double timeout_s, const char* what,
            const WaitPolicy& policy) const;
  /// Stores `value` in every flag (relaxed; publish with a barrier or a later release).
  void reset(std::uint32_t value = 0) noexcept;

 private:
  std::atomic_ref<std::uint32_t> ref(std::size_t i) const noexcept {
    return std::atomic_ref<std::uint32_t>(base_[i * stride_]);
  }
  std::unique_ptr<std::uint32_t[]> owned_;
  std::uint32_t* base_ = nullptr;
  std::size_t count_ = 0;
  std::size_t stride_ = kDefaultStride;
};

}  // namespace tilecomm
