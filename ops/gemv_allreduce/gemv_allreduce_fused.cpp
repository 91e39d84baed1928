// The fused GEMV+AllReduce kernel (two-shot at tile granularity).
//
// One persistent kernel runs three kinds of tasks:
//  1. compute row block b, straight into the destination: the owner's shared `partials` slot when
//     the owner is on this node (then a release flag in the owner's segment), else a staging
//     buffer the WG sends at once (MPI_Isend, completed by the proxy). Blocks owned by other ranks
//     go first (off-node, then on-node), so their communication overlaps the rest of the compute;
//  2. reduce an owned block: wait for the p partial flags, reduce in rank order into the shared
//     `reduced` buffer, flag it, send it to off-node ranks, copy it into y. Each owned block's
//     reduce directly follows its compute in the list, so reduced blocks leave early too;
//  3. gather each block owned elsewhere: wait for the owner's flag and copy (on-node), or for the
//     proxy's arrival flag (off-node: the proxy received it straight into y).
// Tasks start in list order, so every compute task has started before any WG waits: no deadlock
// even with one WG. Consecutive calls alternate buffer halves (epoch parity); a rank can only be
// one call ahead of any peer, because each call waits for every peer's partials.
#include <fmt/format.h>

#include <cstring>

#include "collectives/reduce.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

enum class Kind : std::size_t { Compute, Reduce, Gather };
constexpr int kPartialTag = 0;  // tag = kind base + block

}  // namespace

float* GemvAllReduceImpl::partials(int local, int parity, int src) const {
  auto* base = reinterpret_cast<float*>(shm->segment(local) + off_partials);
  return base + (static_cast<std::size_t>(parity) * comm.size + src) * m;
}

float* GemvAllReduceImpl::reduced(int local, int parity) const {
  return reinterpret_cast<float*>(shm->segment(local) + off_reduced) +
         static_cast<std::size_t>(parity) * m;
}

void GemvAllReduceImpl::setup_fused() {
  const std::size_t p = comm.size;
  SegmentLayout layout;
  off_partial_flags = layout.add(TileFlags::bytes_for(p * nblocks));
  off_reduced_flags = layout.add(TileFlags::bytes_for(nblocks));
  off_arrived_flags = layout.add(TileFlags::bytes_for(nblocks));
  off_partials = layout.add(2 * p * m * sizeof(float));
  off_reduced = layout.add(2 * m * sizeof(float));
  shm = std::make_unique<SymmetricBuffer>(comm, layout.size());
  for (int l = 0; l < comm.local_size; ++l) {
    partial_flags.emplace_back(shm->segment(l) + off_partial_flags, p * nblocks);
    reduced_flags.emplace_back(shm->segment(l) + off_reduced_flags, nblocks);
  }
  arrived_flags = TileFlags(shm->segment(comm.local_rank) + off_arrived_flags, nblocks);
  if (comm.num_nodes > 1) {
    mpi_check(MPI_Comm_dup(comm.comm, &op_comm), "MPI_Comm_dup");
    proxy = std::make_unique<Proxy>(op_comm, comm.timeout_s, "GemvAllReduce");
    staging.resize(m);
  }
}

void GemvAllReduceImpl::run_fused(const float* w, const float* x, float* y) {
  const std::uint32_t e = ++epoch;
  const int par = static_cast<int>(e & 1u);
  const int me = comm.rank, p = comm.size, my_local = comm.local_rank;
  const std::size_t nb = nblocks;

  // Task list. remote_first: compute the blocks other ranks own (off-node, then on-node), then each
  // owned block's compute directly followed by its reduce, so reduced blocks leave while later
  // blocks still compute; then gathers. Otherwise: every compute in block order, reduces, gathers.
  std::vector<std::size_t> order;
  order.reserve(2 * nb + (first_block(me + 1) - first_block(me)));
  auto task = [nb](Kind kind, std::size_t b) { return static_cast<std::size_t>(kind) * nb + b; };
  if (opt.remote_first) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t b = 0; b < nb; ++b)
        if (owner(b) != me && comm.on_node(owner(b)) == (pass == 1))
          order.push_back(task(Kind::Compute, b));
    for (std::size_t b = first_block(me); b < first_block(me + 1); ++b) {
      order.push_back(task(Kind::Compute, b));
      order.push_back(task(Kind::Reduce, b));  // waits for its own compute, which started first
    }
  } else {
    for (std::size_t b = 0; b < nb; ++b)
      order.push_back(task(Kind::Compute, b));
    for (std::size_t b = first_block(me); b < first_block(me + 1); ++b)
      order.push_back(task(Kind::Reduce, b));
  }
  for (std::size_t b = 0; b < nb; ++b)
    if (owner(b) != me) order.push_back(task(Kind::Gather, b));

  // The proxy's plan for this call: partials from off-node ranks for my blocks, reduced blocks from
  // off-node owners straight into y; sends: my partials to off-node owners, my reduced blocks to
  // every off-node rank.
  const bool remote = proxy != nullptr;
  if (remote) {
    proxy->reset();
    std::size_t sends = 0;
    int off_node_ranks = 0;
    for (int s = 0; s < p; ++s)
      off_node_ranks += comm.on_node(s) ? 0 : 1;
    for (std::size_t b = 0; b < nb; ++b) {
      const int o = owner(b);
      const int n = static_cast<int>(rows(b));
      if (o == me) {
        for (int s = 0; s < p; ++s)
          if (!comm.on_node(s))
            proxy->expect_recv(partials(my_local, par, s) + row0(b), n, MPI_FLOAT, s,
                               kPartialTag + static_cast<int>(b), &partial_flags[my_local],
                               s * nb + b, e);
        sends += off_node_ranks;
      } else if (!comm.on_node(o)) {
        proxy->expect_recv(y + row0(b), n, MPI_FLOAT, o, static_cast<int>(nb + b), &arrived_flags,
                           b, e);
        ++sends;
      }
    }
    proxy->expect_sends(sends);
    proxy->launch(comm_stream, "gemv.proxy");
  }

  const double timeout = comm.timeout_s;
  auto body = [&, e, par](const WorkgroupContext& wg, std::size_t t) {
    const Kind kind = static_cast<Kind>(t / nb);
    const std::size_t b = t % nb;
    const std::size_t r0 = row0(b), n = rows(b);
    const int o = owner(b);
    if (kind == Kind::Compute) {
      if (comm.on_node(o)) {
        const int ol = comm.local_of[o];
        gemv_tile(w, x, partials(ol, par, me) + r0, b);  // straight into the owner's segment
        partial_flags[ol].signal(static_cast<std::size_t>(me) * nb + b, e);
        wg.mark("tile stored", static_cast<std::int64_t>(b), o, static_cast<std::int64_t>(n * 4));
      } else {
        gemv_tile(w, x, staging.data() + r0, b);
        proxy->send(wg, staging.data() + r0, static_cast<int>(n), MPI_FLOAT, o,
                    kPartialTag + static_cast<int>(b));
        wg.mark("tile handed to proxy", static_cast<std::int64_t>(b), o,
                static_cast<std::int64_t>(n * 4));
      }
    } else if (kind == Kind::Reduce) {
      const float* srcs[64];
      std::vector<const float*> many;
      const float** src = p <= 64 ? srcs : (many.resize(p), many.data());
      for (int s = 0; s < p; ++s) {
        const std::size_t idx = static_cast<std::size_t>(s) * nb + b;
        const char* what = "GemvAllReduce: partial (source rank * blocks + block)";
        if (comm.on_node(s))
          partial_flags[my_local].wait(idx, e, timeout, what);
        else
          proxy->wait(wg, partial_flags[my_local], idx, e, what);  // the proxy receives it
        src[s] = partials(my_local, par, s) + r0;
      }
      float* red = reduced(my_local, par) + r0;
      reduce_n(red, reinterpret_cast<const void* const*>(src), p, n, DataType::Float32,
               ReduceOp::Sum);
      reduced_flags[my_local].signal(b, e);
      if (remote)
        for (int q = 0; q < p; ++q)
          if (!comm.on_node(q))
            proxy->send(wg, red, static_cast<int>(n), MPI_FLOAT, q, static_cast<int>(nb + b));
      std::memcpy(y + r0, red, n * sizeof(float));
      wg.mark("block reduced", static_cast<std::int64_t>(b), me);
    } else if (comm.on_node(o)) {
      const int ol = comm.local_of[o];
      reduced_flags[ol].wait(b, e, timeout, "GemvAllReduce: reduced block");
      std::memcpy(y + r0, reduced(ol, par) + r0, n * sizeof(float));
    } else {
      proxy->wait(wg, arrived_flags, b, e, "GemvAllReduce: reduced block from off-node owner");
    }
  };
  const std::size_t slots = static_cast<std::size_t>(dev.num_cus()) * dev.wg_slots_per_cu();
  const std::size_t wgs = std::max<std::size_t>(1, remote ? slots - 1 : slots);
  compute_stream.launch_persistent({"gemv_allreduce.fused", wgs, 0}, std::move(order), body);
  compute_stream.synchronize();
  if (remote) comm_stream.synchronize();
}

}  // namespace tilecomm::detail
