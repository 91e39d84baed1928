#pragma once
/// \file trace.hpp
/// A timeline of workgroups and user marks, exported as Chrome trace JSON (Perfetto opens it).

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tilecomm {

/// One timeline entry. Times are microseconds of CLOCK_MONOTONIC, so traces of ranks on one host
/// line up when merged.
struct TraceEvent {
  std::string name;          ///< kernel name, or the mark's name ("tile sent", ...)
  std::string category;      ///< "wg" for workgroups, else the caller's category
  char phase = 'X';          ///< 'X' complete (has a duration) or 'i' instant
  double ts_us = 0;          ///< start
  double dur_us = 0;         ///< duration ('X' only)
  int lane = 0;              ///< thread lane: cu * slots + slot, or the caller's lane
  int cu = -1;               ///< compute unit, -1 when not on a CU
  std::int64_t wg = -1;      ///< workgroup id, -1 when none
  std::int64_t stream = -1;  ///< stream id, -1 when none
  std::int64_t tile = -1;    ///< tile id of a mark, -1 when none
  std::int64_t peer = -1;    ///< peer rank of a mark, -1 when none
  std::int64_t bytes = -1;   ///< payload of a mark, -1 when none
};

/// Thread-safe event recorder. Recording is a no-op while disabled.
class Tracer {
 public:
  explicit Tracer(bool enabled = false) : enabled_(enabled) {}
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// May be called while WGs run (they read the flag once per WG).
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  /// Process id and name written into the trace (use the MPI rank so merged traces separate).
  void set_process(int pid, std::string name);

  /// Microseconds now, on the trace clock.
  static double now_us();
  void record(TraceEvent event);
  /// An instant mark at now.
  void mark(std::string_view name, std::string_view category, int lane, std::int64_t tile = -1,
            std::int64_t peer = -1, std::int64_t bytes = -1);

  std::vector<TraceEvent> events() const;
  void clear();
  /// The events as a Chrome trace ({"traceEvents": [...]}).
  std::string to_chrome_json() const;
  /// Writes to_chrome_json() to `path`; throws Error(SystemError) naming the path on failure.
  void write_chrome_json(const std::string& path) const;

 private:
  std::atomic<bool> enabled_;
  int pid_ = 0;
  std::string process_name_ = "tilecomm";
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
};

}  // namespace tilecomm
