#pragma once
// Building blocks of the node-local shared-memory algorithms (allreduce one_shot / two_shot /
// hierarchical, reduce_scatter shm, allgather shm, alltoall shm).
//
// The protocol: "steps" over double-buffered halves, DeepSpeed style.
//  - Each local rank's data segment is split into two halves. Step t uses half t % 2.
//  - In step t a rank (1) writes its half t % 2, (2) publishes t in its step flag (release),
//    (3) waits until every local peer has published >= t (acquire), (4) reads peers' halves.
//  - Every step waits on every local peer. A peer publishes t+1 only after it has finished reading
//    step t, so once a rank has seen all peers at >= t, the half of step t-1 (= the half of step
//    t+1) is free on every rank: it may write its half (t+1) % 2 as soon as its wait of step t is
//    over (two_shot reduces straight into the next step's half). No trailing barrier, no flag
//    reset: the step counter lives in the rank's own flag and only grows, and all local ranks run
//    the same steps in the same order (same calls, same arguments), so they agree on it.
//  - Any algorithm may follow any other: they all keep the same invariant.
//  - Small messages may instead go through the low-latency (LL) lines at the start of each half:
//    every 64-byte line carries 56 payload bytes and the step number, stored after the payload
//    (release), so a reader polls the line it is about to read and pays one cache-line transfer
//    instead of two (flag, then data). The LL area is never used for bulk data, so a stale payload
//    byte can never look like a step number. An LL step publishes the step flag as well.

#include <cstddef>
#include <cstdint>

#include <fmt/format.h>

#include "collectives/algorithm.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

/// Flag index (in each rank's control area) holding that rank's last published step.
inline constexpr int kShmStepFlag = 8;

/// Bytes a step may move per rank when streaming large messages: small enough that the staging
/// copies stay in L2/L3 (1 MiB L2 per core, 32 MiB shared L3 here), large enough that the per-step
/// synchronisation (~1 us) is noise. Measurements: docs/collectives.md, "Where the default
/// thresholds come from".
inline constexpr std::size_t kStreamChunkBytes = std::size_t{512} << 10;

/// Messages from this size on (bytes of the output) are written with non-temporal stores: they do
/// not fit the caches anyway, and a plain store would first read each output line from memory
/// (measurements: docs/collectives.md, "Where the default thresholds come from").
inline constexpr std::size_t kNonTemporalBytes = std::size_t{8} << 20;

/// Low-latency lines at the start of each half: their bytes, and the payload they carry.
inline constexpr std::size_t kLLBytes = 4096;
inline constexpr std::size_t kLLPayload = 56;
inline constexpr std::size_t kLLMaxBytes = kLLBytes / 64 * kLLPayload;

/// memcpy, or with non-temporal stores when `streaming` (then call store_fence() before the data
/// is published to another rank, and before returning to the user).
void copy_out(void* dst, const void* src, std::size_t bytes, bool streaming);
/// Orders earlier non-temporal stores before later stores (sfence).
void store_fence();

/// Empty when every rank of the communicator is on this node and shm_fits(); else why not.
std::string shm_single_node(const CommImpl& comm, const CollArgs& args);
/// Empty when each half of the segment holds the LL lines, plus a cache line per local rank (of
/// the largest node) and a header line of bulk data.
std::string shm_fits(const SharedSegment& segment);

/// Busy-spin limit of shared-memory waits when the node has more ranks than CPUs: the rank being
/// waited for may need this very core, so yield almost at once (np 3 on 2 cores: a 50 us spin made
/// every step cost ~50 us; MPI with mpi_yield_when_idle took 7 us).
inline constexpr double kOversubscribedSpinUs = 1.0;

/// One step at a time through the double-buffered halves of the node's shared segments.
class ShmSteps {
 public:
  explicit ShmSteps(SharedSegment& segment);

  /// Bytes of bulk data in one half (64-byte multiple).
  std::size_t half_bytes() const { return half_ - kLLBytes; }
  /// Starts the next step: mine() and peer() now refer to its half.
  void begin();
  /// Publishes this step and waits for every local peer to publish it. `what` names the wait in
  /// timeout messages.
  void exchange(const char* what);
  /// This rank's bulk half of the current step.
  std::byte* mine() const { return base(topo_.local_rank, step_) + kLLBytes; }
  /// Local rank l's bulk half of the current step (read only after exchange()).
  const std::byte* peer(int l) const { return base(l, step_) + kLLBytes; }
  /// This rank's bulk half of the next step: writable once exchange() of this step has returned.
  std::byte* next_mine() const { return base(topo_.local_rank, step_ + 1) + kLLBytes; }

  /// LL step: stores `bytes` of src into this rank's LL lines of the current step from line
  /// `first_line` on (at most kLLBytes / 64 lines in all), each line tagged with the step.
  void ll_write(const void* src, std::size_t bytes, std::size_t first_line = 0);
  /// LL step: publishes the step flag after this rank's ll_write()s. No waiting.
  void ll_publish() const;
  /// LL step: copies `bytes` from local rank l's LL lines of the current step, from line
  /// `first_line` on, into dst, waiting for each line's tag (so it waits for l to reach the step).
  void ll_read(int l, void* dst, std::size_t bytes, const char* what,
               std::size_t first_line = 0) const;
  /// LL lines needed for `bytes`.
  static std::size_t ll_lines(std::size_t bytes) { return (bytes + kLLPayload - 1) / kLLPayload; }

  const Topology& topology() const { return topo_; }

 private:
  /// Polls ready() with backoff (spin_us_, then yield, then sleep) until it holds; after
  /// the segment's timeout throws Error(Timeout) with describe().
  template <class Ready, class Describe>
  void wait_for(Ready&& ready, Describe&& describe) const {
    if (poll_until(ready, segment_.timeout_s(), WaitPolicy::backoff(spin_us_))) return;
    throw Error(ErrorCode::Timeout,
                describe() + fmt::format(" (waited {} s)", segment_.timeout_s()));
  }

  std::byte* base(int l, std::uint64_t t) const { return segment_.data(l) + (t & 1) * half_; }

  SharedSegment& segment_;
  const Topology& topo_;
  double spin_us_;
  std::size_t half_;
  std::uint64_t step_;
};

/// Split of `n` elements into `parts` slices whose boundaries fall on 64-byte multiples: slice j
/// is [begin(j), begin(j + 1)); trailing slices may be empty.
struct Slices {
  Slices(std::size_t n, int parts, std::size_t elem);
  std::size_t begin(int j) const;
  std::size_t size(int j) const { return begin(j + 1) - begin(j); }
  std::size_t n, per;
};

/// Elements per streaming chunk: at most `target_bytes` and one half, a multiple of `parts` cache
/// lines, so that Slices(n <= chunk, parts, elem) of any chunk fits in a half. At least one line.
std::size_t stream_chunk_elems(const ShmSteps& steps, std::size_t elem, std::size_t target_bytes,
                               int parts);

// ---- phases ---------------------------------------------------------------------------------
// The two halves of a two-shot AllReduce, also run alone by reduce_scatter(shm), allgather(shm)
// and allreduce(hierarchical). The caller has begun the step and written this rank's part.

/// Reduce-scatter step: exchange, then dst[0..count) = reduction over the local ranks, in local
/// rank order, of the `count` elements at byte offset `off` of their halves. When `own` is set,
/// this rank's contribution is read from there instead of its half (it need not stage it); `own`
/// must not overlap dst.
void rs_phase(ShmSteps& steps, std::size_t off, std::size_t count, void* dst, DataType dtype,
              ReduceOp op, const char* what, const void* own = nullptr);

/// Broadcast of `bytes` at buf from local rank `root_local` to every rank of this node, in steps
/// through the root's halves (all local ranks call it with the same arguments but their own buf).
void shm_broadcast(CommImpl& comm, std::byte* buf, std::size_t bytes, int root_local,
                   const char* what);

/// All-gather step: exchange, then copy_out(l, peer(l)) for every local rank l < `owners`, in
/// order (copy_out reads what rank l wrote into its half).
template <class CopyOut>
void ag_phase(ShmSteps& steps, int owners, CopyOut&& copy_out, const char* what) {
  steps.exchange(what);
  for (int l = 0; l < owners; ++l)
    copy_out(l, steps.peer(l));
}

}  // namespace tilecomm::detail
