#include "ops/common/block_exchange.hpp"

#include <fmt/format.h>

#include <cstring>

#include "collectives/comm_impl.hpp"
#include "runtime/wait.hpp"

namespace tilecomm::detail {

void BlockExchange::reserve(SegmentLayout& layout, int ranks, std::size_t flags,
                            std::size_t inbox_floats, std::size_t header_words) {
  ranks_ = static_cast<std::size_t>(ranks);
  flag_count_ = flags;
  inbox_floats_ = inbox_floats;
  header_words_ = header_words > 0 ? header_words + 1 : 0;  // + the zero-copy word
  flags_offset_ = layout.add(TileFlags::bytes_for(flags + ranks_ + 1));
  inbox_offset_ = layout.add(2 * inbox_floats * sizeof(float));
  header_offset_ = layout.add(2 * ranks_ * header_words_ * sizeof(std::uint64_t));
}

std::string BlockExchange::output_error(const float* out, std::size_t floats, Mode mode) const {
  if (floats == 0 || inbox_floats_ == 0) return {};
  const float* next = next_output();
  if (out == next && mode == Mode::Fused) return {};  // zero-copy
  const std::uint32_t next_epoch = ctx_->epoch() + 1;
  for (std::uint32_t e : {next_epoch, next_epoch - 1}) {
    const float* view = own_inbox(e);
    if (out + floats <= view || out >= view + inbox_floats_) continue;
    if (out != next)
      return fmt::format(
          "the output {} lies in the context's output views but is not output() of this call "
          "({}; call output() before every run())",
          static_cast<const void*>(out), static_cast<const void*>(next));
    return fmt::format("the output is output(), which only Mode::Fused can fill; mode = {}",
                       to_string(mode));
  }
  return {};
}

void BlockExchange::reserve_inputs(std::size_t input_floats, std::size_t input_flags) {
  input_floats_ = input_floats;
  input_flag_count_ = input_flags;
}

void BlockExchange::bind(OpContext& ctx, std::size_t ld, const char* what) {
  ctx_ = &ctx;
  ld_ = ld;
  what_ = what;
  flags_ = ctx.flags_at(flags_offset_, flag_count_ + ranks_ + 1);
  header_what_ =
      fmt::format("{}: per-call header (flag {} + source rank)", ctx.info.name, flag_count_);
  input_what_ = fmt::format("{}: input rows (dispatch)", ctx.info.name);
  header_out_.assign(ranks_ * header_words_, 0);
  checked_ = std::make_unique<std::atomic<std::uint32_t>[]>(ranks_);
}

void BlockExchange::map_inputs() {
  if (inputs_) return;
  // The allocation is a blocking collective over the node. First agree, with a deadline, that
  // every rank is at this same call (its epoch): a peer that raised on a bad argument before this
  // call's tasks, or failed in an earlier one, then gives a Timeout or a Mismatch here, not a hang.
  const long long epoch = ctx_->epoch();
  long long span[2] = {epoch, -epoch};  // max and -min of the ranks' epochs
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, span, 2, MPI_LONG_LONG, MPI_MAX, ctx_->mpi, &req),
            "MPI_Iallreduce");
  wait_until(
      [&] {
        int done = 0;
        mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      ctx_->comm.timeout_s,
      [&] {
        return fmt::format(
            "{}: not every rank reached call {}, whose fused run maps the "
            "dispatch inputs' shared memory",
            ctx_->info.name, epoch + 1);
      });
  if (span[0] != epoch || -span[1] != epoch)
    throw Error(ErrorCode::Mismatch,
                fmt::format("{}: ranks are at different calls (epochs {} to {}) where the first "
                            "fused call with inputs maps their shared memory; a peer failed "
                            "earlier",
                            ctx_->info.name, -span[1], span[0]));
  SegmentLayout layout;
  const std::size_t flags_offset = layout.add(TileFlags::bytes_for(input_flag_count_));
  input_offset_ = layout.add(2 * input_floats_ * sizeof(float));
  inputs_ = std::make_unique<SymmetricBuffer>(ctx_->comm, layout.size());
  for (int l = 0; l < ctx_->topo.local_size; ++l)
    input_flags_.emplace_back(inputs_->segment(l) + flags_offset, input_flag_count_);
}

void BlockExchange::run(std::span<const BlockRoute> produced, std::span<const BlockRoute> arrivals,
                        float* out, const Compute& compute, const PeerHeaders* headers,
                        bool zero_copy, std::span<const InputRoute> input_sends,
                        std::span<const InputRoute> input_arrivals) {
  if ((!input_sends.empty() || !input_arrivals.empty()) && !inputs_)
    ctx_->invalid("BlockExchange: a call with inputs before map_inputs()");
  release_outputs();  // normally done by the operator already, before its checks
  ctx_->tiles_moving();
  FusedPlan plan(*ctx_);
  const int p = ctx_->topo.size, me = ctx_->topo.rank, my_local = ctx_->topo.local_rank;
  if (zero_copy && out != own_inbox(plan.epoch()))
    ctx_->invalid("BlockExchange: a zero-copy call's out is not its own inbox half");
  if (header_words_ == 0) headers = nullptr;
  // Tasks and their order: ExchangeTasks (block_route.hpp), shared with the simulator.
  const std::size_t np = produced.size(), na = arrivals.size();
  const ExchangeTasks ids{np, na, p, me, headers != nullptr, input_sends.size()};
  const std::size_t send_headers = ids.send_headers(), check_headers = ids.check_headers();
  const std::size_t send_inputs = ids.send_inputs();
  for (std::size_t t : ids.order())
    plan.add(t);
  for (std::size_t i = 0; i < input_sends.size(); ++i)
    if (plan.dest(input_sends[i].peer) == FusedPlan::Dest::OffNode) plan.expect_send();
  float* my_inputs =
      input_sends.empty() && input_arrivals.empty() ? nullptr : input_half(my_local, plan.epoch());
  for (const InputRoute& in : input_arrivals)
    if (plan.dest(in.peer) == FusedPlan::Dest::OffNode)
      plan.expect_recv(my_inputs + in.offset, static_cast<int>(in.floats), MPI_FLOAT, in.peer,
                       static_cast<int>(input_tag(in.flag)), input_flags_[my_local], in.flag);
  if (headers != nullptr)
    for (int q = 0; q < p; ++q) {
      if (q == me || plan.dest(q) != FusedPlan::Dest::OffNode) continue;
      plan.expect_send();
      plan.expect_recv(header_slot(my_local, plan.parity(), q), static_cast<int>(header_words_),
                       MPI_UINT64_T, q, static_cast<int>(header_tag()), flags_[my_local],
                       header_flag(q));
    }
  staged_.assign(np, 0);
  for (std::size_t i = 0; i < np; ++i)
    if (plan.dest(produced[i].peer) == FusedPlan::Dest::OffNode) {
      staged_[i] = plan.stage(produced[i].block.floats());
      plan.expect_send();
    }
  for (std::size_t j = 0; j < na; ++j) {
    const BlockRoute& a = arrivals[j];
    if (plan.dest(a.peer) == FusedPlan::Dest::OffNode)
      plan.expect_recv(out + a.block.offset, 1, ctx_->block_type(a.block.rows, a.block.cols, ld_),
                       a.peer, static_cast<int>(a.flag), flags_[my_local], a.flag);
  }
  plan.run([&](const WorkgroupContext& wg, std::size_t task) {
    if (task < np) {
      const BlockRoute& r = produced[task];
      if (r.input != BlockRoute::kNoInput) {  // its rows come from r.peer in this call
        if (headers != nullptr) check_header(wg, plan, r.peer, *headers);
        plan.await(wg, r.peer, input_flags_[my_local], r.input, input_what_.c_str());
      }
      produce(wg, plan, task, r, staged_[task], out, compute, headers);
    } else if (task < send_headers) {
      arrive(wg, plan, arrivals[task - np], out, headers, zero_copy);
    } else if (task < check_headers) {
      send_header(wg, plan, static_cast<int>(task - send_headers), *headers, zero_copy);
    } else if (task < send_inputs) {
      check_header(wg, plan, static_cast<int>(task - check_headers), *headers);
    } else {
      send_input(wg, plan, task - send_inputs, input_sends[task - send_inputs]);
    }
  });
  // Every arrival of this call has been copied out of this rank's inbox half (and its headers
  // read): producers may store the call after next there. Zero-copy: the half is the caller's
  // output until its next call begins (release_outputs()).
  if (zero_copy) {
    unreleased_ = true;
    unreleased_epoch_ = plan.epoch();
  } else {
    flags_[my_local].signal(done_flag(), plan.epoch());
  }
}

std::vector<std::size_t> ExchangeTasks::order() const {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < inputs; ++i)
    order.push_back(send_inputs() + i);
  for (int q = 0; q < ranks && headers; ++q)
    if (q != rank) order.push_back(send_headers() + q);
  for (std::size_t i = 0; i < produced + arrivals; ++i)
    order.push_back(i);
  for (int q = 0; q < ranks && headers; ++q)
    if (q != rank) order.push_back(check_headers() + q);
  return order;
}

void BlockExchange::release_outputs() {
  if (!unreleased_) return;
  flags_[ctx_->topo.local_rank].signal(done_flag(), unreleased_epoch_);
  unreleased_ = false;
}

void BlockExchange::await_released(int local, int peer, std::uint32_t epoch) const {
  const TileFlags& flags = flags_[local];
  const std::uint32_t read = epoch - 2;  // modulo 2^32, as flags compare: epochs 1, 2 pass
  if (flags.test(done_flag(), read)) return;
  wait_until([&] { return flags.test(done_flag(), read); }, ctx_->comm.timeout_s,
             [&] {
               return fmt::format(
                   "{}: on-node rank {} has not finished reading its inbox of call {} (its done "
                   "flag holds "
                   "{}), so call {} cannot store there",
                   ctx_->info.name, peer, read, flags.load(done_flag()), epoch);
             });
}

std::size_t BlockExchange::place(const WorkgroupContext& wg, const FusedPlan& plan,
                                 const BlockRoute& route, const PeerHeaders* headers) {
  if (headers == nullptr) return route.inbox;
  check_header(wg, plan, route.peer, *headers);  // the peer has begun the call and agrees
  const std::uint64_t row =
      header_slot(ctx_->topo.local_rank, plan.parity(), route.peer)[header_words_ - 1];
  return row == 0 ? route.inbox : (row - 1) * ld_ + route.placed;
}

void BlockExchange::produce(const WorkgroupContext& wg, const FusedPlan& plan, std::size_t i,
                            const BlockRoute& route, std::size_t staged, float* out,
                            const Compute& compute, const PeerHeaders* headers) {
  const Block& b = route.block;
  const auto tile = static_cast<std::int64_t>(i);
  const auto bytes = static_cast<std::int64_t>(b.floats() * sizeof(float));
  switch (plan.dest(route.peer)) {
    case FusedPlan::Dest::Self:
      compute(i, out + b.offset, ld_);
      wg.mark("tile computed", tile, route.peer, bytes);
      return;
    case FusedPlan::Dest::OnNode: {
      const int local = ctx_->topo.local_of[route.peer];
      const std::size_t at = place(wg, plan, route, headers);
      await_released(local, route.peer, plan.epoch());
      compute(i, inbox(local, plan.parity()) + at, ld_);
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
                           const BlockRoute& route, float* out, const PeerHeaders* headers,
                           bool zero_copy) {
  const int my_local = ctx_->topo.local_rank;
  if (headers != nullptr) check_header(wg, plan, route.peer, *headers);
  plan.await(wg, route.peer, flags_[my_local], route.flag, what_);
  if (plan.dest(route.peer) != FusedPlan::Dest::OnNode) return;  // the proxy received it in place
  if (zero_copy) return;  // stored straight into `out`, which is this half (route.inbox = offset)
  const Block& b = route.block;
  const float* src = inbox(my_local, plan.parity()) + route.inbox;
  for (std::size_t r = 0; r < b.rows; ++r)
    std::memcpy(out + b.offset + r * ld_, src + r * ld_, b.cols * sizeof(float));
}

void BlockExchange::send_input(const WorkgroupContext& wg, const FusedPlan& plan, std::size_t i,
                               const InputRoute& route) {
  const auto bytes = static_cast<std::int64_t>(route.floats * sizeof(float));
  const auto mark = -2 - static_cast<std::int64_t>(i);  // trace: inputs are tiles -2, -3, ...
  if (plan.dest(route.peer) == FusedPlan::Dest::OnNode) {
    const int local = ctx_->topo.local_of[route.peer];
    await_released(local, route.peer, plan.epoch());
    std::memcpy(input_half(local, plan.epoch()) + route.offset, route.src,
                route.floats * sizeof(float));
    plan.release(wg, input_flags_[local], route.flag, route.peer, mark, bytes);
  } else {
    plan.send(wg, route.src, static_cast<int>(route.floats), MPI_FLOAT, route.peer,
              static_cast<int>(input_tag(route.flag)), mark, bytes);
  }
}

void BlockExchange::send_header(const WorkgroupContext& wg, const FusedPlan& plan, int peer,
                                const PeerHeaders& headers, bool zero_copy) {
  auto fill = [&](std::uint64_t* words) {
    headers.fill(peer, words);
    words[header_words_ - 1] = zero_copy ? 1 + headers.output_row(peer) : 0;
  };
  const int me = ctx_->topo.rank;
  const auto bytes = static_cast<std::int64_t>(header_words_ * sizeof(std::uint64_t));
  if (plan.dest(peer) == FusedPlan::Dest::OnNode) {
    const int local = ctx_->topo.local_of[peer];
    await_released(local, peer, plan.epoch());
    fill(header_slot(local, plan.parity(), me));
    plan.release(wg, flags_[local], header_flag(me), peer, -1, bytes);
  } else {
    std::uint64_t* words = header_out_.data() + static_cast<std::size_t>(peer) * header_words_;
    fill(words);
    plan.send(wg, words, static_cast<int>(header_words_), MPI_UINT64_T, peer,
              static_cast<int>(header_tag()), -1, bytes);
  }
}

void BlockExchange::check_header(const WorkgroupContext& wg, const FusedPlan& plan, int peer,
                                 const PeerHeaders& headers) {
  const std::uint32_t epoch = plan.epoch();
  if (checked_[peer].load(std::memory_order_acquire) == epoch) return;
  const int my_local = ctx_->topo.local_rank;
  const TileFlags& flags = flags_[my_local];
  if (plan.dest(peer) == FusedPlan::Dest::OnNode) {
    if (!flags.test(header_flag(peer), epoch))
      wait_until([&] { return flags.test(header_flag(peer), epoch); }, ctx_->comm.timeout_s,
                 [&] {
                   return fmt::format(
                       "{}: the per-call header of on-node rank {} for call {} did not arrive "
                       "(its flag holds {})",
                       ctx_->info.name, peer, epoch, flags.load(header_flag(peer)));
                 });
  } else {
    plan.await(wg, peer, flags, header_flag(peer), header_what_.c_str());
  }
  headers.check(peer, header_slot(my_local, plan.parity(), peer));
  checked_[peer].store(epoch, std::memory_order_release);
}

}  // namespace tilecomm::detail
