// AllReduce across nodes: node-local reduce-scatter through shared memory, an inter-node
// AllReduce of each owned slice (direct reduce-scatter + all-gather over MPI_Isend/MPI_Irecv)
// among the ranks with the same local rank (comm.cross_mpi), then a node-local all-gather through
// shared memory. Chunk by chunk.
//
// Uneven nodes: chunks are split into m = (smallest node's rank count) slices, owned by local
// ranks 0..m-1 on every node; their cross_mpi holds exactly one rank per node, in node order.
// Local ranks >= m only contribute and gather. Each slice element is reduced in local rank order
// on its node, then over the node sums in node order by one rank, then copied: the canonical order
// (ReduceOrder::Canonical), bitwise identical on every rank, in every run and to one_shot and
// two_shot on one node. On one node it is two_shot (the inter-node step has a single member).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/default_thresholds.hpp"
#include "collectives/p2p_common.hpp"
#include "collectives/reduce.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kReduceTag = 0x7e1, kGatherTag = 0x7e2;

std::string can_use(const CommImpl& comm, const CollArgs&) {
  return shm_fits(comm.segment);
}

/// Small slices: every node sends its whole slice to every other node, in eager pieces, and
/// reduces all of them in node order itself (one message latency instead of two; (N - 1) x count
/// bytes per node).
void cross_one_shot(CommImpl& comm, std::byte* buf, std::size_t count, const CollArgs& a,
                    std::vector<std::byte>& tmp) {
  const int nn = comm.topo.num_nodes, r = comm.topo.node;
  const std::size_t bytes = count * a.elem();
  tmp.resize(bytes * nn);
  std::vector<MPI_Request> req;
  for (int j = 0; j < nn; ++j)
    if (j != r)
      p2p::irecv_pieces(tmp.data() + j * bytes, bytes, j, kReduceTag, comm.cross_mpi, req);
  for (int i = 1; i < nn; ++i)
    p2p::isend_pieces(buf, bytes, (r + i) % nn, kReduceTag, comm.cross_mpi, req);
  comm.wait_all(req.data(), static_cast<int>(req.size()),
                "allreduce(hierarchical) inter-node one-shot");
  std::memcpy(tmp.data() + r * bytes, buf, bytes);
  std::vector<const void*> srcs(nn);
  for (int j = 0; j < nn; ++j)
    srcs[j] = tmp.data() + j * bytes;
  reduce_n(buf, srcs.data(), nn, count, a.dtype, a.op);
}

/// AllReduce of buf[0..count) among the ranks of comm.cross_mpi (one per node, node order), each
/// element reduced left to right over the nodes in node order (the canonical order): node j
/// receives block j from every node and reduces it, then every node gathers every reduced block.
/// Per node 2 (N - 1) / N x count bytes leave and arrive, as with a ring, but the N - 1 messages
/// of a phase are in flight together and the order of additions does not depend on the block.
void cross_allreduce(CommImpl& comm, std::byte* buf, std::size_t count, const CollArgs& a,
                     std::vector<std::byte>& tmp) {
  const int nn = comm.topo.num_nodes, r = comm.topo.node;
  if (nn == 1 || count == 0) return;
  const std::size_t elem = a.elem();
  // Slices up to the one-round limit take the inter-node one-shot.
  if (count * elem <= DefaultThresholds::allreduce_cross_one_round_max_for(nn))
    return cross_one_shot(comm, buf, count, a, tmp);
  const Slices blocks(count, nn, elem);
  const std::size_t mine = blocks.size(r), slot = blocks.per * elem;
  tmp.resize(std::max<std::size_t>(slot, 1) * nn);
  // Every message goes in eager pieces, all posted at once (p2p::isend_pieces): a larger one waits
  // for a clear-to-send that queues behind the peer's own bulk data on its NIC.
  std::vector<MPI_Request> req;
  auto recv_from = [&](std::byte* p, std::size_t n, int j, int tag) {
    p2p::irecv_pieces(p, n * elem, j, tag, comm.cross_mpi, req);
  };
  auto send_to = [&](const std::byte* p, std::size_t n, int j, int tag) {
    p2p::isend_pieces(p, n * elem, j, tag, comm.cross_mpi, req);
  };
  // 1. Reduce-scatter: block r of every node into slot j of tmp (mine copied), reduced into buf.
  for (int j = 0; j < nn; ++j)
    if (j != r) recv_from(tmp.data() + j * slot, mine, j, kReduceTag);
  for (int i = 1; i < nn; ++i) {  // rotated, so no node is everyone's first destination
    const int j = (r + i) % nn;
    send_to(buf + blocks.begin(j) * elem, blocks.size(j), j, kReduceTag);
  }
  std::memcpy(tmp.data() + r * slot, buf + blocks.begin(r) * elem, mine * elem);
  comm.wait_all(req.data(), static_cast<int>(req.size()),
                "allreduce(hierarchical) inter-node reduce-scatter");
  std::vector<const void*> srcs(nn);
  for (int j = 0; j < nn; ++j)
    srcs[j] = tmp.data() + j * slot;
  reduce_n(buf + blocks.begin(r) * elem, srcs.data(), nn, mine, a.dtype, a.op);
  // 2. All-gather the reduced blocks.
  req.clear();
  for (int j = 0; j < nn; ++j)
    if (j != r) recv_from(buf + blocks.begin(j) * elem, blocks.size(j), j, kGatherTag);
  for (int i = 1; i < nn; ++i)
    send_to(buf + blocks.begin(r) * elem, mine, (r + i) % nn, kGatherTag);
  comm.wait_all(req.data(), static_cast<int>(req.size()),
                "allreduce(hierarchical) inter-node all-gather");
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
    if (owner) cross_allreduce(comm, owned, slices.size(me), a, tmp);
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

extern const Algorithm allreduce_hierarchical{"hierarchical", Collective::AllReduce, can_use, run,
                                              true};

}  // namespace tilecomm::detail
