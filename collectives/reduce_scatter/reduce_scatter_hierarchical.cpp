// ReduceScatter in ReduceOrder::Canonical on any node layout: node sums through shared memory,
// then MPI messages of node sums between nodes (pipelined with the node step), then each
// destination reduces the node sums in node order.
//
//  1. Node step (shared memory, streamed in chunks): every local rank stages a piece of every
//     destination's block; the node sum of destination q's block — its local ranks' blocks folded
//     in local rank order — is computed by one local rank: q itself when q is on this node, else
//     the local rank (q's local index on its node) mod (this node's size).
//  2. Each node sum for an off-node destination goes to it in messages of kMessageBytes (tag
//     kSumTag), each sent as soon as the node step has finished its elements; a rank alone on
//     its node sends its input blocks as they are, one destination node at a time beyond two
//     nodes.
//  3. Destination q folds the node sums in node order (its own node's computed by itself),
//     message by message as they arrive.
// So every element is ((S_0 + S_1) + S_2)..., S_n the left fold of node n's ranks in ascending
// rank order: the canonical order, the same bits as allreduce(hierarchical) and as the fused
// operators' owner reductions (GemmReduceScatter across nodes). Link bytes: each node sends every
// off-node rank one block (count elements), as a direct reduce-scatter of node sums would.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "collectives/default_thresholds.hpp"
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

// Node sums cross the network in messages of this many bytes: sent as soon as their node step is
// done, folded as soon as they arrive, so the transfer overlaps the node step and the final fold.
// One message per block (the first version) left both in series with it: 39-41 ms for 8 MiB on
// 2 nodes x 1 rank at 1 Gbit/s, ring 35. Under the TCP eager limit: with 256 KiB messages (a
// whole number of the node step's pieces, until 2026-11-27) back-to-back calls stalled on their
// rendezvous, 4 calls of 1 MiB per rank in 49-56 ms against 35 (docs/collectives.md).
constexpr std::size_t kMessageBytes = DefaultThresholds::eager_message_bytes;

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
  // A rank alone on its node has no node step: its node sums are its input blocks, sent as they
  // are (no staging copy; 16 MiB fewer bytes copied per 8 MiB call on 2 nodes x 1 rank, on the
  // core that also runs the TCP stack). In place with a node before this one, its own block is
  // copied first: reduce_n's output may alias only its first input.
  const bool alone = local_size == 1 && nn > 1;
  const std::byte* own_in = send + static_cast<std::size_t>(me) * bytes;
  const bool own_copy = alone && t.node != 0 && own_in == a.recv;
  std::vector<std::byte> sums(alone ? (own_copy ? bytes : 0) : dests.size() * bytes);
  if (own_copy) std::memcpy(sums.data(), own_in, bytes);
  auto node_sum = [&](std::size_t i) -> const std::byte* {  // dests[i]'s node sum, this node
    if (!alone) return sums.data() + i * bytes;
    return i == 0 && own_copy ? sums.data() : send + static_cast<std::size_t>(dests[i]) * bytes;
  };

  ShmSteps steps(comm.segment);
  const std::size_t piece = stream_chunk_elems(steps, elem, kStreamChunkBytes, p) / p;
  // Message k carries elements [k * msg, min((k + 1) * msg, count)) of a block; both ends know the
  // split, and MPI's non-overtaking order matches message k to receive k. A node step piece may
  // complete several messages at once (send_ready).
  const std::size_t msg = std::max<std::size_t>(1, kMessageBytes / elem);
  const std::size_t msgs = (a.count + msg - 1) / msg;
  auto msg_elems = [&](std::size_t k) { return std::min(msg, a.count - k * msg); };

  // 2a. Receives for every (off-node node, message), posted before the node step: req_from[k * nn
  // + nd]. Sends follow the node step piece by piece.
  std::vector<std::byte> from(nn > 1 ? static_cast<std::size_t>(nn) * bytes : 0);
  std::vector<MPI_Request> req_from(nn > 1 ? msgs * nn : 0, MPI_REQUEST_NULL);
  for (std::size_t k = 0; k < msgs && nn > 1; ++k)
    for (int nd = 0; nd < nn; ++nd) {
      if (nd == t.node) continue;
      const std::vector<int>& ranks = t.node_ranks[nd];
      mpi_check(MPI_Irecv(from.data() + nd * bytes + k * msg * elem,
                          static_cast<int>(msg_elems(k) * elem), MPI_BYTE,
                          ranks[assignee(t, me, ranks.size())], kSumTag, comm.mpi,
                          &req_from[k * nn + nd]),
                "MPI_Irecv");
    }
  std::vector<MPI_Request> req_to;
  req_to.reserve((dests.size() - 1) * msgs);
  auto isend = [&](const std::byte* sum, std::size_t k, int dst) {  // message k of a node sum
    req_to.emplace_back();
    mpi_check(MPI_Isend(sum + k * msg * elem, static_cast<int>(msg_elems(k) * elem), MPI_BYTE, dst,
                        kSumTag, comm.mpi, &req_to.back()),
              "MPI_Isend");
  };
  std::size_t sent = 0;                      // messages sent to every off-node destination so far
  auto send_ready = [&](std::size_t done) {  // elements [0, done) of every node sum are final
    for (; sent < msgs && std::min((sent + 1) * msg, a.count) <= done; ++sent)
      for (std::size_t i = 1; i < dests.size(); ++i)
        isend(node_sum(i), sent, dests[i]);
  };

  // 1. Node sums, chunk by chunk: a piece of every destination's block per step.
  std::vector<const void*> srcs(std::max<std::size_t>(local_size, nn));
  if (alone && nn > 2) {
    // One destination at a time, rotated (node + 1, node + 2, ...), so that every link carries one
    // flow per direction, as a ring's does: posting all at once put nn - 1 flows on each link
    // (4 x 1, 4 MiB: 41 ms, ring 33; one at a time: 28-30).
    for (int step = 1; step < nn; ++step) {
      const int nd = (t.node + step) % nn;
      const std::size_t first = req_to.size();
      for (int q : t.node_ranks[nd])  // every rank of that node (nodes may differ in size)
        for (std::size_t k = 0; k < msgs; ++k)
          isend(send + static_cast<std::size_t>(q) * bytes, k, q);
      comm.wait_all(req_to.data() + first, static_cast<int>(req_to.size() - first),
                    "reduce_scatter(hierarchical): node sums to the other nodes",
                    {t.node_ranks[nd][0]});
    }
  } else if (alone) {
    send_ready(a.count);
  }
  for (std::size_t off = 0; off < a.count && !alone; off += piece) {
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
    if (dests.size() > 1) send_ready(off + n);  // 2b. the node sums now complete, to their owners
  }
  if (nn == 1) {
    std::memcpy(a.recv, sums.data(), bytes);
    return;
  }

  // 3. Message by message as they arrive: the node sums in node order.
  for (std::size_t k = 0; k < msgs; ++k) {
    comm.wait_all(req_from.data() + k * nn, nn,
                  "reduce_scatter(hierarchical): node sums from the other nodes");
    const std::size_t at = k * msg * elem;
    for (int nd = 0; nd < nn; ++nd)
      srcs[nd] = nd == t.node ? static_cast<const void*>(node_sum(0) + at)
                              : static_cast<const void*>(from.data() + nd * bytes + at);
    reduce_n(static_cast<std::byte*>(a.recv) + at, srcs.data(), nn, msg_elems(k), a.dtype, a.op);
  }
  comm.wait_all(req_to.data(), static_cast<int>(req_to.size()),
                "reduce_scatter(hierarchical): node sums to the other nodes");
}

}  // namespace

extern const Algorithm reduce_scatter_hierarchical{"hierarchical", Collective::ReduceScatter,
                                                   can_use, run, true};

}  // namespace tilecomm::detail
