// Broadcast through the shared halves of one node: step by step the root stages a chunk in its
// half, every rank publishes the step, and the others copy the chunk out of the root's half.
#include <algorithm>
#include <cstring>

#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {

void shm_broadcast(CommImpl& comm, std::byte* buf, std::size_t bytes, int root_local,
                   const char* what) {
  if (bytes == 0 || comm.topo.local_size == 1) return;
  ShmSteps steps(comm.segment);
  const bool root = comm.topo.local_rank == root_local;
  const std::size_t chunk = stream_chunk_elems(steps, 1, kStreamChunkBytes, 1);
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t n = std::min(chunk, bytes - off);
    steps.begin();
    if (root) std::memcpy(steps.mine(), buf + off, n);
    // Every rank waits for every other (not only for the root): the root may reuse this half two
    // steps on only once every reader has finished with it (shm_phases.hpp).
    steps.exchange(what);
    if (!root) std::memcpy(buf + off, steps.peer(root_local), n);
  }
}

namespace {

void run(CommImpl& comm, const CollArgs& a) {
  // One node: local rank == rank.
  shm_broadcast(comm, static_cast<std::byte*>(a.recv), a.bytes(), a.root, "broadcast(shm)");
}

}  // namespace

extern const Algorithm broadcast_shm{"shm", Collective::Broadcast, shm_single_node, run};

}  // namespace tilecomm::detail
