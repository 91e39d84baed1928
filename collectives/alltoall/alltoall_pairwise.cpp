// All-to-All and All-to-Allv by pairwise exchange over MPI point-to-point; works with any node
// layout. Step k = 1..p-1: send to (rank+k) % p, receive from (rank-k+p) % p; the own block is a
// local copy. Cost (p-1)(α + n/p·β).
//
// Blocks go in pieces of at most 63 KiB (DefaultThresholds::eager_message_bytes, under Open MPI's
// TCP eager limit, so no piece waits for a clear-to-send queued behind bulk data), straight
// between the user buffers. Piece i of a step, both directions, is unit i; a Window keeps up to
// kWindow units in flight and, when full, waits for its oldest unit before posting the next, so
// the links are never left idle between batches (lock-step batches of 4 slot-sized messages,
// until 2026-11-27, took 4 chained calls of 512 KiB per peer on 2 x 1 at 1 Gbit/s in 25.3 ms
// against 17.5 for one call of the same bytes; docs/collectives.md). Deadlock-free whatever MPI
// buffers: every rank numbers the units of a step the same way (piece i of what it sends to dst
// and of what it receives from src), so the rank whose oldest unit is the lowest finds both ends
// of it posted. All-to-All walks every step through one window (its steps have the same units on
// every rank); All-to-Allv and the in-place All-to-All flush the window between steps (their
// steps' unit counts differ from rank to rank).
//
// In place (All-to-All only): step k exchanges with partner (k - rank) mod p in both directions
// (a symmetric pairing, so the block sent and the block received are the same block); each piece
// is copied to a staging slot (the unit's slot, free again once the unit completes) before the
// peer's piece lands on it.
//
// All-to-Allv: ranks first send each peer the count they send it (one small message per step,
// batched the same way). A receiver whose recv_layout.counts[src] differs from what src announced
// still receives src's data, into a staging slot that it discards, so no rank hangs and nothing
// is written out of bounds; after the exchange it raises Error(Mismatch) naming both ranks and
// both counts. Ranks not involved in a mismatch complete normally.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/algorithm.hpp"
#include "collectives/default_thresholds.hpp"
#include "collectives/p2p_common.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kWindow = 16;  // units (send/receive pairs of one piece) in flight per rank

int mod(int a, int p) {
  return ((a % p) + p) % p;
}

// Piece size: under the TCP eager limit, and within one staging slot of kWindow when staged.
std::size_t piece_bytes(const CommImpl& comm) {
  return std::min(p2p::slot_bytes(comm, kWindow), DefaultThresholds::eager_message_bytes);
}

// Units in flight: unit u's requests sit in slot u % kWindow. begin_unit() waits for the oldest
// unit when kWindow are in flight; every wait tests all requests, so units complete under the
// backoff of whichever wait is running.
class Window {
 public:
  Window(CommImpl& comm, const char* what) : comm_(comm), what_(what) {
    reqs_.fill(MPI_REQUEST_NULL);
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() = default;

  /// Starts unit `next()`: when it would be the (kWindow+1)-th in flight, waits for the oldest.
  /// Returns its slot (0..kWindow-1), free for staging.
  int begin_unit() {
    if (next_ - oldest_ == kWindow) wait_oldest();
    return static_cast<int>(next_ % kWindow);
  }
  void send(const void* buf, std::size_t bytes, int dst, int tag) {
    p2p::isend(comm_, buf, bytes, dst, tag, &reqs_[2 * (next_ % kWindow)]);
  }
  void recv(void* buf, std::size_t bytes, int src, int tag) {
    p2p::irecv(comm_, buf, bytes, src, tag, &reqs_[2 * (next_ % kWindow) + 1]);
  }
  void end_unit() { ++next_; }
  /// Waits for every unit in flight.
  void flush() {
    while (oldest_ < next_)
      wait_oldest();
  }

 private:
  void wait_oldest() {
    const std::size_t s = 2 * (oldest_ % kWindow);
    p2p::test_until(
        comm_, reqs_, what_,
        [&] { return reqs_[s] == MPI_REQUEST_NULL && reqs_[s + 1] == MPI_REQUEST_NULL; },
        [&] {
          return fmt::format("{}: rank {}: piece exchange {} did not complete", what_,
                             comm_.topo.rank, oldest_);
        });
    ++oldest_;
  }

  CommImpl& comm_;
  const char* what_;
  std::size_t next_ = 0, oldest_ = 0;
  std::array<MPI_Request, 2 * kWindow> reqs_;
};

std::string can_use(const CommImpl&, const CollArgs&) {
  return {};
}

void run_in_place(CommImpl& comm, const CollArgs& a) {
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t block = a.bytes(), piece = piece_bytes(comm);
  std::byte* stage = p2p::staging(comm, kWindow * piece);
  auto* buf = static_cast<std::byte*>(a.recv);
  Window win(comm, "alltoall(pairwise, in place)");
  for (int k = 0; k < p; ++k) {
    const int peer = mod(k - r, p);
    if (peer == r) continue;
    std::byte* blk = buf + peer * block;
    for (std::size_t c = 0; c < block; c += piece) {
      const std::size_t len = std::min(piece, block - c);
      std::byte* s = stage + static_cast<std::size_t>(win.begin_unit()) * piece;
      std::memcpy(s, blk + c, len);
      win.send(s, len, peer, p2p::kTagPairwise);
      win.recv(blk + c, len, peer, p2p::kTagPairwise);
      win.end_unit();
    }
    win.flush();  // each rank skips a different step (its own): unit counts differ
  }
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.in_place) return run_in_place(comm, a);
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t block = a.bytes(), piece = DefaultThresholds::eager_message_bytes;
  const auto* in = static_cast<const std::byte*>(a.send);
  auto* out = static_cast<std::byte*>(a.recv);
  if (block > 0) std::memcpy(out + r * block, in + r * block, block);
  // Every rank walks the same (step, piece) sequence: one window over every step.
  Window win(comm, "alltoall(pairwise)");
  for (int k = 1; k < p; ++k) {
    const int dst = mod(r + k, p), src = mod(r - k, p);
    for (std::size_t c = 0; c < block; c += piece) {
      const std::size_t len = std::min(piece, block - c);
      win.begin_unit();
      win.recv(out + src * block + c, len, src, p2p::kTagPairwise);
      win.send(in + dst * block + c, len, dst, p2p::kTagPairwise);
      win.end_unit();
    }
  }
  win.flush();
}

// What each source announces it sends here (one count per peer, pairwise steps).
std::vector<std::uint64_t> announced_counts(CommImpl& comm, const VarLayout& sl) {
  const int p = comm.topo.size, r = comm.topo.rank;
  std::vector<std::uint64_t> mine(p), announced(p);
  for (int q = 0; q < p; ++q)
    mine[q] = sl.counts[q];
  Window counts(comm, "alltoallv(pairwise) counts");  // one unit per step, on every rank
  for (int k = 1; k < p; ++k) {
    const int dst = mod(r + k, p), src = mod(r - k, p);
    counts.begin_unit();
    counts.recv(&announced[src], sizeof(std::uint64_t), src, p2p::kTagPairwiseCounts);
    counts.send(&mine[dst], sizeof(std::uint64_t), dst, p2p::kTagPairwiseCounts);
    counts.end_unit();
  }
  counts.flush();
  return announced;
}

void run_v(CommImpl& comm, const CollArgs& a) {
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t es = a.elem(), piece = piece_bytes(comm);
  const auto& sl = a.send_layout;
  const auto& rl = a.recv_layout;
  const auto* in = static_cast<const std::byte*>(a.send);
  auto* out = static_cast<std::byte*>(a.recv);
  std::string mismatch;
  int mismatches = 0;
  auto note = [&](int src, std::uint64_t sent) {
    if (mismatches++ == 0)
      mismatch = fmt::format(
          "alltoallv(pairwise): rank {} expects recv_layout.counts[{}] = {} elements from rank {}, "
          "but rank {} sends send_layout.counts[{}] = {}",
          r, src, rl.counts[src], src, src, r, sent);
  };

  const std::vector<std::uint64_t> announced = announced_counts(comm, sl);

  if (sl.counts[r] == rl.counts[r]) {
    if (sl.counts[r] > 0)
      std::memcpy(out + rl.displs[r] * es, in + sl.displs[r] * es, sl.counts[r] * es);
  } else {
    note(r, sl.counts[r]);
  }

  std::byte* drain = nullptr;
  Window win(comm, "alltoallv(pairwise)");
  for (int k = 1; k < p; ++k) {
    const int dst = mod(r + k, p), src = mod(r - k, p);
    const std::size_t send_bytes = sl.counts[dst] * es, recv_bytes = announced[src] * es;
    const bool match = announced[src] == rl.counts[src];
    if (!match) {
      note(src, announced[src]);
      if (!drain) drain = p2p::staging(comm, kWindow * piece);
    }
    // Piece i of both directions forms unit i; both ends of a message cut it the same way.
    const std::size_t units = p2p::ceil_div(std::max(send_bytes, recv_bytes), piece);
    for (std::size_t u = 0; u < units; ++u) {
      const std::size_t c = u * piece;
      const int slot = win.begin_unit();
      if (c < recv_bytes) {
        std::byte* to =
            match ? out + rl.displs[src] * es + c : drain + static_cast<std::size_t>(slot) * piece;
        win.recv(to, std::min(piece, recv_bytes - c), src, p2p::kTagPairwise);
      }
      if (c < send_bytes)
        win.send(in + sl.displs[dst] * es + c, std::min(piece, send_bytes - c), dst,
                 p2p::kTagPairwise);
      win.end_unit();
    }
    win.flush();  // steps are cut apart: the unit counts differ from edge to edge
  }
  if (mismatches > 0)
    throw Error(ErrorCode::Mismatch,
                mismatches == 1
                    ? mismatch
                    : fmt::format("{} (and {} more mismatched peers)", mismatch, mismatches - 1));
}

}  // namespace

extern const Algorithm alltoall_pairwise{"pairwise", Collective::AllToAll, can_use, run};
extern const Algorithm alltoallv_pairwise{"pairwise", Collective::AllToAllv, can_use, run_v};

}  // namespace tilecomm::detail
