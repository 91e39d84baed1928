#pragma once
// Private state of a Communicator, and the primitives every algorithm builds on: node-local shared
// memory with flags, a node barrier, and MPI point-to-point helpers with deadlines.

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tilecomm/communicator.hpp"

namespace tilecomm::detail {

/// Throws Error(MpiError) naming `what` when rc != MPI_SUCCESS.
void mpi_check(int rc, const char* what);

struct CommImpl {
  CommImpl(MPI_Comm user, const CommConfig& config);
  ~CommImpl();

  // ---- layout ------------------------------------------------------------------------------
  MPI_Comm comm = MPI_COMM_NULL;        // duplicate of the user's communicator
  MPI_Comm node_comm = MPI_COMM_NULL;   // ranks of this node (real or pretend)
  MPI_Comm cross_comm = MPI_COMM_NULL;  // ranks with this local_rank on every node, by node
  int rank = 0, size = 1;
  int node = 0, num_nodes = 1;
  int local_rank = 0, local_size = 1;
  std::vector<int> node_of;          // world rank -> node
  std::vector<int> local_of;         // world rank -> local rank on its node
  std::vector<int> local_to_world;   // local rank on this node -> world rank
  std::vector<std::vector<int>> node_ranks;  // node -> its world ranks, ascending
  double timeout_s = 0;

  bool on_node(int world_rank) const { return node_of[world_rank] == node; }

  // ---- shared memory ------------------------------------------------------------------------
  // Each local rank's segment: kFlags flags (one 64-byte line each), then shm_bytes of data. All
  // segments have the same layout ("symmetric"), so an offset means the same thing everywhere.
  static constexpr int kFlags = 64;
  static constexpr std::size_t kFlagStride = 64;
  static constexpr std::size_t kCtrlBytes = kFlags * kFlagStride;
  static constexpr int kBarrierFlag = 0;  // flags 1.. are free for algorithms
  std::size_t shm_bytes = 0;
  MPI_Win win = MPI_WIN_NULL;
  std::vector<std::byte*> segment;  // local rank -> base of its segment (control area)

  std::byte* shm_data(int local) const { return segment[local] + kCtrlBytes; }
  std::atomic_ref<std::uint64_t> flag(int local, int idx) const {
    return std::atomic_ref<std::uint64_t>(
        *reinterpret_cast<std::uint64_t*>(segment[local] + idx * kFlagStride));
  }
  /// Stores v into flag idx of local rank `local` with release order.
  void post(int local, int idx, std::uint64_t v) const {
    flag(local, idx).store(v, std::memory_order_release);
  }
  /// Waits (backing off) until flag idx of `local` holds >= v, acquire order. On timeout throws
  /// Error(Timeout) naming `what`, the world rank waited for, and the values.
  void wait_flag(int local, int idx, std::uint64_t v, const char* what) const;
  /// All ranks of this node.
  void node_barrier();
  std::uint64_t barrier_epoch = 0;

  // ---- sequencing ----------------------------------------------------------------------------
  /// Sequence number of collective calls on this communicator (same on every rank); algorithms
  /// derive flag values from it so flags never need resetting.
  std::uint64_t seq = 0;

  // ---- verify mode (collectives/check.hpp) ---------------------------------------------------
  /// Fingerprint every call across ranks before running it (CommConfig::check / TILECOMM_CHECK).
  bool check = false;
  /// Private duplicate of `comm` carrying only fingerprints (MPI_COMM_NULL when check is off).
  MPI_Comm check_comm = MPI_COMM_NULL;
  /// Calls checked so far (same on every rank while they agree); counted on the calling thread.
  std::uint64_t check_seq = 0;
  /// Send buffer of the last fingerprint: 64 bytes that outlive a timed-out exchange.
  alignas(64) std::byte check_sendbuf[64] = {};

  // ---- MPI point-to-point ----------------------------------------------------------------------
  /// Completes all requests, polling with backoff; on timeout cancels nothing and throws
  /// Error(Timeout) naming `what`, this rank, how many requests are still pending and `peers` (the
  /// ranks these requests talk to; callers that pass none get "peers not recorded"). Null
  /// requests are ignored.
  void wait_all(MPI_Request* reqs, int n, const char* what,
                std::initializer_list<int> peers = {}) const;

  /// Private staging memory of the MPI point-to-point algorithms (collectives/p2p_common.hpp):
  /// grown lazily, never beyond shm_bytes, reused by every call (calls are serialized).
  std::vector<std::byte> p2p_staging;

  // ---- execution order for blocking and non-blocking calls -----------------------------------
  /// Runs `op` after every earlier queued operation: inline when the queue is empty (blocking
  /// calls), else through the progress thread.
  void run_blocking(const std::function<void()>& op);
  /// Queues `op` for the progress thread; `done(error)` is called after it runs.
  void run_async(std::function<void()> op, std::function<void(std::exception_ptr)> done);
  void progress_loop();

  std::mutex queue_mu;
  std::condition_variable queue_cv;
  struct Queued {
    std::function<void()> op;
    std::function<void(std::exception_ptr)> done;
  };
  std::deque<Queued> queue;
  std::size_t in_flight = 0;  // queued + running, guarded by queue_mu
  bool stopping = false;
  std::thread progress;
};

}  // namespace tilecomm::detail
