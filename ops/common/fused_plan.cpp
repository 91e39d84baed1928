#include "ops/common/fused_plan.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>

#include "collectives/reduce.hpp"

namespace tilecomm::detail {
namespace {

/// While alive, the calling (host) thread's sleeps are precise to 1 us, as the device threads' are
/// (Linux's default timer slack adds 50 us to every sleep); restores the thread's own slack.
class HostTimerSlack {
 public:
  HostTimerSlack() : saved_(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) {
    if (saved_ >= 0) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  }
  ~HostTimerSlack() {
    if (saved_ >= 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(saved_), 0, 0, 0);
  }
  HostTimerSlack(const HostTimerSlack&) = delete;
  HostTimerSlack& operator=(const HostTimerSlack&) = delete;

 private:
  int saved_;
};

}  // namespace

FusedPlan::FusedPlan(OpContext& ctx)
    : ctx_(ctx), epoch_(ctx.next_epoch()), staging_(&ctx.staging()) {
  if (ctx_.proxy() != nullptr) ctx_.proxy()->reset();
}

std::size_t FusedPlan::stage(std::size_t floats) {
  const std::size_t at = staged_floats_;
  staged_floats_ += floats;
  return at;
}

void FusedPlan::expect_recv(void* buf, int count, MPI_Datatype type, int src, int tag,
                            TileFlags& flags, std::size_t idx) {
  ctx_.proxy()->expect_recv(buf, count, type, src, tag, &flags, idx, epoch_);
}

void FusedPlan::release(const WorkgroupContext& wg, TileFlags& flags, std::size_t idx, int dst,
                        std::int64_t tile, std::int64_t bytes) const {
  flags.signal(idx, epoch_);
  wg.mark("tile stored", tile, dst, bytes);
}

void FusedPlan::send(const WorkgroupContext& wg, const void* buf, int count, MPI_Datatype type,
                     int dst, int tag, std::int64_t tile, std::int64_t bytes) const {
  ctx_.proxy()->send(wg, buf, count, type, dst, tag);
  wg.mark("tile handed to proxy", tile, dst, bytes);
}

void FusedPlan::await(const WorkgroupContext& wg, int src, const TileFlags& flags, std::size_t idx,
                      const char* what) const {
  if (ctx_.topo.on_node(src))
    flags.wait(idx, epoch_, ctx_.comm.timeout_s, what, wait_.value_or(WaitPolicy::backoff()));
  else  // the proxy receives it
    ctx_.proxy()->wait(wg, flags, idx, epoch_, what, wait_.value_or(WaitPolicy::backoff(2.0)));
}

void FusedPlan::reduce_partials(const WorkgroupContext& wg, const TileFlags& flags,
                                std::size_t stride, std::size_t idx,
                                const std::function<const float*(int rank)>& partial_of, float* dst,
                                std::size_t count, const char* what) const {
  const Topology& topo = ctx_.topo;
  const int p = topo.size;
  const float* on_stack[64];
  std::vector<const float*> on_heap;
  const float** sources = p <= 64 ? on_stack : (on_heap.resize(p), on_heap.data());
  auto sum = [&](float* into, const float* const* from, std::size_t n) {
    reduce_n(into, reinterpret_cast<const void* const*>(from), static_cast<int>(n), count,
             DataType::Float32, ReduceOp::Sum);
  };
  // A flat left fold over the ranks is the canonical order when the ranks are numbered node by
  // node and only the first node has several: (x0 + x1 + ... + xk) + S1 + S2 ...
  bool flat = true;
  for (int n = 0, next = 0; n < topo.num_nodes; ++n)
    for (int s : topo.node_ranks[n]) {
      flat = flat && s == next++ && (n == 0 || topo.node_ranks[n].size() == 1);
    }
  if (flat) {
    for (int s = 0; s < p; ++s) {
      await(wg, s, flags, static_cast<std::size_t>(s) * stride + idx, what);
      sources[s] = partial_of(s);
    }
    return sum(dst, sources, static_cast<std::size_t>(p));
  }
  // Node by node: dst = S0, then dst += S_n (S_n of a node of several ranks summed into `node`).
  thread_local std::vector<float> node;
  node.resize(count);
  for (int n = 0; n < topo.num_nodes; ++n) {
    const std::vector<int>& ranks = topo.node_ranks[n];
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int s = ranks[i];
      await(wg, s, flags, static_cast<std::size_t>(s) * stride + idx, what);
      sources[i] = partial_of(s);
    }
    if (n == 0) {
      sum(dst, sources, ranks.size());
      continue;
    }
    const float* pair[2] = {dst, sources[0]};
    if (ranks.size() > 1) {
      sum(node.data(), sources, ranks.size());
      pair[1] = node.data();
    }
    sum(dst, pair, 2);
  }
}

WorkgroupContext FusedPlan::host_context() const {
  Device& d = ctx_.device;
  return {0, 0, 0, {1, 1}, static_cast<int>(d.num_cus()), 0, {}, &d};
}

void FusedPlan::run(const TaskFn& body) {
  if (staging_->size() < staged_floats_) staging_->resize(staged_floats_);
  Proxy* proxy = ctx_.proxy();
  // The proxy is a WG on the high-priority stream, beside the compute kernel's WGs; with a single
  // WG slot it cannot have one of its own (the kernel could never run), so the host thread, idle
  // until the kernel ends anyway, drives it instead.
  const bool proxy_wg = proxy != nullptr && ctx_.wg_slots() > 1 && !proxy_on_host_;
  if (proxy != nullptr) {
    proxy->expect_sends(sends_);
    if (proxy_on_host_) proxy->hurry_when_sent();
    if (proxy_wg)
      proxy->launch(ctx_.comm_stream, ctx_.kernel_name("proxy").c_str());
    else
      proxy->start_on_host();
  }
  const std::size_t wgs = proxy != nullptr && proxy_on_host_
                              ? ctx_.device.num_cus()
                              : std::max<std::size_t>(1, ctx_.wg_slots() - (proxy_wg ? 1 : 0));
  // The last task to end tells the proxy that the call now waits for it alone (Proxy::hurry).
  std::atomic<std::size_t> tasks_left{order_.size()};
  if (!order_.empty())
    ctx_.compute_stream.launch_persistent(
        {ctx_.kernel_name("fused"), wgs, 0}, std::move(order_),
        [&](const WorkgroupContext& wg, std::size_t task) {
          body(wg, task);
          if (tasks_left.fetch_sub(1, std::memory_order_acq_rel) == 1 && proxy != nullptr)
            proxy->hurry();
        });
  else if (proxy != nullptr)
    proxy->hurry();
  if (proxy != nullptr && !proxy_wg) {
    try {
      HostTimerSlack precise_sleeps;  // the proxy's sleeps as asked, not 50 us longer
      proxy->run(nullptr, proxy_on_host_ ? Proxy::kHostBackoffPolicy : Proxy::kProgressPolicy);
    } catch (...) {
      try {  // the kernel's own error, if any, is secondary to the proxy's
        ctx_.compute_stream.synchronize();
      } catch (...) {
      }
      throw;
    }
  }
  try {
    ctx_.compute_stream.synchronize();
  } catch (...) {
    if (proxy_wg) {  // never return while the proxy may still receive into the caller's buffers
      proxy->abort();
      try {
        ctx_.comm_stream.synchronize();
      } catch (...) {
      }
    }
    throw;
  }
  if (proxy_wg) ctx_.comm_stream.synchronize();
}

}  // namespace tilecomm::detail
