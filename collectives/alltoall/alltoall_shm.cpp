// All-to-All and All-to-Allv by direct copy through the shared halves. Each step, every rank
// stages a piece of the block for each peer q in slot q of its half; after the exchange, every
// rank copies the pieces addressed to it out of the peers' halves. Big blocks take several steps.
// All-to-Allv: each step's half starts with a header holding the sender's send and receive counts;
// after the first exchange every rank checks the whole count matrix, so a mismatch raises the same
// Error(Mismatch) on every rank and nobody reads garbage or hangs.
// Small All-to-All (every block in the LL lines) takes one LL step: one line transfer per line.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "collectives/shm_phases.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

constexpr std::size_t kLine = 64;

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  const std::size_t elem = a.elem(), block = a.bytes();
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  const int p = comm.topo.local_size, me = comm.topo.local_rank;  // one node: local rank == rank
  if (!a.in_place) std::memcpy(recv + me * block, send + me * block, block);
  if (p == 1) return;
  ShmSteps steps(comm.segment);
  const std::size_t lines = ShmSteps::ll_lines(block);
  if (lines * p <= kLLBytes / 64) {  // small: block q in LL lines [q * lines, (q + 1) * lines)
    steps.begin();
    for (int q = 0; q < p; ++q)
      if (q != me) steps.ll_write(send + q * block, block, q * lines);
    steps.ll_publish();
    for (int l = 0; l < p; ++l)
      if (l != me) steps.ll_read(l, recv + l * block, block, "alltoall(shm)", me * lines);
    return;
  }
  const std::size_t piece = stream_chunk_elems(steps, elem, kStreamChunkBytes, p) / p;
  const std::size_t slot = piece * elem;
  for (std::size_t off = 0; off < a.count; off += piece) {
    const std::size_t n = std::min(piece, a.count - off);
    steps.begin();
    for (int q = 0; q < p; ++q)
      if (q != me) std::memcpy(steps.mine() + q * slot, send + q * block + off * elem, n * elem);
    steps.exchange("alltoall(shm)");
    for (int l = 0; l < p; ++l)
      if (l != me) std::memcpy(recv + l * block + off * elem, steps.peer(l) + me * slot, n * elem);
  }
}

// ---- All-to-Allv ------------------------------------------------------------------------------

// Half layout: header [send counts (p), recv counts (p)] as uint64, padded to lines; then slots.
std::size_t header_bytes(int p) {
  return (2 * p * sizeof(std::uint64_t) + kLine - 1) / kLine * kLine;
}

std::string can_use_v(const CommImpl& comm, const CollArgs& a) {
  std::string why = shm_single_node(comm, a);
  if (!why.empty()) return why;
  const std::size_t need = header_bytes(comm.topo.local_size) + kLine * comm.topo.local_size;
  if (comm.segment.data_bytes() / 2 < need)
    return fmt::format("shm_bytes = {} is too small for All-to-Allv on {} ranks (needs >= {})",
                       comm.segment.data_bytes(), comm.topo.local_size, 2 * need);
  return {};
}

// Every rank checks every pair, so every rank raises the same error.
void check_counts(const ShmSteps& steps, int p) {
  for (int i = 0; i < p; ++i) {
    const auto* hi = reinterpret_cast<const std::uint64_t*>(steps.peer(i));
    for (int j = 0; j < p; ++j) {
      const auto* hj = reinterpret_cast<const std::uint64_t*>(steps.peer(j));
      if (hi[j] != hj[p + i])
        throw Error(ErrorCode::Mismatch,
                    fmt::format("alltoallv(shm): rank {} sends {} elements to rank {}, but rank {} "
                                "expects {} (its recv_layout.counts[{}])",
                                i, hi[j], j, j, hj[p + i], i));
    }
  }
}

void run_v(CommImpl& comm, const CollArgs& a) {
  const std::size_t elem = a.elem();
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  const auto& sc = a.send_layout.counts;
  const auto& sd = a.send_layout.displs;
  const auto& rc = a.recv_layout.counts;
  const auto& rd = a.recv_layout.displs;
  const int p = comm.topo.local_size, me = comm.topo.local_rank;
  if (p == 1) {
    if (sc[0] != rc[0])
      throw Error(ErrorCode::Mismatch,
                  fmt::format("alltoallv(shm): rank 0 sends {} elements to itself but expects {}",
                              sc[0], rc[0]));
    if (sc[0] > 0) std::memcpy(recv + rd[0] * elem, send + sd[0] * elem, sc[0] * elem);
    return;
  }
  ShmSteps steps(comm.segment);
  const std::size_t hdr = header_bytes(p);
  const std::size_t piece =
      std::min(steps.half_bytes() - hdr, kStreamChunkBytes) / p / kLine * kLine / elem;
  const std::size_t slot = piece * elem;
  std::size_t most = 0;  // largest block of any pair: known after the first exchange
  for (std::size_t off = 0, step = 0; step == 0 || off < most; off += piece, ++step) {
    steps.begin();
    std::byte* half = steps.mine();
    if (step == 0) {
      auto* h = reinterpret_cast<std::uint64_t*>(half);
      for (int q = 0; q < p; ++q) {
        h[q] = sc[q];
        h[p + q] = rc[q];
      }
    }
    for (int q = 0; q < p; ++q)
      if (q != me && sc[q] > off)
        std::memcpy(half + hdr + q * slot, send + (sd[q] + off) * elem,
                    std::min(piece, sc[q] - off) * elem);
    steps.exchange("alltoallv(shm)");
    if (step == 0) {
      check_counts(steps, p);
      for (int q = 0; q < p; ++q)
        most = std::max({most, sc[q], rc[q]});
      for (int l = 0; l < p; ++l) {  // every rank's largest block, so all take the same steps
        const auto* h = reinterpret_cast<const std::uint64_t*>(steps.peer(l));
        for (int q = 0; q < p; ++q)
          most = std::max<std::size_t>(most, h[q]);
      }
      if (sc[me] > 0) std::memcpy(recv + rd[me] * elem, send + sd[me] * elem, sc[me] * elem);
    }
    for (int l = 0; l < p; ++l)
      if (l != me && rc[l] > off)
        std::memcpy(recv + (rd[l] + off) * elem, steps.peer(l) + hdr + me * slot,
                    std::min(piece, rc[l] - off) * elem);
  }
}

}  // namespace

extern const Algorithm alltoall_shm{"shm", Collective::AllToAll, shm_single_node, run};
extern const Algorithm alltoallv_shm{"shm", Collective::AllToAllv, can_use_v, run_v};

}  // namespace tilecomm::detail
