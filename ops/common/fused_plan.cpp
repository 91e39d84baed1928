#include "ops/common/fused_plan.hpp"

#include <algorithm>
#include <atomic>
#include <span>

#include "collectives/reduce.hpp"

namespace tilecomm::detail {
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
                                std::size_t count, const char* what,
                                const std::function<int(int node)>& node_sum_from) const {
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
  // node and only the first node has several: (x0 + x1 + ... + xk) + S1 + S2 ... Not when that
  // first node is another and sends its sum (node_sum_from): then its ranks' partials never come.
  bool flat = !node_sum_from || topo.node == 0 || topo.node_ranks[0].size() == 1;
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
  // Node by node: dst = S0, then dst += S_n (S_n of a node of several ranks summed into `node`,
  // or received as one partial from node_sum_from(n)).
  thread_local std::vector<float> node;
  node.resize(count);
  for (int n = 0; n < topo.num_nodes; ++n) {
    const bool summed = node_sum_from && n != topo.node;
    const int relay = summed ? node_sum_from(n) : -1;  // no vector per node and block
    const std::span<const int> ranks =
        summed ? std::span<const int>(&relay, 1) : std::span<const int>(topo.node_ranks[n]);
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

void FusedPlan::sum_node_partials(const WorkgroupContext& wg, const TileFlags& flags,
                                  const std::function<std::size_t(int local)>& flag_of,
                                  const std::function<const float*(int local)>& partial_of,
                                  float* dst, std::size_t count, const char* what) const {
  const Topology& topo = ctx_.topo;
  thread_local std::vector<const void*> from;
  from.resize(topo.local_size);
  for (int l = 0; l < topo.local_size; ++l) {
    await(wg, topo.local_to_world[l], flags, flag_of(l), what);
    from[l] = partial_of(l);
  }
  reduce_n(dst, from.data(), topo.local_size, count, DataType::Float32, ReduceOp::Sum);
}

WorkgroupContext FusedPlan::host_context() const {
  Device& d = ctx_.device;
  return {0, 0, 0, {1, 1}, static_cast<int>(d.num_cus()), 0, {}, &d};
}

void FusedPlan::run(const TaskFn& body) {
  if (staging_->size() < staged_floats_) staging_->resize(staged_floats_);
  Proxy* proxy = ctx_.proxy();
  if (proxy != nullptr) {
    proxy->expect_sends(sends_);
    proxy->start();
  }
  const std::size_t wgs = proxy != nullptr ? ctx_.device.num_cus() : ctx_.wg_slots();
  // The last task to end tells the proxy that the call now waits for it alone (Proxy::hurry). A
  // task that throws ends its WG; the others go on, and the proxy keeps completing their receives
  // and sends (a peer the failure does not concern gets its blocks, and a WG waiting for one of
  // its blocks is not left to the deadline) until the kernel has ended, then winds down: sends
  // the failed tasks would have posted never come.
  std::atomic<std::size_t> tasks_left{order_.size()};
  std::atomic<bool> failed{false};
  if (!order_.empty())
    ctx_.compute_stream.launch_persistent(
        {ctx_.kernel_name("fused"), wgs, 0}, std::move(order_),
        [&](const WorkgroupContext& wg, std::size_t task) {
          try {
            body(wg, task);
          } catch (...) {
            failed.store(true, std::memory_order_release);
            throw;
          }
          if (tasks_left.fetch_sub(1, std::memory_order_acq_rel) == 1 && proxy != nullptr)
            proxy->hurry();
        });
  else if (proxy != nullptr)
    proxy->hurry();
  if (proxy != nullptr) {
    const Event kernel_end = ctx_.compute_stream.record();
    try {
      const WorkgroupContext host = host_context();
      proxy->run(&host, Proxy::kBackgroundPolicy,
                 [&] { return failed.load(std::memory_order_acquire) && kernel_end.query(); });
    } catch (...) {
      // The first failure is the cause: a task's, if one had failed before the proxy's (which is
      // then a Timeout: the proxy waited for tiles the failed kernel never sent), else the
      // proxy's (e.g. an MPI error; the kernel's waits for off-node tiles then end at once).
      const bool kernel_first = failed.load(std::memory_order_acquire);
      proxy->abort_waits();  // WGs waiting for tiles the failed proxy will not bring stop now
      try {
        ctx_.compute_stream.synchronize();
      } catch (...) {
        if (kernel_first) throw;
      }
      throw;
    }
  }
  ctx_.compute_stream.synchronize();
}

}  // namespace tilecomm::detail
