// Communicator construction (node split, real or pretend; verify mode; symmetric shared segment),
// the wait for MPI requests, and the public Communicator's members.
#include "collectives/comm_impl.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "runtime/wait.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

void require_mpi_ready(MPI_Comm user) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw Error(ErrorCode::InvalidUsage,
                "Communicator: MPI is not initialised (or already finalised)");
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE)
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("Communicator: MPI thread level is {}; tilecomm needs "
                            "MPI_THREAD_MULTIPLE (initialise with MPI_Init_thread)",
                            level));
  if (user == MPI_COMM_NULL)
    throw Error(ErrorCode::InvalidArgument, "Communicator: comm = MPI_COMM_NULL");
}

double timeout_of(const CommConfig& config) {
  return config.timeout_s >= 0 ? config.timeout_s : env().timeout_s;
}
bool verify_requested(const CommConfig& config) {
  return config.check >= 0 ? config.check > 0 : env().check;
}
std::size_t shm_bytes_of(const CommConfig& config) {
  return config.shm_bytes > 0 ? config.shm_bytes : env().shm_bytes;
}

}  // namespace

CommHandles::~CommHandles() {
  free_comm(cross_mpi, failed);
  free_comm(node_mpi, failed);
  free_comm(mpi, failed);
}

Topology CommImpl::connect(CommHandles& handles, MPI_Comm user, const CommConfig& config) {
  require_mpi_ready(user);
  const int pretend = config.node_size >= 0 ? config.node_size : env().node_size;
  mpi_check(MPI_Comm_dup(user, &handles.mpi), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(handles.mpi, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(handles.mpi, &rank);
  if (pretend > 0) {
    mpi_check(MPI_Comm_split(handles.mpi, rank / pretend, rank, &handles.node_mpi),
              "MPI_Comm_split(pretend node)");
  } else {
    mpi_check(MPI_Comm_split_type(handles.mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                  &handles.node_mpi),
              "MPI_Comm_split_type(SHARED)");
  }
  MPI_Comm_set_errhandler(handles.node_mpi, MPI_ERRORS_RETURN);
  Topology topo(handles.mpi, handles.node_mpi);
  mpi_check(MPI_Comm_split(handles.mpi, topo.local_rank, topo.node, &handles.cross_mpi),
            "MPI_Comm_split(cross)");
  MPI_Comm_set_errhandler(handles.cross_mpi, MPI_ERRORS_RETURN);
  return topo;
}

CommImpl::CommImpl(MPI_Comm user, const CommConfig& config)
    : topo(connect(*this, user, config)),
      timeout_s(timeout_of(config)),
      verifier(mpi, verify_requested(config)),
      segment(node_mpi, topo, shm_bytes_of(config), timeout_s) {
  mpi_check(MPI_Barrier(mpi), "MPI_Barrier");
}

void CommImpl::mark_failed(const std::string& why) {
  std::lock_guard lock(failure_mu_);
  if (failure_.empty()) failure_ = why;
  failed = true;
  verifier.retire();
}

void CommImpl::refuse_if_failed(std::string_view what) const {
  std::lock_guard lock(failure_mu_);
  if (failure_.empty()) return;
  throw Error(ErrorCode::InvalidUsage,
              fmt::format("{}: the communicator failed earlier ({}); it cannot be used again "
                          "(ranks are out of step, MPI requests may be pending): abandon it, or "
                          "MPI_Abort",
                          what, failure_));
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
        return fmt::format("{}: rank {}: {} of {} MPI requests did not complete ({})", what,
                           topo.rank, pending(), n, who);
      },
      WaitPolicy::progress());
}

}  // namespace tilecomm::detail

namespace tilecomm {

Communicator::Communicator(MPI_Comm comm, CommConfig config)
    : impl_(std::make_unique<detail::CommImpl>(comm, config)) {}
Communicator::~Communicator() = default;
int Communicator::rank() const {
  return impl_->topo.rank;
}
int Communicator::size() const {
  return impl_->topo.size;
}
int Communicator::node() const {
  return impl_->topo.node;
}
int Communicator::num_nodes() const {
  return impl_->topo.num_nodes;
}
int Communicator::local_rank() const {
  return impl_->topo.local_rank;
}
int Communicator::local_size() const {
  return impl_->topo.local_size;
}
int Communicator::node_of(int r) const {
  return impl_->topo.node_of.at(r);
}
MPI_Comm Communicator::mpi_comm() const {
  return impl_->mpi;
}

void Communicator::barrier() {
  detail::CommImpl& c = *impl_;
  c.refuse_if_failed("barrier");
  c.queue.run_blocking([&c] { c.run_guarded([&c] { detail::run_barrier(c); }); });
}

namespace detail {
void run_barrier(CommImpl& c) {
  c.segment.node_barrier();
  if (c.topo.num_nodes > 1 && c.topo.local_rank == 0) {
    MPI_Request r;
    mpi_check(MPI_Ibarrier(c.cross_mpi, &r), "MPI_Ibarrier");
    c.wait_all(&r, 1, "barrier (MPI_Ibarrier over node leaders)");
  }
  c.segment.node_barrier();
}
}  // namespace detail

}  // namespace tilecomm
