#include "ops/common/block_exchange.hpp"

#include <cstring>

namespace tilecomm::detail {

void BlockExchange::reserve(SegmentLayout& layout, std::size_t flags, std::size_t inbox_floats) {
  flag_count_ = flags;
  flags_offset_ = layout.add(TileFlags::bytes_for(flags));
  inbox_offset_ = layout.add(inbox_floats * sizeof(float));
}

void BlockExchange::bind(OpContext& ctx, std::size_t ld, const char* what) {
  ctx_ = &ctx;
  ld_ = ld;
  what_ = what;
  flags_ = ctx.flags_at(flags_offset_, flag_count_);
}

void BlockExchange::run(std::span<const BlockRoute> produced, std::span<const BlockRoute> arrivals,
                        float* out, const Compute& compute) {
  FusedPlan plan(*ctx_);
  const int my_local = ctx_->topo.local_rank;
  staged_.assign(produced.size(), 0);
  for (std::size_t i = 0; i < produced.size(); ++i) {
    plan.add(i);
    if (plan.dest(produced[i].peer) == FusedPlan::Dest::OffNode) {
      staged_[i] = plan.stage(produced[i].block.floats());
      plan.expect_send();
    }
  }
  for (std::size_t j = 0; j < arrivals.size(); ++j) {
    plan.add(produced.size() + j);
    const BlockRoute& a = arrivals[j];
    if (plan.dest(a.peer) == FusedPlan::Dest::OffNode)
      plan.expect_recv(out + a.block.offset, 1, ctx_->block_type(a.block.rows, a.block.cols, ld_),
                       a.peer, static_cast<int>(a.flag), flags_[my_local], a.flag);
  }
  plan.run([&](const WorkgroupContext& wg, std::size_t task) {
    if (task < produced.size())
      produce(wg, plan, task, produced[task], staged_[task], out, compute);
    else
      arrive(wg, plan, arrivals[task - produced.size()], out);
  });
}

void BlockExchange::produce(const WorkgroupContext& wg, const FusedPlan& plan, std::size_t i,
                            const BlockRoute& route, std::size_t staged, float* out,
                            const Compute& compute) {
  const Block& b = route.block;
  const auto tile = static_cast<std::int64_t>(i);
  const auto bytes = static_cast<std::int64_t>(b.floats() * sizeof(float));
  switch (plan.dest(route.peer)) {
    case FusedPlan::Dest::Self:
      compute(i, out + b.offset, ld_);
      return;
    case FusedPlan::Dest::OnNode: {
      const int local = ctx_->topo.local_of[route.peer];
      compute(i, inbox(local) + b.offset, ld_);
      plan.release(wg, flags_[local], route.flag, route.peer, tile, bytes);
      return;
    }
    case FusedPlan::Dest::OffNode: {
      float* staging = plan.staged(staged);  // contiguous: row stride = cols
      compute(i, staging, b.cols);
      plan.send(wg, staging, static_cast<int>(b.floats()), MPI_FLOAT, route.peer,
                static_cast<int>(route.flag), tile, bytes);
      return;
    }
  }
}

void BlockExchange::arrive(const WorkgroupContext& wg, const FusedPlan& plan,
                           const BlockRoute& route, float* out) {
  const int my_local = ctx_->topo.local_rank;
  plan.await(wg, route.peer, flags_[my_local], route.flag, what_);
  if (plan.dest(route.peer) != FusedPlan::Dest::OnNode) return;  // the proxy received it in place
  const Block& b = route.block;
  const float* src = inbox(my_local);
  for (std::size_t r = 0; r < b.rows; ++r)
    std::memcpy(out + b.offset + r * ld_, src + b.offset + r * ld_, b.cols * sizeof(float));
}

}  // namespace tilecomm::detail
