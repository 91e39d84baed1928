// ReduceScatter through the shared halves: the reduce-scatter phase of two-shot AllReduce, alone.
// Each step stages a piece of every destination block (block q in slot q); rank q reduces slot q
// of every local rank, in rank order, into its output.
#include <algorithm>
#include <cstring>

#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  const std::size_t elem = a.elem();
  if (comm.topo.local_size == 1) {
    if (!a.in_place) std::memcpy(a.recv, a.send, a.bytes());
    return;
  }
  ShmSteps steps(comm.segment);
  const int p = comm.topo.local_size, me = comm.topo.local_rank;  // one node: local rank == rank
  const std::size_t piece = stream_chunk_elems(steps, elem, kStreamChunkBytes, p) / p;
  const std::size_t slot = piece * elem;
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  for (std::size_t off = 0; off < a.count; off += piece) {
    const std::size_t n = std::min(piece, a.count - off);
    steps.begin();
    // My own block is read from send directly, unless in place (it is the output then).
    const std::byte* own = a.in_place ? nullptr : send + (me * a.count + off) * elem;
    for (int q = 0; q < p; ++q)
      if (q != me || !own)
        std::memcpy(steps.mine() + q * slot, send + (q * a.count + off) * elem, n * elem);
    rs_phase(steps, me * slot, n, recv + off * elem, a.dtype, a.op, "reduce_scatter(shm)", own);
  }
}

}  // namespace

extern const Algorithm reduce_scatter_shm{"shm", Collective::ReduceScatter, shm_single_node, run,
                                          true};

}  // namespace tilecomm::detail
