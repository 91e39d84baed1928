#pragma once
// Private state of the device model. The scheduler (scheduler.cpp) owns the rules; device.cpp holds
// the public Device/Stream/Event surface.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/wait.hpp"
#include "tilecomm/device.hpp"

namespace tilecomm::detail {

struct StreamState;

struct KernelState {
  std::string name;
  Dim2 grid;
  std::size_t total = 0;  // WGs to run; lowered to `next` when the kernel is cancelled by an error
  std::size_t lds = 0;    // LDS bytes per WG
  KernelFn fn;
  std::size_t next = 0;   // next WG to dispatch
  std::size_t done = 0;   // WGs finished
  std::uint64_t seq = 0;  // launch order, breaks ties between equal priorities
  StreamState* stream = nullptr;
};

struct EventState {
  DeviceImpl* dev = nullptr;
  std::atomic<std::uint64_t> completed{0};
};

struct Command {
  enum class Kind { Kernel, Record, Wait } kind;
  std::shared_ptr<KernelState> kernel;
  std::shared_ptr<EventState> event;
};

struct StreamState {
  DeviceImpl* dev = nullptr;
  int id = 0;
  int priority = 0;
  std::vector<int> cu_mask;   // the CUs this stream's kernels may use, ascending; all of them
  std::vector<char> allowed;  // when the stream has no mask; allowed[c]: CU c is in the mask
  bool allows(int cu) const { return allowed.empty() || allowed[cu]; }
  std::deque<Command> queue;             // guarded by DeviceImpl::mu
  std::atomic<std::uint64_t> issued{0};  // commands enqueued
  std::atomic<std::uint64_t> finished{0};
};

// A WG placed on a worker: which kernel, which WG, where its LDS lives.
struct Task {
  KernelState* kernel = nullptr;
  std::size_t wg = 0;
  std::size_t lds_offset = 0;
};

struct Worker {
  int cu = 0;
  int slot = 0;
  int lane = 0;
  bool idle = true;  // guarded by mu
  Task task;         // written under mu before mailbox becomes kHasTask
  // When the thread last woke from its futex (steady clock, ns): how long it has run since, which
  // the scheduler reads for its own thread only.
  std::int64_t awake_since_ns = 0;
  // When it last gave its core away (sched_yield) to a high-priority WG of its CU.
  std::int64_t yielded_ns = 0;
  std::atomic<std::uint32_t> mailbox{0};  // kEmpty / kHasTask / kStop
  std::thread thread;
  static constexpr std::uint32_t kEmpty = 0, kHasTask = 1, kStop = 2;
};

struct AlignedBytes {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

struct ComputeUnit {
  std::unique_ptr<std::byte[], AlignedBytes> lds;
  std::vector<std::pair<std::size_t, std::size_t>> allocs;  // (offset, size), sorted by offset
  int resident = 0;
  // Of them, WGs of streams above normal priority; since when at least one has been (steady ns).
  int resident_high = 0;
  std::int64_t high_since_ns = 0;
  std::size_t lds_used = 0;
  int max_resident = 0;
  std::size_t max_lds_used = 0;
  int cpu = -1;  // core it is pinned to, -1 when unpinned
};

/// A worker that has run this long without sleeping is near the end of its OS time slice (the
/// kernel here preempts at 4 ms ticks): a WG of a high-priority stream then goes to a sleeping
/// worker, which the OS runs on waking, rather than to it (DeviceImpl::schedule).
inline constexpr std::int64_t kNearSliceEndNs = 1'000'000;

/// A worker about to run a normal WG gives its core away (sched_yield) when a WG of a stream above
/// normal priority has been resident on its CU this long, and again every this long while one is.
/// A high-priority WG that polls and yields (a collective across nodes: MPI's yield when idle)
/// otherwise got the core back only when the compute thread's time slice ended, a 4 ms tick here
/// (docs/runtime.md, "Time slices on a shared core"). Shorter collectives never see a yield.
inline constexpr std::int64_t kYieldEveryNs = 300'000;

/// Timer slack of the device's worker threads (PR_SET_TIMERSLACK), ns: their sleeps last what they
/// ask for, not 50 us more.
inline constexpr unsigned long kWorkerTimerSlackNs = 1000;

/// The CUs a Device takes when RuntimeConfig::num_cus = 0: all `mask_cores` cores of its affinity
/// mask, unless `node_ranks` ranks with such masks cannot all fit on the node's `online` cores
/// (their masks overlap): then an equal share, max(1, min(mask_cores, online / node_ranks)).
int default_cus(int mask_cores, int online, int node_ranks);

struct DeviceImpl {
  DeviceImpl(Device* owner, RuntimeConfig config);
  ~DeviceImpl();

  // --- all of these run with `mu` held ---
  // Pops finished commands at the heads of all streams; returns true if a command finished.
  bool advance_all();
  // Places ready WGs on idle slots, highest priority first. Workers other than `self` that got a
  // task are appended to `wake`.
  void schedule(Worker* self, std::vector<Worker*>& wake);
  // First-fit LDS offset on `cu` for `bytes`, or SIZE_MAX when it does not fit.
  std::size_t find_lds(const ComputeUnit& cu, std::size_t bytes) const;
  void enqueue(StreamState& s, Command c, std::vector<Worker*>& wake);

  // --- these take `mu` themselves ---
  void worker_loop(Worker& w);
  void run_task(Worker& w, const Task& t, std::exception_ptr& error);
  void finish_task(Worker& w, const Task& t, std::exception_ptr error);
  // Blocks until `done()`: polls for spin_us (WaitPolicy::idle), then sleeps on `progress`.
  template <class Done>
  void host_wait(Done&& done);
  void rethrow_error();
  void notify(const std::vector<Worker*>& wake, bool progressed);

  Device* owner;
  RuntimeConfig cfg;
  int num_cus = 0;
  int slots = 0;
  bool pinned = false;

  std::mutex mu;
  std::vector<ComputeUnit> cus;
  std::vector<std::unique_ptr<Worker>> workers;  // index cu * slots + slot
  std::vector<std::shared_ptr<StreamState>> streams;
  Stream default_stream;
  std::uint64_t kernel_seq = 0;
  std::vector<KernelState*> ready_scratch;  // reused by schedule()
  std::exception_ptr first_error;
  std::uint64_t kernels_done = 0;
  std::atomic<std::uint64_t> wgs_done{0};
  std::atomic<std::uint64_t> progress{0};  // bumped and notified when any command finishes
  Tracer tracer;
};

template <class Done>
void DeviceImpl::host_wait(Done&& done) {
  Backoff spin(WaitPolicy::idle(cfg.spin_us));
  while (!done()) {
    if (spin.pause()) continue;
    std::uint64_t p = progress.load();
    if (done()) break;
    progress.wait(p);  // woken by every finished command
  }
}

}  // namespace tilecomm::detail
