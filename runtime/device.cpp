// Public surface of the device model: Device, Stream, Event. Scheduling lives in scheduler.cpp.
#include <sched.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "runtime/device_impl.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace detail {
namespace {

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

int online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// The CUs a stream's kernels may use: its mask's, or the whole device's.
std::size_t cus_of(const StreamState& s) {
  return s.cu_mask.empty() ? static_cast<std::size_t>(s.dev->num_cus) : s.cu_mask.size();
}

}  // namespace

int default_cus(int mask_cores, int online, int node_ranks) {
  if (mask_cores <= 0) return 0;
  if (node_ranks <= 1 || static_cast<long long>(node_ranks) * mask_cores <= online)
    return mask_cores;  // no overlap possible: the launcher gave each rank its own cores
  return std::max(1, std::min(mask_cores, online / node_ranks));
}

DeviceImpl::DeviceImpl(Device* owner_, RuntimeConfig config)
    : owner(owner_), cfg(std::move(config)), tracer(cfg.trace) {
  if (cfg.num_cus < 0)
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("RuntimeConfig.num_cus = {} (must be >= 0; 0 = cores in mask)", cfg.num_cus));
  if (cfg.wg_slots_per_cu < 1)
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("RuntimeConfig.wg_slots_per_cu = {} (must be >= 1)", cfg.wg_slots_per_cu));
  if (cfg.spin_us < 0)
    throw Error(ErrorCode::InvalidArgument, fmt::format("RuntimeConfig.spin_us = {}", cfg.spin_us));
  if (cfg.node_ranks < 1)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("RuntimeConfig.node_ranks = {} (must be >= 1)", cfg.node_ranks));
  const std::vector<int> cpus = affinity_cpus();
  num_cus = cfg.num_cus > 0
                ? cfg.num_cus
                : default_cus(static_cast<int>(cpus.size()), online_cpus(), cfg.node_ranks);
  if (num_cus == 0)
    throw Error(ErrorCode::InvalidArgument,
                "RuntimeConfig.num_cus = 0 and the affinity mask has no cores: zero CUs");
  cfg.num_cus = num_cus;
  slots = cfg.wg_slots_per_cu;
  // Pin only when the CUs cover the mask exactly, i.e. the launcher gave this process these cores.
  // With fewer CUs than cores (e.g. several ranks sharing an unbound mask, each asking for part of
  // it) every rank would pin CU 0 to the same first core; the OS balances better than that.
  pinned = cfg.pin_threads && cpus.size() == static_cast<std::size_t>(num_cus);

  cus.resize(num_cus);
  for (int c = 0; c < num_cus; ++c) {
    if (cfg.lds_bytes_per_cu > 0)
      cus[c].lds.reset(new (std::align_val_t(64)) std::byte[cfg.lds_bytes_per_cu]);
    cus[c].cpu = pinned ? cpus[c] : -1;
  }
  auto s = std::make_shared<StreamState>();
  s->dev = this;
  s->priority = Stream::kNormal;
  streams.push_back(s);
  default_stream.state_ = s;

  workers.reserve(static_cast<std::size_t>(num_cus) * slots);
  for (int c = 0; c < num_cus; ++c)
    for (int sl = 0; sl < slots; ++sl) {
      auto w = std::make_unique<Worker>();
      w->cu = c;
      w->slot = sl;
      w->lane = c * slots + sl;
      workers.push_back(std::move(w));
    }
  for (auto& w : workers)
    w->thread = std::thread([this, wp = w.get()] { worker_loop(*wp); });
}

DeviceImpl::~DeviceImpl() {
  host_wait([this] {
    std::lock_guard lock(mu);
    for (auto& s : streams)
      if (!s->queue.empty()) return false;
    return true;
  });
  for (auto& w : workers) {
    w->mailbox.store(Worker::kStop, std::memory_order_release);
    w->mailbox.notify_one();
  }
  for (auto& w : workers)
    w->thread.join();
  if (tracer.enabled() && !cfg.trace_path.empty()) {
    try {
      tracer.write_chrome_json(cfg.trace_path);
    } catch (const std::exception&) {  // a destructor must not throw; the path was user input
    }
  }
}

}  // namespace detail

void WorkgroupContext::mark(const char* name, std::int64_t tile, std::int64_t peer,
                            std::int64_t bytes) const {
  Tracer& t = device->tracer();
  if (t.enabled()) t.mark(name, "mark", cu * device->wg_slots_per_cu() + slot, tile, peer, bytes);
}

// ---------------------------------------------------------------- Event

bool Event::query() const {
  return !state_ || state_->completed.load(std::memory_order_acquire) >= target_;
}

void Event::synchronize() const {
  if (!state_) return;
  state_->dev->host_wait([this] { return query(); });
  state_->dev->rethrow_error();
}

// ---------------------------------------------------------------- Stream

int Stream::priority() const {
  return state_->priority;
}
int Stream::id() const {
  return state_->id;
}
std::vector<int> Stream::cu_mask() const {
  if (!state_->cu_mask.empty()) return state_->cu_mask;
  std::vector<int> all(static_cast<std::size_t>(state_->dev->num_cus));
  for (std::size_t c = 0; c < all.size(); ++c)
    all[c] = static_cast<int>(c);
  return all;
}

void Stream::launch(const LaunchParams& params, KernelFn fn) {
  detail::DeviceImpl& dev = *state_->dev;
  if (!fn)
    throw Error(ErrorCode::InvalidArgument, fmt::format("launch '{}': fn is empty", params.name));
  if (params.grid.x == 0 || params.grid.y == 0)
    throw Error(ErrorCode::InvalidArgument, fmt::format("launch '{}': empty grid {}x{}",
                                                        params.name, params.grid.x, params.grid.y));
  if (params.grid.x > std::numeric_limits<std::uint32_t>::max() / params.grid.y)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("launch '{}': grid {}x{} overflows (at most 2^32-1 workgroups)",
                            params.name, params.grid.x, params.grid.y));
  if (params.lds_bytes > dev.cfg.lds_bytes_per_cu)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("launch '{}': lds_bytes = {} exceeds the LDS capacity of a CU ({})",
                            params.name, params.lds_bytes, dev.cfg.lds_bytes_per_cu));
  auto k = std::make_shared<detail::KernelState>();
  k->name = params.name;
  k->grid = params.grid;
  k->total = params.grid.x * params.grid.y;
  k->lds = params.lds_bytes;
  k->fn = std::move(fn);
  k->stream = state_.get();
  std::vector<detail::Worker*> wake;
  {
    std::lock_guard lock(dev.mu);
    k->seq = ++dev.kernel_seq;
    dev.enqueue(*state_, {detail::Command::Kind::Kernel, std::move(k), nullptr}, wake);
  }
  dev.notify(wake, false);
}

void Stream::launch_persistent(const PersistentParams& params, std::vector<std::size_t> task_order,
                               TaskFn fn) {
  if (!fn)
    throw Error(ErrorCode::InvalidArgument, fmt::format("launch '{}': fn is empty", params.name));
  const std::size_t nwg = params.num_wgs ? params.num_wgs : detail::cus_of(*state_);
  struct Shared {
    std::vector<std::size_t> tasks;
    std::atomic<std::size_t> next{0};
    TaskFn fn;
  };
  auto sh = std::make_shared<Shared>();
  sh->tasks = std::move(task_order);
  sh->fn = std::move(fn);
  launch({params.name, {nwg, 1}, params.lds_bytes}, [sh](const WorkgroupContext& wg) {
    for (std::size_t i; (i = sh->next.fetch_add(1, std::memory_order_relaxed)) < sh->tasks.size();)
      sh->fn(wg, sh->tasks[i]);
  });
}

Event Stream::record() {
  detail::DeviceImpl& dev = *state_->dev;
  Event e;
  e.state_ = std::make_shared<detail::EventState>();
  e.state_->dev = &dev;
  e.target_ = 1;
  std::vector<detail::Worker*> wake;
  {
    std::lock_guard lock(dev.mu);
    dev.enqueue(*state_, {detail::Command::Kind::Record, nullptr, e.state_}, wake);
  }
  dev.notify(wake, true);
  return e;
}

void Stream::wait(const Event& event) {
  if (!event.state_) return;
  detail::DeviceImpl& dev = *state_->dev;
  if (event.state_->dev != &dev)
    throw Error(ErrorCode::InvalidArgument, "Stream::wait: the event belongs to another Device");
  std::vector<detail::Worker*> wake;
  {
    std::lock_guard lock(dev.mu);
    dev.enqueue(*state_, {detail::Command::Kind::Wait, nullptr, event.state_}, wake);
  }
  dev.notify(wake, true);
}

void Stream::synchronize() {
  const std::uint64_t target = state_->issued.load(std::memory_order_acquire);
  state_->dev->host_wait(
      [&] { return state_->finished.load(std::memory_order_acquire) >= target; });
  state_->dev->rethrow_error();
}

// ---------------------------------------------------------------- Device

Device::Device(RuntimeConfig config)
    : impl_(std::make_unique<detail::DeviceImpl>(this, std::move(config))) {}

Device::~Device() = default;

int Device::num_cus() const {
  return impl_->num_cus;
}
int Device::wg_slots_per_cu() const {
  return impl_->slots;
}
std::size_t Device::lds_bytes_per_cu() const {
  return impl_->cfg.lds_bytes_per_cu;
}
bool Device::pinned() const {
  return impl_->pinned;
}
const RuntimeConfig& Device::config() const {
  return impl_->cfg;
}
Stream& Device::default_stream() {
  return impl_->default_stream;
}
Tracer& Device::tracer() {
  return impl_->tracer;
}

Stream Device::create_stream(int priority) {
  return create_stream(priority, {});
}

Stream Device::create_stream(int priority, std::span<const int> cu_mask) {
  auto s = std::make_shared<detail::StreamState>();
  s->dev = impl_.get();
  s->priority = priority;
  if (!cu_mask.empty()) {
    const int n = impl_->num_cus;
    s->allowed.assign(static_cast<std::size_t>(n), 0);
    for (int c : cu_mask) {
      if (c < 0 || c >= n)
        throw Error(
            ErrorCode::InvalidArgument,
            fmt::format("create_stream: cu_mask names CU {} (the device has CUs 0..{})", c, n - 1));
      s->allowed[static_cast<std::size_t>(c)] = 1;
    }
    for (int c = 0; c < n; ++c)
      if (s->allowed[static_cast<std::size_t>(c)]) s->cu_mask.push_back(c);
  }
  std::lock_guard lock(impl_->mu);
  s->id = static_cast<int>(impl_->streams.size());
  impl_->streams.push_back(s);
  Stream stream;
  stream.state_ = std::move(s);
  return stream;
}

void Device::synchronize() {
  std::vector<std::pair<detail::StreamState*, std::uint64_t>> targets;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& s : impl_->streams)
      targets.emplace_back(s.get(), s->issued.load());
  }
  impl_->host_wait([&] {
    for (auto& [s, t] : targets)
      if (s->finished.load(std::memory_order_acquire) < t) return false;
    return true;
  });
  impl_->rethrow_error();
}

DeviceStats Device::stats() const {
  DeviceStats st;
  std::lock_guard lock(impl_->mu);
  st.kernels = impl_->kernels_done;
  st.workgroups = impl_->wgs_done.load();
  for (const auto& cu : impl_->cus) {
    st.max_resident.push_back(cu.max_resident);
    st.max_lds_in_use.push_back(cu.max_lds_used);
  }
  return st;
}

void Device::reset_stats() {
  std::lock_guard lock(impl_->mu);
  impl_->kernels_done = 0;
  impl_->wgs_done = 0;
  for (auto& cu : impl_->cus) {
    cu.max_resident = cu.resident;
    cu.max_lds_used = cu.lds_used;
  }
}

}  // namespace tilecomm
