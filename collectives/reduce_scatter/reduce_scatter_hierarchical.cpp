// ReduceScatter in ReduceOrder::Canonical on any node layout: node sums through shared memory,
// then one MPI message per (node, destination) pair, then each destination reduces the node sums
// in node order.
//
//  1. Node step (shared memory, streamed in chunks): every local rank stages a piece of every
//     destination's block; the node sum of destination q's block — its local ranks' blocks folded
//     in local rank order — is computed by one local rank: q itself when q is on this node, else
//     the local rank (q's local index on its node) mod (this node's size).
//  2. Each node sum for an off-node destination goes to it in one MPI message (tag kSumTag).
//  3. Destination q folds the node sums in node order (its own node's computed by itself).
// So every element is ((S_0 + S_1) + S_2)..., S_n the left fold of node n's ranks in ascending
// rank order: the canonical order, the same bits as allreduce(hierarchical) and as the fused
// operators' owner reductions (GemmReduceScatter across nodes). Link bytes: each node sends every
// off-node rank one block (count elements), as a direct reduce-scatter of node sums would.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "collectives/reduce.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kSumTag = 0x7e3;

std::string can_use(const CommImpl& comm, const CollArgs& a) {
  if (a.bytes() > static_cast<std::size_t>(INT_MAX))
    return "a block above 2 GiB (one MPI message per node sum)";
  return shm_fits(comm.segment);
}

// The local rank of node `n` (of `size` ranks) that computes that node's sum for off-node rank q.
int assignee(const Topology& t, int q, std::size_t size) {
  return static_cast<int>(static_cast<std::size_t>(t.local_of[q]) % size);
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  const Topology& t = comm.topo;
  const int p = t.size, me = t.rank, nn = t.num_nodes;
  const auto local_size = static_cast<std::size_t>(t.local_size);
  const std::size_t elem = a.elem(), bytes = a.bytes();
  const auto* send = static_cast<const std::byte*>(a.send);
  // The destinations whose node sum this rank computes: itself, and off-node ranks assigned here.
  std::vector<int> dests{me};
  for (int q = 0; q < p; ++q)
    if (!t.on_node(q) && assignee(t, q, local_size) == t.local_rank) dests.push_back(q);
  std::vector<std::byte> sums(dests.size() * bytes);

  // 1. Node sums, chunk by chunk: a piece of every destination's block per step.
  ShmSteps steps(comm.segment);
  const std::size_t piece = stream_chunk_elems(steps, elem, kStreamChunkBytes, p) / p;
  std::vector<const void*> srcs(std::max<std::size_t>(local_size, nn));
  for (std::size_t off = 0; off < a.count; off += piece) {
    const std::size_t n = std::min(piece, a.count - off);
    steps.begin();
    for (int q = 0; q < p; ++q)
      std::memcpy(steps.mine() + q * piece * elem, send + (q * a.count + off) * elem, n * elem);
    steps.exchange("reduce_scatter(hierarchical) node step");
    for (std::size_t i = 0; i < dests.size(); ++i) {
      for (std::size_t l = 0; l < local_size; ++l)
        srcs[l] = steps.peer(static_cast<int>(l)) + dests[i] * piece * elem;
      reduce_n(sums.data() + i * bytes + off * elem, srcs.data(), t.local_size, n, a.dtype, a.op);
    }
  }
  if (nn == 1) {
    std::memcpy(a.recv, sums.data(), bytes);
    return;
  }

  // 2. Node sums to their destinations: one message per (node, off-node destination).
  std::vector<std::byte> from(static_cast<std::size_t>(nn) * bytes);
  std::vector<MPI_Request> req;
  req.reserve(dests.size() + nn);
  for (int nd = 0; nd < nn; ++nd) {
    if (nd == t.node) continue;
    const std::vector<int>& ranks = t.node_ranks[nd];
    req.emplace_back();
    mpi_check(MPI_Irecv(from.data() + nd * bytes, static_cast<int>(bytes), MPI_BYTE,
                        ranks[assignee(t, me, ranks.size())], kSumTag, comm.mpi, &req.back()),
              "MPI_Irecv");
  }
  for (std::size_t i = 1; i < dests.size(); ++i) {
    req.emplace_back();
    mpi_check(MPI_Isend(sums.data() + i * bytes, static_cast<int>(bytes), MPI_BYTE, dests[i],
                        kSumTag, comm.mpi, &req.back()),
              "MPI_Isend");
  }
  comm.wait_all(req.data(), static_cast<int>(req.size()),
                "reduce_scatter(hierarchical): node sums between nodes");

  // 3. The node sums in node order.
  for (int nd = 0; nd < nn; ++nd)
    srcs[nd] = nd == t.node ? static_cast<const void*>(sums.data())
                            : static_cast<const void*>(from.data() + nd * bytes);
  reduce_n(a.recv, srcs.data(), nn, a.count, a.dtype, a.op);
}

}  // namespace

extern const Algorithm reduce_scatter_hierarchical{"hierarchical", Collective::ReduceScatter,
                                                   can_use, run, true};

}  // namespace tilecomm::detail
