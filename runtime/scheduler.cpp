// The device model's scheduler: placement of workgroups on CU slots under the LDS limit, stream
// order, priorities, events, and the worker threads that run workgroups.
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "runtime/device_impl.hpp"

namespace tilecomm::detail {
namespace {
constexpr std::size_t kNoFit = std::numeric_limits<std::size_t>::max();
constexpr std::size_t kLdsAlign = 64;
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool DeviceImpl::advance_all() {
  bool any = false;
  for (bool fired = true; fired;) {  // a recorded event may unblock a waiting stream: repeat
    fired = false;
    for (auto& sp : streams) {
      StreamState& s = *sp;
      while (!s.queue.empty()) {
        Command& c = s.queue.front();
        if (c.kind == Command::Kind::Kernel) {
          if (c.kernel->done < c.kernel->total || c.kernel->next < c.kernel->total) break;
          ++kernels_done;
        } else if (c.kind == Command::Kind::Record) {
          c.event->completed.store(1, std::memory_order_release);
          fired = true;
        } else if (c.event->completed.load(std::memory_order_acquire) == 0) {
          break;  // Wait on an event not yet reached
        }
        s.queue.pop_front();
        s.finished.fetch_add(1, std::memory_order_release);
        any = true;
      }
    }
  }
  return any;
}

std::size_t DeviceImpl::find_lds(const ComputeUnit& cu, std::size_t bytes) const {
  if (bytes == 0) return 0;
  // First fit at 64-byte aligned offsets (the pool itself is 64-byte aligned), so every WG's span
  // is aligned whatever the sizes of its neighbours. A request <= capacity always fits an empty CU.
  auto align = [](std::size_t x) { return (x + kLdsAlign - 1) & ~(kLdsAlign - 1); };
  std::size_t at = 0;
  for (const auto& [off, size] : cu.allocs) {
    if (off >= at && off - at >= bytes) return at;
    at = align(off + size);
  }
  return at <= cfg.lds_bytes_per_cu && cfg.lds_bytes_per_cu - at >= bytes ? at : kNoFit;
}

void DeviceImpl::schedule(Worker* self, std::vector<Worker*>& wake) {
  // Kernels at the heads of streams with WGs left, highest priority first, then launch order.
  std::vector<KernelState*>& ready = ready_scratch;
  ready.clear();
  for (auto& sp : streams) {
    if (sp->queue.empty() || sp->queue.front().kind != Command::Kind::Kernel) continue;
    KernelState* k = sp->queue.front().kernel.get();
    if (k->next < k->total) ready.push_back(k);
  }
  if (ready.empty()) return;
  std::sort(ready.begin(), ready.end(), [](const KernelState* a, const KernelState* b) {
    if (a->stream->priority != b->stream->priority)
      return a->stream->priority > b->stream->priority;
    return a->seq < b->seq;
  });

  for (KernelState* k : ready) {
    while (k->next < k->total) {
      // The CU of the stream's mask with an idle slot where the LDS fits and the fewest resident
      // WGs (spreads work);
      // ties go to the caller's own CU (no wake-up needed), then the lowest index.
      int best = -1;
      std::size_t best_off = 0;
      for (int c = 0; c < num_cus; ++c) {
        ComputeUnit& cu = cus[c];
        if (cu.resident >= slots || !k->stream->allows(c)) continue;
        std::size_t off = find_lds(cu, k->lds);
        if (off == kNoFit) continue;
        bool better = best < 0 || cu.resident < cus[best].resident ||
                      (cu.resident == cus[best].resident && self && self->idle && self->cu == c);
        if (better) best = c, best_off = off;
      }
      if (best < 0) break;  // nothing fits now; a lower-priority kernel with less LDS may
      // The caller takes the WG when it can (no wake-up), except a WG of a stream above normal
      // priority when the caller has run for kNearSliceEndNs: that goes to a sleeping worker of
      // the CU if there is one, which the OS runs on waking, while the caller keeps its turn for
      // normal WGs. (Given to the caller after a chunk of compute tiles, the shaped mode's
      // communication WG waited 3.5-11 ms for the core: the caller's slice ran out, and the
      // compute worker it had woken, and another rank's, each ran a 4 ms tick first.)
      const bool self_fits = self && self->idle && self->cu == best;
      const bool hand_off = self_fits && k->stream->priority > Stream::kNormal &&
                            now_ns() - self->awake_since_ns >= kNearSliceEndNs;
      Worker* w = self_fits && !hand_off ? self : nullptr;
      for (int s = 0; s < slots && !w; ++s) {
        Worker* o = workers[best * slots + s].get();
        if (o->idle && o != self) w = o;
      }
      if (!w) w = self;  // no other worker idle: best had an idle slot, so self is it
      ComputeUnit& cu = cus[best];
      w->idle = false;
      w->task = Task{k, k->next++, best_off};
      ++cu.resident;
      if (k->stream->priority > Stream::kNormal && cu.resident_high++ == 0)
        cu.high_since_ns = now_ns();
      if (k->lds > 0) {
        auto pos = std::lower_bound(cu.allocs.begin(), cu.allocs.end(),
                                    std::make_pair(best_off, std::size_t{0}));
        cu.allocs.insert(pos, {best_off, k->lds});
        cu.lds_used += k->lds;
      }
      cu.max_resident = std::max(cu.max_resident, cu.resident);
      cu.max_lds_used = std::max(cu.max_lds_used, cu.lds_used);
      if (w == self) {
        w->mailbox.store(Worker::kHasTask, std::memory_order_relaxed);
      } else {
        wake.push_back(w);
      }
    }
  }
}

void DeviceImpl::enqueue(StreamState& s, Command c, std::vector<Worker*>& wake) {
  s.queue.push_back(std::move(c));
  s.issued.fetch_add(1, std::memory_order_release);
  advance_all();
  schedule(nullptr, wake);
}

void DeviceImpl::notify(const std::vector<Worker*>& wake, bool progressed) {
  for (Worker* w : wake) {
    w->mailbox.store(Worker::kHasTask, std::memory_order_release);
    w->mailbox.notify_one();
  }
  if (progressed) {
    progress.fetch_add(1);
    progress.notify_all();
  }
}

void DeviceImpl::run_task(Worker& w, const Task& t, std::exception_ptr& error) {
  KernelState& k = *t.kernel;
  std::span<std::byte> lds;
  if (k.lds > 0) lds = {cus[w.cu].lds.get() + t.lds_offset, k.lds};
  WorkgroupContext ctx{t.wg, t.wg % k.grid.x, t.wg / k.grid.x, k.grid, w.cu, w.slot, lds, owner};
  const bool tracing = tracer.enabled();
  const double t0 = tracing ? Tracer::now_us() : 0.0;
  try {
    k.fn(ctx);
  } catch (...) {
    error = std::current_exception();
  }
  if (tracing) {
    TraceEvent e;
    e.name = k.name;
    e.category = "wg";
    e.ts_us = t0;
    e.dur_us = Tracer::now_us() - t0;
    e.lane = w.lane;
    e.cu = w.cu;
    e.wg = static_cast<std::int64_t>(t.wg);
    e.stream = k.stream->id;
    tracer.record(std::move(e));
  }
}

void DeviceImpl::finish_task(Worker& w, const Task& t, std::exception_ptr error) {
  std::vector<Worker*> wake;
  bool progressed = false;
  bool yield = false;
  {
    std::lock_guard lock(mu);
    KernelState& k = *t.kernel;
    ComputeUnit& cu = cus[w.cu];
    --cu.resident;
    if (k.stream->priority > Stream::kNormal) --cu.resident_high;
    if (k.lds > 0) {
      auto it = std::find(cu.allocs.begin(), cu.allocs.end(), std::make_pair(t.lds_offset, k.lds));
      cu.allocs.erase(it);
      cu.lds_used -= k.lds;
    }
    if (error) {
      // Our reference is dropped here, under `mu`, which rethrow_error() takes: the host may
      // destroy the exception after rethrowing it. (Dropped after the lock, the two reference
      // counts were ordered only inside the uninstrumented libstdc++, a TSan report.)
      if (!first_error) first_error = std::move(error);
      error = nullptr;
      k.total = k.next;  // cancel the WGs not yet dispatched
    }
    ++k.done;
    wgs_done.fetch_add(1, std::memory_order_relaxed);
    if (k.done == k.total) progressed = advance_all();
    w.idle = true;
    schedule(&w, wake);  // may hand this worker its next WG directly
    if (!w.idle && cu.resident_high > 0 && w.task.kernel->stream->priority <= Stream::kNormal) {
      const std::int64_t now = now_ns();
      yield = now - std::max(w.yielded_ns, cu.high_since_ns) >= kYieldEveryNs;
      if (yield) w.yielded_ns = now;
    }
  }
  notify(wake, progressed);
  if (yield) sched_yield();
}

void DeviceImpl::worker_loop(Worker& w) {
  // Linux rounds a thread's sleeps up by its timer slack, 50 us by default: every short sleep of a
  // backing-off wait (1-20 us) would last 55-80 us, longer than a whole small fused call's
  // communication. Device threads take 1 us (docs/runtime.md, "Waiting").
  prctl(PR_SET_TIMERSLACK, kWorkerTimerSlackNs);
  w.awake_since_ns = now_ns();
  if (pinned) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cus[w.cu].cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  for (;;) {
    // Poll the mailbox for spin_us, then sleep on it (futex): an idle device burns nothing.
    std::uint32_t m = w.mailbox.load(std::memory_order_acquire);
    if (m == Worker::kEmpty) {
      Backoff spin(WaitPolicy::idle(cfg.spin_us));
      while (m == Worker::kEmpty) {
        if (!spin.pause()) {
          w.mailbox.wait(Worker::kEmpty, std::memory_order_acquire);
          w.awake_since_ns = now_ns();
        }
        m = w.mailbox.load(std::memory_order_acquire);
      }
    }
    if (m == Worker::kStop) return;
    Task t = w.task;
    w.mailbox.store(Worker::kEmpty, std::memory_order_relaxed);
    std::exception_ptr error;
    run_task(w, t, error);
    finish_task(w, t, std::move(error));
  }
}

void DeviceImpl::rethrow_error() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mu);
    std::swap(e, first_error);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace tilecomm::detail
