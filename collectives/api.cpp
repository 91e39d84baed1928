// The public collective calls: validate on the calling rank before any communication, choose the
// algorithm, then run it in issue order (inline, or on the progress thread for i* calls).
#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <utility>

#include "collectives/algorithm.hpp"
#include "collectives/validate.hpp"
#include "collectives/verify.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {

struct Request::State {
  std::atomic<bool> done{false};
  std::exception_ptr error;  // written before done is set
  detail::CollArgs args;     // owns the All-to-Allv layouts while the request is in flight
};

namespace detail {
/// How the collectives make a Request (its constructor is private).
struct RequestAccess {
  using State = Request::State;
  static Request make(std::shared_ptr<State> state) { return Request(std::move(state)); }
};
}  // namespace detail

bool Request::test() {
  if (!state_) return true;
  if (!state_->done.load(std::memory_order_acquire)) return false;
  if (state_->error) std::rethrow_exception(std::exchange(state_->error, nullptr));
  return true;
}

void Request::wait() {
  if (!state_) return;
  wait_until([&] { return state_->done.load(std::memory_order_acquire); }, 0.0, [] { return ""; });
  test();
}

namespace detail {
namespace {

[[noreturn]] void invalid(const CollArgs& a, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, fmt::format("{}: {}", to_string(a.coll), what));
}

std::string count_text(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))
    return fmt::format("{} (negative: {})", n, static_cast<std::int64_t>(n));
  return std::to_string(n);
}

// Bytes of `n` elements, or an error naming the argument when it overflows.
std::size_t extent(const CollArgs& a, const char* arg, std::size_t n, std::size_t mult = 1) {
  const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  if (mult != 0 && n > limit / mult / a.elem())
    invalid(a, fmt::format("{} = {} overflows: {} x {} elements x {} bytes", arg, count_text(n), n,
                           mult, a.elem()));
  return n * mult * a.elem();
}

void validate_buffer(const CollArgs& a, const char* arg, const void* p, std::size_t bytes) {
  if (p == nullptr && bytes > 0)
    invalid(a, fmt::format("{} is null with {} bytes to access", arg, bytes));
}

// All-to-Allv: `size` counts and displacements, each block within the buffer's capacity.
void validate_var_layout(const CollArgs& a, const VarLayout& layout, const char* side, int size) {
  if (layout.counts.size() != static_cast<std::size_t>(size) ||
      layout.displs.size() != static_cast<std::size_t>(size))
    invalid(a, fmt::format("{}_layout has {} counts and {} displs; the communicator has {} ranks",
                           side, layout.counts.size(), layout.displs.size(), size));
  extent(a, fmt::format("{}_layout.capacity", side).c_str(), layout.capacity);
  for (int p = 0; p < size; ++p) {
    std::size_t c = layout.counts[p], d = layout.displs[p];
    if (c > layout.capacity || d > layout.capacity - c)
      invalid(a, fmt::format("{}_layout: peer {} has count {} at displacement {}, past the "
                             "buffer of {} elements",
                             side, p, count_text(c), count_text(d), layout.capacity));
  }
}

// Without forming y + nb or x + na, which could wrap.
bool overlap(const void* a, std::size_t na, const void* b, std::size_t nb) {
  if (na == 0 || nb == 0) return false;
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x >= y ? x - y < nb : y - x < na;
}

}  // namespace

// Send/recv extents, and the send address that means "in place" (collectives/validate.hpp).
void validate_layout(CollArgs& a, int rank, int size) {
  if (static_cast<unsigned>(a.dtype) > static_cast<unsigned>(DataType::BFloat16))
    invalid(a, fmt::format("dtype = {} is not a DataType", static_cast<int>(a.dtype)));
  if (static_cast<unsigned>(a.op) > static_cast<unsigned>(ReduceOp::Min))
    invalid(a, fmt::format("op = {} is not a ReduceOp", static_cast<int>(a.op)));
  std::size_t send_bytes = 0, recv_bytes = 0;
  // The send address that means "in place", as an integer: recv -/+ rank blocks is computed
  // before the extents are known to fit the address space, and pointer arithmetic that wraps is UB.
  // 0: no in-place address (null recv, or the block would lie outside the address space).
  std::uintptr_t in_place_send = 0;
  const auto recv = reinterpret_cast<std::uintptr_t>(a.recv);

  switch (a.coll) {
    case Collective::AllReduce:
      send_bytes = recv_bytes = extent(a, "count", a.count);
      in_place_send = recv;
      break;
    case Collective::ReduceScatter:
      recv_bytes = extent(a, "recv_count", a.count);
      send_bytes = extent(a, "recv_count", a.count, size);
      if (recv && rank * recv_bytes <= recv) in_place_send = recv - rank * recv_bytes;
      break;
    case Collective::AllGather:
      send_bytes = extent(a, "send_count", a.count);
      recv_bytes = extent(a, "send_count", a.count, size);
      if (recv && rank * send_bytes <= UINTPTR_MAX - recv) in_place_send = recv + rank * send_bytes;
      break;
    case Collective::AllToAll:
      send_bytes = recv_bytes = extent(a, "count", a.count, size);
      in_place_send = recv;
      break;
    case Collective::Broadcast:
      if (a.root < 0 || a.root >= size)
        invalid(a,
                fmt::format("root = {} is not a rank of the communicator (size {})", a.root, size));
      send_bytes = recv_bytes = extent(a, "count", a.count);
      in_place_send = recv;
      break;
    case Collective::AllToAllv:
      validate_var_layout(a, a.send_layout, "send", size);
      validate_var_layout(a, a.recv_layout, "recv", size);
      send_bytes = a.send_layout.capacity * a.elem();
      recv_bytes = a.recv_layout.capacity * a.elem();
      break;
  }
  validate_buffer(a, "send", a.send, send_bytes);
  validate_buffer(a, "recv", a.recv, recv_bytes);
  a.in_place = a.coll != Collective::AllToAllv && a.send != nullptr &&
               reinterpret_cast<std::uintptr_t>(a.send) == in_place_send && send_bytes > 0;
  if (!a.in_place && overlap(a.send, send_bytes, a.recv, recv_bytes))
    invalid(a, fmt::format("send [{}, +{} B) and recv [{}, +{} B) overlap without being in place",
                           a.send, send_bytes, a.recv, recv_bytes));
}

namespace {

Request post(Communicator& comm, CollArgs args, const CollectiveOptions& options, bool blocking) {
  CommImpl& impl = impl_of(comm);
  impl.refuse_if_failed(to_string(args.coll));
  validate_layout(args, impl.topo.rank, impl.topo.size);
  const Algorithm& algo = choose_algorithm(impl, args, options.algorithm, options.order);
  // Verify mode compares the call after local validation and selection: a call rejected above
  // raises on its rank before any communication (as collectives.hpp promises) and is not a call.
  // The fingerprint carries the algorithm as requested, so differing forced algorithms are caught.
  if (impl.verifier.enabled())
    impl.run_guarded([&] {
      verify_call(
          impl,
          fingerprint_of(args, options.algorithm, impl.topo.rank, impl.topo.size, options.order),
          &args);
    });
  if (blocking) {
    impl.queue.run_blocking([&] { impl.run_guarded([&] { algo.run(impl, args); }); });
    return {};
  }
  auto state = std::make_shared<RequestAccess::State>();
  state->args = std::move(args);
  impl.queue.run_async(
      [&impl, &algo, state] { impl.run_guarded([&] { algo.run(impl, state->args); }); },
      [state](std::exception_ptr e) {
        state->error = e;
        state->done.store(true, std::memory_order_release);
      });
  return RequestAccess::make(std::move(state));
}

CollArgs make(Collective coll, const void* send, void* recv, std::size_t count, DataType dtype,
              ReduceOp op) {
  CollArgs a;
  a.coll = coll;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return a;
}

CollArgs make_v(const void* send, const VarLayout& sl, void* recv, const VarLayout& rl,
                DataType dtype) {
  CollArgs a = make(Collective::AllToAllv, send, recv, 0, dtype, ReduceOp::Sum);
  a.send_layout = sl;
  a.recv_layout = rl;
  return a;
}

CollArgs make_bcast(void* buf, std::size_t count, DataType dtype, int root) {
  CollArgs a = make(Collective::Broadcast, buf, buf, count, dtype, ReduceOp::Sum);
  a.root = root;
  return a;
}

}  // namespace
}  // namespace detail

using detail::make;
using detail::make_bcast;
using detail::make_v;
using detail::post;

void allreduce(Communicator& comm, const void* send, void* recv, std::size_t count, DataType dtype,
               ReduceOp op, const CollectiveOptions& o) {
  post(comm, make(Collective::AllReduce, send, recv, count, dtype, op), o, true);
}
Request iallreduce(Communicator& comm, const void* send, void* recv, std::size_t count,
                   DataType dtype, ReduceOp op, const CollectiveOptions& o) {
  return post(comm, make(Collective::AllReduce, send, recv, count, dtype, op), o, false);
}
void reduce_scatter(Communicator& comm, const void* send, void* recv, std::size_t recv_count,
                    DataType dtype, ReduceOp op, const CollectiveOptions& o) {
  post(comm, make(Collective::ReduceScatter, send, recv, recv_count, dtype, op), o, true);
}
Request ireduce_scatter(Communicator& comm, const void* send, void* recv, std::size_t recv_count,
                        DataType dtype, ReduceOp op, const CollectiveOptions& o) {
  return post(comm, make(Collective::ReduceScatter, send, recv, recv_count, dtype, op), o, false);
}
void allgather(Communicator& comm, const void* send, void* recv, std::size_t send_count,
               DataType dtype, const CollectiveOptions& o) {
  post(comm, make(Collective::AllGather, send, recv, send_count, dtype, ReduceOp::Sum), o, true);
}
Request iallgather(Communicator& comm, const void* send, void* recv, std::size_t send_count,
                   DataType dtype, const CollectiveOptions& o) {
  return post(comm, make(Collective::AllGather, send, recv, send_count, dtype, ReduceOp::Sum), o,
              false);
}
void alltoall(Communicator& comm, const void* send, void* recv, std::size_t count, DataType dtype,
              const CollectiveOptions& o) {
  post(comm, make(Collective::AllToAll, send, recv, count, dtype, ReduceOp::Sum), o, true);
}
Request ialltoall(Communicator& comm, const void* send, void* recv, std::size_t count,
                  DataType dtype, const CollectiveOptions& o) {
  return post(comm, make(Collective::AllToAll, send, recv, count, dtype, ReduceOp::Sum), o, false);
}
void alltoallv(Communicator& comm, const void* send, const VarLayout& sl, void* recv,
               const VarLayout& rl, DataType dtype, const CollectiveOptions& o) {
  post(comm, make_v(send, sl, recv, rl, dtype), o, true);
}
Request ialltoallv(Communicator& comm, const void* send, const VarLayout& sl, void* recv,
                   const VarLayout& rl, DataType dtype, const CollectiveOptions& o) {
  return post(comm, make_v(send, sl, recv, rl, dtype), o, false);
}

void broadcast(Communicator& comm, void* buf, std::size_t count, DataType dtype, int root,
               const CollectiveOptions& o) {
  post(comm, make_bcast(buf, count, dtype, root), o, true);
}
Request ibroadcast(Communicator& comm, void* buf, std::size_t count, DataType dtype, int root,
                   const CollectiveOptions& o) {
  return post(comm, make_bcast(buf, count, dtype, root), o, false);
}

void barrier(Communicator& comm) {
  comm.barrier();
}
Request ibarrier(Communicator& comm) {
  detail::CommImpl& impl = detail::impl_of(comm);
  impl.refuse_if_failed("barrier");
  auto state = std::make_shared<detail::RequestAccess::State>();
  impl.queue.run_async([&impl] { impl.run_guarded([&impl] { detail::run_barrier(impl); }); },
                       [state](std::exception_ptr e) {
                         state->error = e;
                         state->done.store(true, std::memory_order_release);
                       });
  return detail::RequestAccess::make(std::move(state));
}

std::string selected_algorithm(const Communicator& comm, Collective c, std::size_t count,
                               DataType dtype) {
  detail::CollArgs a = make(c, nullptr, nullptr, count, dtype, ReduceOp::Sum);
  return detail::choose_algorithm(detail::impl_of(comm), a, "").name;
}

}  // namespace tilecomm
