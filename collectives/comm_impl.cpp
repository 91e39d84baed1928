// Communicator construction: node split (real or pretend), symmetric shared segment, progress
// thread; and the shared-memory and MPI primitives algorithms use.
#include "collectives/comm_impl.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "runtime/wait.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(ErrorCode::MpiError, fmt::format("{} failed: {}", what, std::string(text, len)));
}

CommImpl::CommImpl(MPI_Comm user, const CommConfig& config) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw Error(ErrorCode::InvalidUsage, "Communicator: MPI is not initialised (or already finalised)");
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE)
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("Communicator: MPI thread level is {}; tilecomm needs MPI_THREAD_MULTIPLE "
                            "(initialise with MPI_Init_thread)", level));
  if (user == MPI_COMM_NULL) throw Error(ErrorCode::InvalidArgument, "Communicator: comm = MPI_COMM_NULL");

  const Env& e = env();
  shm_bytes = config.shm_bytes > 0 ? config.shm_bytes : e.shm_bytes;
  shm_bytes = (shm_bytes + 63) & ~std::size_t{63};
  const int pretend = config.node_size >= 0 ? config.node_size : e.node_size;
  timeout_s = config.timeout_s >= 0 ? config.timeout_s : e.timeout_s;

  mpi_check(MPI_Comm_dup(user, &comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);

  if (pretend > 0) {
    mpi_check(MPI_Comm_split(comm, rank / pretend, rank, &node_comm), "MPI_Comm_split(pretend node)");
  } else {
    mpi_check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm),
              "MPI_Comm_split_type(SHARED)");
  }
  MPI_Comm_set_errhandler(node_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(node_comm, &local_rank);
  MPI_Comm_size(node_comm, &local_size);

  // Node ids: nodes numbered by their lowest world rank.
  int leader = rank;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node_comm), "MPI_Allreduce");
  std::vector<int> leaders(size), locals(size);
  mpi_check(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm), "MPI_Allgather");
  mpi_check(MPI_Allgather(&local_rank, 1, MPI_INT, locals.data(), 1, MPI_INT, comm), "MPI_Allgather");
  std::vector<int> sorted = leaders;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  num_nodes = static_cast<int>(sorted.size());
  node_of.resize(size);
  node_ranks.assign(num_nodes, {});
  for (int r = 0; r < size; ++r) {
    node_of[r] = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), leaders[r]) - sorted.begin());
    node_ranks[node_of[r]].push_back(r);
  }
  local_of = locals;
  node = node_of[rank];
  local_to_world = node_ranks[node];
  mpi_check(MPI_Comm_split(comm, local_rank, node, &cross_comm), "MPI_Comm_split(cross)");
  MPI_Comm_set_errhandler(cross_comm, MPI_ERRORS_RETURN);

  // Verify mode: on everywhere when any rank asks (a rank that skipped the exchange would hang).
  int want_check = config.check >= 0 ? (config.check > 0 ? 1 : 0) : (e.check ? 1 : 0);
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &want_check, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  check = want_check != 0;
  if (check) {
    mpi_check(MPI_Comm_dup(comm, &check_comm), "MPI_Comm_dup(check)");
    MPI_Comm_set_errhandler(check_comm, MPI_ERRORS_RETURN);
  }

  // The symmetric segment.
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  const std::size_t bytes = kCtrlBytes + shm_bytes;
  int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, info, node_comm, &base, &win);
  MPI_Info_free(&info);
  mpi_check(rc, "MPI_Win_allocate_shared");
  segment.resize(local_size);
  for (int l = 0; l < local_size; ++l) {
    MPI_Aint sz = 0;
    int disp = 0;
    void* p = nullptr;
    mpi_check(MPI_Win_shared_query(win, l, &sz, &disp, &p), "MPI_Win_shared_query");
    segment[l] = static_cast<std::byte*>(p);
  }
  std::memset(segment[local_rank], 0, kCtrlBytes);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  mpi_check(MPI_Barrier(comm), "MPI_Barrier");
}

CommImpl::~CommImpl() {
  {
    std::lock_guard lock(queue_mu);
    stopping = true;
  }
  queue_cv.notify_all();
  if (progress.joinable()) progress.join();
  if (win != MPI_WIN_NULL) MPI_Win_free(&win);
  if (check_comm != MPI_COMM_NULL) MPI_Comm_free(&check_comm);
  if (cross_comm != MPI_COMM_NULL) MPI_Comm_free(&cross_comm);
  if (node_comm != MPI_COMM_NULL) MPI_Comm_free(&node_comm);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

void CommImpl::wait_flag(int local, int idx, std::uint64_t v, const char* what) const {
  auto f = flag(local, idx);
  wait_until([&] { return f.load(std::memory_order_acquire) >= v; }, timeout_s, [&] {
    return fmt::format("{}: rank {} waited for rank {} (flag {} = {}, expected >= {})", what, rank,
                       local_to_world[local], idx, f.load(), v);
  });
}

void CommImpl::node_barrier() {
  if (local_size == 1) return;
  const std::uint64_t e = ++barrier_epoch;
  post(local_rank, kBarrierFlag, e);
  for (int l = 0; l < local_size; ++l)
    if (l != local_rank) wait_flag(l, kBarrierFlag, e, "node barrier");
}

void CommImpl::wait_all(MPI_Request* reqs, int n, const char* what,
                        std::initializer_list<int> peers) const {
  if (n == 0) return;
  std::vector<int> idx(n);
  auto pending = [&] {
    return static_cast<int>(
        std::count_if(reqs, reqs + n, [](MPI_Request r) { return r != MPI_REQUEST_NULL; }));
  };
  wait_until(
      [&] {
        int outcount = 0;  // completed requests become MPI_REQUEST_NULL
        int rc = MPI_Testsome(n, reqs, &outcount, idx.data(), MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) mpi_check(rc, what);
        return outcount == MPI_UNDEFINED || pending() == 0;
      },
      timeout_s,
      [&] {
        const std::string who =
            peers.size() == 0 ? std::string("peers not recorded by the caller")
                              : fmt::format("waiting for peer rank{} {}",
                                            peers.size() == 1 ? "" : "s", fmt::join(peers, ", "));
        return fmt::format("{}: rank {}: {} of {} MPI requests did not complete ({})", what, rank,
                           pending(), n, who);
      });
}

// ---------------------------------------------------------------- execution order

void CommImpl::run_blocking(const std::function<void()>& op) {
  {
    std::unique_lock lock(queue_mu);
    if (in_flight > 0) {  // keep issue order: go through the queue behind earlier requests
      std::exception_ptr error;
      bool finished = false;
      lock.unlock();
      run_async(op, [&](std::exception_ptr e) {
        std::lock_guard l(queue_mu);
        error = e;
        finished = true;
        queue_cv.notify_all();
      });
      lock.lock();
      queue_cv.wait(lock, [&] { return finished; });
      if (error) std::rethrow_exception(error);
      return;
    }
  }
  op();
}

void CommImpl::run_async(std::function<void()> op, std::function<void(std::exception_ptr)> done) {
  std::lock_guard lock(queue_mu);
  if (!progress.joinable()) progress = std::thread([this] { progress_loop(); });
  queue.push_back({std::move(op), std::move(done)});
  ++in_flight;
  queue_cv.notify_all();
}

void CommImpl::progress_loop() {
  std::unique_lock lock(queue_mu);
  for (;;) {
    queue_cv.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty()) return;  // stopping and drained
    Queued q = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      q.op();
    } catch (...) {
      error = std::current_exception();
    }
    q.done(error);
    lock.lock();
    --in_flight;
    queue_cv.notify_all();
  }
}

}  // namespace tilecomm::detail

namespace tilecomm {

Communicator::Communicator(MPI_Comm comm, CommConfig config)
    : impl_(std::make_unique<detail::CommImpl>(comm, config)) {}
Communicator::~Communicator() = default;
int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
int Communicator::node() const { return impl_->node; }
int Communicator::num_nodes() const { return impl_->num_nodes; }
int Communicator::local_rank() const { return impl_->local_rank; }
int Communicator::local_size() const { return impl_->local_size; }
int Communicator::node_of(int r) const { return impl_->node_of.at(r); }
MPI_Comm Communicator::mpi_comm() const { return impl_->comm; }

void Communicator::barrier() {
  impl_->run_blocking([this] {
    impl_->node_barrier();
    if (impl_->num_nodes > 1 && impl_->local_rank == 0) {
      MPI_Request r;
      detail::mpi_check(MPI_Ibarrier(impl_->cross_comm, &r), "MPI_Ibarrier");
      impl_->wait_all(&r, 1, "barrier (MPI_Ibarrier over node leaders)");
    }
    impl_->node_barrier();
  });
}

}  // namespace tilecomm
