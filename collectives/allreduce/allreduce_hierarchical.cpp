// AllReduce across nodes: node-local reduce-scatter through shared memory, an inter-node ring
// AllReduce of each owned slice over MPI_Isend/MPI_Irecv among the ranks with the same local rank
// (comm.cross_mpi), then a node-local all-gather through shared memory. Chunk by chunk.
//
// Uneven nodes: chunks are split into m = (smallest node's rank count) slices, owned by local
// ranks 0..m-1 on every node; their cross_mpi holds exactly one rank per node, in node order.
// Local ranks >= m only contribute and gather. Each slice element is reduced in local rank order
// on its node, then around a fixed ring of nodes by one rank, then copied: bitwise identical on
// every rank and in every run. On one node it is two_shot (the ring has a single member).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/reduce.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kRingTag = 0x7e1;

std::string can_use(const CommImpl& comm, const CollArgs&) {
  return shm_fits(comm.segment);
}

/// Ring AllReduce of buf[0..count) among the ranks of comm.cross_mpi (one per node, node order):
/// reduce-scatter then all-gather of N blocks, N - 1 sends and receives each.
void ring_allreduce(CommImpl& comm, std::byte* buf, std::size_t count, const CollArgs& a,
                    std::vector<std::byte>& tmp) {
  const int nn = comm.topo.num_nodes, r = comm.topo.node;
  if (nn == 1 || count == 0) return;
  const std::size_t elem = a.elem();
  const Slices blocks(count, nn, elem);
  tmp.resize(blocks.per * elem);
  const int right = (r + 1) % nn, left = (r + nn - 1) % nn;
  auto exchange = [&](int send_block, void* into, int recv_block) {
    MPI_Request req[2];
    mpi_check(MPI_Irecv(into, static_cast<int>(blocks.size(recv_block) * elem), MPI_BYTE, left,
                        kRingTag, comm.cross_mpi, &req[0]),
              "MPI_Irecv");
    mpi_check(MPI_Isend(buf + blocks.begin(send_block) * elem,
                        static_cast<int>(blocks.size(send_block) * elem), MPI_BYTE, right, kRingTag,
                        comm.cross_mpi, &req[1]),
              "MPI_Isend");
    comm.wait_all(req, 2, "allreduce(hierarchical) inter-node ring");
  };
  for (int i = 0; i < nn - 1; ++i) {  // reduce-scatter: block b ends complete on rank b - 1
    const int sb = (r - i + nn) % nn, rb = (r - i - 1 + 2 * nn) % nn;
    exchange(sb, tmp.data(), rb);
    std::byte* mine = buf + blocks.begin(rb) * elem;
    const void* srcs[2] = {mine, tmp.data()};
    reduce_n(mine, srcs, 2, blocks.size(rb), a.dtype, a.op);
  }
  for (int i = 0; i < nn - 1; ++i) {  // all-gather the complete blocks around the ring
    const int sb = (r + 1 - i + nn) % nn, rb = (r - i + nn) % nn;
    exchange(sb, buf + blocks.begin(rb) * elem, rb);
  }
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  const int m = comm.topo.smallest_node_size();
  ShmSteps steps(comm.segment);
  const int me = comm.topo.local_rank;
  const std::size_t elem = a.elem();
  const std::size_t chunk = stream_chunk_elems(steps, elem, kStreamChunkBytes, m);
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  std::vector<std::byte> tmp;
  for (std::size_t done = 0; done < a.count; done += chunk) {
    const std::size_t n = std::min(chunk, a.count - done);
    const Slices slices(n, m, elem);
    const bool owner = me < m;
    // Node-local reduce-scatter into the next step's half, then the inter-node AllReduce of the
    // owned slice there, in place.
    steps.begin();
    std::byte* owned = steps.next_mine() + (owner ? slices.begin(me) * elem : 0);
    std::memcpy(steps.mine(), send + done * elem, n * elem);
    rs_phase(steps, owner ? slices.begin(me) * elem : 0, owner ? slices.size(me) : 0, owned,
             a.dtype, a.op, "allreduce(hierarchical) reduce-scatter");
    if (owner) ring_allreduce(comm, owned, slices.size(me), a, tmp);
    // Node-local all-gather of the m slices.
    steps.begin();
    ag_phase(
        steps, m,
        [&](int j, const std::byte* half) {
          std::memcpy(recv + (done + slices.begin(j)) * elem, half + slices.begin(j) * elem,
                      slices.size(j) * elem);
        },
        "allreduce(hierarchical) all-gather");
  }
}

}  // namespace

extern const Algorithm allreduce_hierarchical{"hierarchical", Collective::AllReduce, can_use, run};

}  // namespace tilecomm::detail
