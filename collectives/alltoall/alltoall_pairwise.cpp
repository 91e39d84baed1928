// All-to-All and All-to-Allv by pairwise exchange over MPI point-to-point; works with any node
// layout. Step k = 1..p-1: send to (rank+k) % p, receive from (rank-k+p) % p; the own block is a
// local copy. Cost (p-1)(α + n/p·β). Blocks go in messages of at most one staging slot
// (comm.segment.data_bytes() / kWindow) and at most kWindow send/receive pairs are outstanding;
// every rank waits for a whole batch of pairs before posting the next. Batches are cut at the same
// points on both ends of every message, so the batches of all ranks progress together and cannot
// deadlock.
//
// In place (All-to-All only): step k exchanges with partner (k - rank) mod p in both directions
// (a symmetric pairing, so the block sent and the block received are the same block); each chunk
// is copied to a staging slot before the peer's chunk lands on it.
//
// All-to-Allv: ranks first send each peer the count they send it (one small message per step,
// batched the same way). A receiver whose recv_layout.counts[src] differs from what src announced
// still receives src's data, into a staging slot that it discards, so no rank hangs and nothing
// is written out of bounds; after the exchange it raises Error(Mismatch) naming both ranks and
// both counts. Ranks not involved in a mismatch complete normally.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/algorithm.hpp"
#include "collectives/p2p_common.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kWindow = 4;  // send/receive pairs in flight per rank

int mod(int a, int p) {
  return ((a % p) + p) % p;
}

// Posts up to kWindow pairs, then waits for the batch.
class Batch {
 public:
  Batch(CommImpl& comm, const char* what) : comm_(comm), what_(what) {}
  void send(const void* buf, std::size_t bytes, int dst, int tag) {
    p2p::isend(comm_, buf, bytes, dst, tag, &reqs_[n_++]);
  }
  void recv(void* buf, std::size_t bytes, int src, int tag) {
    p2p::irecv(comm_, buf, bytes, src, tag, &reqs_[n_++]);
  }
  // Ends one pair (unit); waits when kWindow units are in flight or `flush`.
  void end_unit(bool flush = false) {
    if (++units_ == kWindow || flush) finish();
  }
  void finish() {
    comm_.wait_all(reqs_, n_, what_);
    n_ = 0;
    units_ = 0;
  }

 private:
  CommImpl& comm_;
  const char* what_;
  MPI_Request reqs_[2 * kWindow];
  int n_ = 0, units_ = 0;
};

std::string can_use(const CommImpl&, const CollArgs&) {
  return {};
}

void run_in_place(CommImpl& comm, const CollArgs& a) {
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t block = a.bytes(), slot = p2p::slot_bytes(comm, kWindow);
  std::byte* stage = p2p::staging(comm, kWindow * slot);
  auto* buf = static_cast<std::byte*>(a.recv);
  Batch batch(comm, "alltoall(pairwise, in place)");
  for (int k = 0; k < p; ++k) {
    const int peer = mod(k - r, p);
    if (peer == r) continue;
    std::byte* blk = buf + peer * block;
    int unit = 0;
    for (std::size_t c = 0; c < block; c += slot, ++unit) {
      const std::size_t len = std::min(slot, block - c);
      std::byte* s = stage + (unit % kWindow) * slot;
      std::memcpy(s, blk + c, len);
      batch.send(s, len, peer, p2p::kTagPairwise);
      batch.recv(blk + c, len, peer, p2p::kTagPairwise);
      batch.end_unit();
    }
    batch.finish();
  }
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.in_place) return run_in_place(comm, a);
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t block = a.bytes(), chunk = p2p::slot_bytes(comm, 1);
  const auto* in = static_cast<const std::byte*>(a.send);
  auto* out = static_cast<std::byte*>(a.recv);
  if (block > 0) std::memcpy(out + r * block, in + r * block, block);
  // Every rank walks the same (step, chunk) sequence, so batches line up everywhere.
  Batch batch(comm, "alltoall(pairwise)");
  for (int k = 1; k < p; ++k) {
    const int dst = mod(r + k, p), src = mod(r - k, p);
    for (std::size_t c = 0; c < block; c += chunk) {
      const std::size_t len = std::min(chunk, block - c);
      batch.recv(out + src * block + c, len, src, p2p::kTagPairwise);
      batch.send(in + dst * block + c, len, dst, p2p::kTagPairwise);
      batch.end_unit();
    }
  }
  batch.finish();
}

// What each source announces it sends here (one count per peer, pairwise steps).
std::vector<std::uint64_t> announced_counts(CommImpl& comm, const VarLayout& sl) {
  const int p = comm.topo.size, r = comm.topo.rank;
  std::vector<std::uint64_t> mine(p), announced(p);
  for (int q = 0; q < p; ++q)
    mine[q] = sl.counts[q];
  Batch counts(comm, "alltoallv(pairwise) counts");
  for (int k = 1; k < p; ++k) {
    const int dst = mod(r + k, p), src = mod(r - k, p);
    counts.recv(&announced[src], sizeof(std::uint64_t), src, p2p::kTagPairwiseCounts);
    counts.send(&mine[dst], sizeof(std::uint64_t), dst, p2p::kTagPairwiseCounts);
    counts.end_unit();
  }
  counts.finish();
  return announced;
}

void run_v(CommImpl& comm, const CollArgs& a) {
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t es = a.elem(), slot = p2p::slot_bytes(comm, kWindow);
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
  Batch batch(comm, "alltoallv(pairwise)");
  for (int k = 1; k < p; ++k) {
    const int dst = mod(r + k, p), src = mod(r - k, p);
    const std::size_t send_bytes = sl.counts[dst] * es, recv_bytes = announced[src] * es;
    const bool match = announced[src] == rl.counts[src];
    if (!match) {
      note(src, announced[src]);
      if (!drain) drain = p2p::staging(comm, kWindow * slot);
    }
    // Chunk i of both directions forms unit i; both ends of a message cut it the same way.
    const std::size_t units = p2p::ceil_div(std::max(send_bytes, recv_bytes), slot);
    for (std::size_t u = 0; u < units; ++u) {
      const std::size_t c = u * slot;
      if (c < recv_bytes) {
        std::byte* to = match ? out + rl.displs[src] * es + c : drain + (u % kWindow) * slot;
        batch.recv(to, std::min(slot, recv_bytes - c), src, p2p::kTagPairwise);
      }
      if (c < send_bytes)
        batch.send(in + sl.displs[dst] * es + c, std::min(slot, send_bytes - c), dst,
                   p2p::kTagPairwise);
      batch.end_unit();
    }
    batch.finish();  // steps are cut apart: the chunk counts differ from edge to edge
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
