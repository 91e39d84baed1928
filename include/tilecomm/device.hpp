#pragma once
/// \file device.hpp
/// The CPU device model: compute units (CUs) made of worker threads, kernels run as grids of
/// workgroups (WGs), per-CU LDS capacity that limits how many WGs are resident, priority streams,
/// events and persistent kernels.
///
/// Ordering rules (as on a GPU):
///  - commands on one stream run in issue order; a kernel starts after the previous command ends;
///  - commands on different streams run concurrently and share CUs;
///  - when a WG slot frees, it goes to the highest-priority stream whose next WG fits the CU's free
///    LDS and whose CU mask includes the CU (equal priorities: the kernel launched first);
///  - an exception thrown by a WG cancels that kernel's undispatched WGs; the first one is rethrown
///    by the next host-side wait (synchronize()) and the device stays usable.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tilecomm/runtime_config.hpp"
#include "tilecomm/trace.hpp"

namespace tilecomm {

class Device;
namespace detail {
struct DeviceImpl;
struct StreamState;
struct EventState;
}  // namespace detail

/// A 1-D (y == 1) or 2-D grid of workgroups.
struct Dim2 {
  std::size_t x = 1;
  std::size_t y = 1;
};

/// What a workgroup sees while it runs. Valid only during the kernel call.
struct WorkgroupContext {
  std::size_t id;            ///< linear id: y * grid.x + x
  std::size_t x, y;          ///< position in the grid
  Dim2 grid;                 ///< the launch grid
  int cu;                    ///< compute unit it runs on
  int slot;                  ///< resident slot on that CU
  std::span<std::byte> lds;  ///< this WG's LDS scratch (lds_bytes of the launch, 64-byte aligned)
  Device* device;            ///< the device, e.g. for device->tracer()

  /// Records an instant mark on this WG's lane (no-op when tracing is off).
  void mark(const char* name, std::int64_t tile = -1, std::int64_t peer = -1,
            std::int64_t bytes = -1) const;
};

using KernelFn = std::function<void(const WorkgroupContext&)>;
/// Body of a persistent kernel: called once per task, in the caller's task order.
using TaskFn = std::function<void(const WorkgroupContext&, std::size_t task)>;

/// Launch parameters of a kernel.
struct LaunchParams {
  std::string name = "kernel";  ///< shown in traces and errors
  Dim2 grid;                    ///< number of WGs; neither dimension may be 0
  std::size_t lds_bytes = 0;    ///< LDS per WG; must not exceed the per-CU capacity
};

/// Launch parameters of a persistent kernel.
struct PersistentParams {
  std::string name = "persistent";
  std::size_t num_wgs = 0;    ///< 0: one WG per CU the stream may use (see Stream::cu_mask)
  std::size_t lds_bytes = 0;  ///< LDS per WG
};

/// A point on a stream. Cheap to copy (shared handle); a default Event is complete. A recorded
/// Event must not outlive its Device.
class Event {
 public:
  Event() = default;
  /// True when the stream has passed the point.
  bool query() const;
  /// Blocks (backing off, then sleeping) until query(); rethrows the device's first WG error.
  void synchronize() const;

 private:
  friend class Stream;
  std::shared_ptr<detail::EventState> state_;
  std::uint64_t target_ = 0;
};

/// An in-order queue of kernels and events on a Device. Cheap to copy (shared handle); every copy
/// refers to the Device, which must outlive it.
class Stream {
 public:
  /// Stream priority: larger runs first.
  static constexpr int kNormal = 0;
  static constexpr int kHigh = 1;

  int priority() const;
  int id() const;
  /// The CUs this stream's kernels may run on, ascending (every CU unless created with a mask).
  std::vector<int> cu_mask() const;

  /// Enqueues `grid.x * grid.y` calls of `fn`, one per WG. Throws Error(InvalidArgument) naming the
  /// parameter for an empty or overflowing grid, an LDS request above the CU capacity, or no fn.
  void launch(const LaunchParams& params, KernelFn fn);
  /// Enqueues a persistent kernel: num_wgs WGs that take tasks from `task_order` front to back
  /// (a shared counter, so tasks *start* in exactly that order) until none remain.
  void launch_persistent(const PersistentParams& params, std::vector<std::size_t> task_order,
                         TaskFn fn);
  /// Records an event at the current end of the stream.
  Event record();
  /// Later commands on this stream start only after `event` completes.
  void wait(const Event& event);
  /// Blocks until every command issued so far has finished; rethrows the first WG error.
  void synchronize();

 private:
  friend class Device;
  friend struct detail::DeviceImpl;
  std::shared_ptr<detail::StreamState> state_;
};

/// Counters for tests and tuning.
struct DeviceStats {
  std::uint64_t kernels = 0;                ///< kernels completed
  std::uint64_t workgroups = 0;             ///< WGs executed
  std::vector<int> max_resident;            ///< per CU: the most WGs resident at once
  std::vector<std::size_t> max_lds_in_use;  ///< per CU: the most LDS bytes in use at once
};

/// A CPU "GPU": config.num_cus CUs, each with wg_slots_per_cu worker threads sharing one LDS pool.
/// Thread-safe: any thread may launch and wait. Do not wait from inside a WG for work that needs
/// the WG's own slot. An idle device sleeps (no CPU use).
///
/// Lifetime: a Device must outlive every Stream and Event made on it, every kernel launched on it
/// (its destructor waits for queued work: launch nothing once it has begun), and every operator
/// context built on it (GemvAllReduce, EmbeddingAllToAll and GemmAllToAll keep a Device&). Destroy
/// those first.
class Device {
 public:
  /// Throws Error(InvalidArgument) naming the field for num_cus < 0, wg_slots_per_cu < 1, or an
  /// affinity mask with no cores.
  explicit Device(RuntimeConfig config = RuntimeConfig::from_env());
  /// Waits for all work (errors are dropped) and joins the threads.
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int num_cus() const;
  int wg_slots_per_cu() const;
  std::size_t lds_bytes_per_cu() const;
  /// Whether CU threads are pinned to cores (false when the mask has fewer cores than CUs).
  bool pinned() const;
  const RuntimeConfig& config() const;

  /// The stream created with the device (priority kNormal).
  Stream& default_stream();
  /// A new stream with `priority` (larger runs first).
  Stream create_stream(int priority = Stream::kNormal);
  /// A new stream whose kernels run only on the CUs listed in `cu_mask` (HIP's
  /// hipExtStreamCreateWithCUMask): its WGs wait for a slot on those CUs even when others are
  /// idle, so a pair of streams with disjoint masks partitions the device (a dedicated
  /// communication core). Priorities still order streams competing for one CU. An empty mask means
  /// every CU; a CU outside 0..num_cus()-1 raises Error(InvalidArgument) naming it. Duplicates
  /// are ignored.
  Stream create_stream(int priority, std::span<const int> cu_mask);
  /// Blocks until every stream is idle; rethrows the first WG error.
  void synchronize();

  DeviceStats stats() const;
  void reset_stats();
  Tracer& tracer();

 private:
  friend class Stream;
  friend class Event;
  std::unique_ptr<detail::DeviceImpl> impl_;
};

}  // namespace tilecomm
