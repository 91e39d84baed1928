#pragma once
// The communicator's node-local shared memory: one segment per local rank in a symmetric MPI
// shared window, control flags at the start of each, and the node barrier built on them.

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/topology.hpp"

namespace tilecomm::detail {

/// Each local rank's segment: kFlags flags (one 64-byte line each), then data_bytes() of data.
/// All segments have the same layout ("symmetric"), so an offset means the same thing everywhere.
/// Every rank of the node loads and stores all of them directly.
class SharedSegment {
 public:
  static constexpr int kFlags = 64;
  static constexpr std::size_t kFlagStride = 64;
  static constexpr std::size_t kControlBytes = kFlags * kFlagStride;
  static constexpr int kBarrierFlag = 0;  ///< flags 1.. are free for algorithms

  /// Collective over `node_comm` (the ranks of `topology`'s node): allocates the window with
  /// `data_bytes` (rounded up to 64) of data per rank, maps every local rank's segment and zeroes
  /// this rank's flags. `topology` must outlive this object; waits give up after `timeout_s`.
  SharedSegment(MPI_Comm node_comm, const Topology& topology, std::size_t data_bytes,
                double timeout_s);
  /// Frees the window.
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  /// Bytes of data in each segment (a multiple of 64).
  std::size_t data_bytes() const { return data_bytes_; }
  /// The data area of local rank `local`'s segment.
  std::byte* data(int local) const { return bases_[local] + kControlBytes; }
  /// Flag `index` of local rank `local`.
  std::atomic_ref<std::uint64_t> flag(int local, int index) const {
    return std::atomic_ref<std::uint64_t>(
        *reinterpret_cast<std::uint64_t*>(bases_[local] + index * kFlagStride));
  }
  /// Stores `value` into flag `index` of local rank `local` with release order.
  void post(int local, int index, std::uint64_t value) const {
    flag(local, index).store(value, std::memory_order_release);
  }
  /// Waits (backing off) until flag `index` of `local` holds >= `value`, acquire order. On
  /// timeout throws Error(Timeout) naming `what`, the world rank waited for, and the values.
  void wait_flag(int local, int index, std::uint64_t value, const char* what) const;
  /// Waits for all ranks of this node.
  void node_barrier();

  const Topology& topology() const { return topo_; }
  double timeout_s() const { return timeout_s_; }

 private:
  const Topology& topo_;
  double timeout_s_;
  std::size_t data_bytes_;
  MPI_Win win_ = MPI_WIN_NULL;
  std::vector<std::byte*> bases_;  ///< local rank -> base of its segment (control area first)
  std::uint64_t barrier_epoch_ = 0;
};

}  // namespace tilecomm::detail
