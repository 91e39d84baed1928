// AllGather through the shared halves: the all-gather phase of two-shot AllReduce, alone. Each
// step stages a piece of this rank's block; every rank copies every rank's piece into place.
#include <algorithm>
#include <cstring>

#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  const std::size_t elem = a.elem(), block = a.bytes();
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  const int me = comm.topo.local_rank;  // one node: local rank == rank
  if (comm.topo.local_size == 1) {
    if (!a.in_place) std::memcpy(recv, send, block);
    return;
  }
  ShmSteps steps(comm.segment);
  const std::size_t piece = stream_chunk_elems(steps, elem, kStreamChunkBytes, 1);
  for (std::size_t off = 0; off < a.count; off += piece) {
    const std::size_t n = std::min(piece, a.count - off);
    steps.begin();
    std::memcpy(steps.mine(), send + off * elem, n * elem);
    ag_phase(
        steps, comm.topo.local_size,
        [&](int l, const std::byte* half) {
          if (l == me && a.in_place) return;  // already in place
          std::memcpy(recv + l * block + off * elem, l == me ? send + off * elem : half, n * elem);
        },
        "allgather(shm)");
  }
}

}  // namespace

extern const Algorithm allgather_shm{"shm", Collective::AllGather, shm_single_node, run};

}  // namespace tilecomm::detail
