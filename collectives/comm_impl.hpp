#pragma once
// Private state of a Communicator: its MPI communicators, where its ranks are (Topology), the
// node's shared memory (SharedSegment), verify mode (Verifier), the progress thread
// (ProgressQueue), and the deadline-bounded wait for MPI requests every algorithm uses.

#include <mpi.h>

#include <cstddef>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/mpi_check.hpp"
#include "collectives/progress_queue.hpp"
#include "collectives/shared_segment.hpp"
#include "collectives/topology.hpp"
#include "collectives/verify.hpp"
#include "tilecomm/communicator.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

/// The MPI communicators of a Communicator. A base of CommImpl, so they are freed after every
/// member of CommImpl built on them (the shared window, the verifier's duplicate, the queue).
struct CommHandles {
  CommHandles() = default;
  /// Frees cross_mpi, node_mpi and mpi, in that order; keeps them allocated once `failed`
  /// (free_comm()).
  ~CommHandles();
  CommHandles(const CommHandles&) = delete;
  CommHandles& operator=(const CommHandles&) = delete;

  /// The duplicate of the user's communicator that carries tilecomm's traffic.
  MPI_Comm mpi = MPI_COMM_NULL;
  /// The ranks of this node (real, or pretend nodes of CommConfig::node_size ranks).
  MPI_Comm node_mpi = MPI_COMM_NULL;
  /// The ranks with this local rank on every node, in node order.
  MPI_Comm cross_mpi = MPI_COMM_NULL;
  /// Set by CommImpl::mark_failed().
  bool failed = false;
};

struct CommImpl : CommHandles {
  /// Collective over `user`: duplicates it, splits it into nodes, maps the shared segment.
  CommImpl(MPI_Comm user, const CommConfig& config);

  /// Where the ranks are (fixed after construction).
  const Topology topo;
  /// Deadline of every wait inside a call, seconds (<= 0: none).
  const double timeout_s;
  /// Verify mode: fingerprints of every call compared across ranks (collectives/verify.hpp).
  Verifier verifier;
  /// The node's symmetric shared memory, its flags and the node barrier.
  SharedSegment segment;
  /// Private staging memory of the MPI point-to-point algorithms (collectives/p2p_common.hpp):
  /// grown lazily, never beyond segment.data_bytes(), reused by every call (calls are serialized).
  std::vector<std::byte> p2p_staging;
  /// Issue order of blocking and non-blocking calls. Declared last: destroyed first, so the
  /// progress thread has stopped before anything it uses goes away.
  ProgressQueue queue;

  /// Completes all requests, polling under WaitPolicy::progress; on timeout cancels nothing and
  /// throws Error(Timeout) naming `what`, this rank, how many requests are still pending and
  /// `peers` (the ranks these requests talk to; callers that pass none get "peers not recorded").
  /// Null requests are ignored.
  void wait_all(MPI_Request* reqs, int n, const char* what,
                std::initializer_list<int> peers = {}) const;

  /// After a Timeout or MPI error in a call (a collective, or an operator built on this
  /// communicator) ranks are out of step and requests may be pending: the communicator is failed
  /// for good. The first reason is kept. Thread-safe.
  void mark_failed(const std::string& why);
  /// Raises Error(InvalidUsage) naming `what` and the first failure when the communicator failed;
  /// called before a call communicates and before an operator context is built on it.
  void refuse_if_failed(std::string_view what) const;
  /// Runs `call`; a Timeout or MpiError it raises marks the communicator failed, then propagates.
  template <class Call>
  void run_guarded(Call&& call) {
    try {
      call();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Timeout || e.code() == ErrorCode::MpiError) mark_failed(e.what());
      throw;
    }
  }

 private:
  // Checks that MPI is ready, duplicates `user` into handles.mpi, splits handles.node_mpi and
  // handles.cross_mpi, and returns the layout.
  static Topology connect(CommHandles& handles, MPI_Comm user, const CommConfig& config);

  mutable std::mutex failure_mu_;
  std::string failure_;  // the first failure, "" while healthy
};

/// The barrier of Communicator::barrier() and ibarrier(): the node's ranks meet in shared memory,
/// local rank 0 of every node meets the others with MPI_Ibarrier over cross_mpi, the node meets
/// again. Runs in issue order (on the calling thread or the progress thread).
void run_barrier(CommImpl& comm);

/// Access to a Communicator's private state, for the layers built on it (collectives, operators).
struct CommAccess {
  static CommImpl& of(Communicator& c) { return *c.impl_; }
  static const CommImpl& of(const Communicator& c) { return *c.impl_; }
};

inline CommImpl& impl_of(Communicator& c) {
  return CommAccess::of(c);
}
inline const CommImpl& impl_of(const Communicator& c) {
  return CommAccess::of(c);
}

}  // namespace tilecomm::detail
