// AllGather across nodes with each block crossing every link once: blocks go to one rank per
// other node, then the nodes share them through shared memory.
//
//  1. Between nodes: every rank sends its block to one rank of every other node — local rank
//     (its local rank mod that node's size) — in eager pieces (p2p::isend_pieces), posted at once
//     (a rank alone on its node, beyond two nodes: one node at a time). So a rank receives the
//     blocks of the off-node ranks whose local rank, mod its node's size, is its own.
//  2. Meanwhile the node's own blocks go round through the shared segment (allgather(shm)'s step).
//  3. When they have arrived, the blocks each rank received go round the node the same way.
// Link bytes: each node sends every other node its blocks once (local_size x block), where a ring
// over the ranks sends each node's (p - 1) blocks over the link out of it: 2 x 2 ranks, 2 blocks
// per node and direction against 3. On nodes of one rank it is a pairwise exchange; on one node,
// allgather(shm).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/p2p_common.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kBlockTag = 0x7e4;

std::string can_use(const CommImpl& comm, const CollArgs&) {
  return shm_fits(comm.segment);
}

// The local rank of a node of `size` ranks that receives world rank r's block.
int receiver(const Topology& t, int r, std::size_t size) {
  return static_cast<int>(static_cast<std::size_t>(t.local_of[r]) % size);
}

// The off-node blocks (world ranks) that local rank l of this node receives in step 1, ascending.
std::vector<int> received_by(const Topology& t, int l) {
  std::vector<int> blocks;
  const auto size = static_cast<std::size_t>(t.local_size);
  for (int r = 0; r < t.size; ++r)
    if (!t.on_node(r) && receiver(t, r, size) == l) blocks.push_back(r);
  return blocks;
}

// Every local rank l stages its `blocks[l]` (world ranks whose blocks it has in recv), piece by
// piece; every rank copies what the others staged into place.
void share_on_node(CommImpl& comm, const CollArgs& a, const std::vector<std::vector<int>>& blocks,
                   const char* what) {
  const Topology& t = comm.topo;
  const std::size_t elem = a.elem(), block = a.bytes();
  auto* recv = static_cast<std::byte*>(a.recv);
  std::size_t most = 0;
  for (const auto& b : blocks)
    most = std::max(most, b.size());
  if (most == 0 || t.local_size == 1) return;
  ShmSteps steps(comm.segment);
  const std::size_t piece = stream_chunk_elems(steps, elem, kStreamChunkBytes, 1) / most;
  if (piece == 0) throw Error(ErrorCode::Internal, std::string(what) + ": segment half too small");
  const std::vector<int>& mine = blocks[t.local_rank];
  for (std::size_t off = 0; off < a.count; off += piece) {
    const std::size_t n = std::min(piece, a.count - off);
    steps.begin();
    for (std::size_t i = 0; i < mine.size(); ++i)
      std::memcpy(steps.mine() + i * piece * elem, recv + mine[i] * block + off * elem, n * elem);
    ag_phase(
        steps, t.local_size,
        [&](int l, const std::byte* half) {
          if (l == t.local_rank) return;
          for (std::size_t i = 0; i < blocks[l].size(); ++i)
            std::memcpy(recv + blocks[l][i] * block + off * elem, half + i * piece * elem,
                        n * elem);
        },
        what);
  }
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  const Topology& t = comm.topo;
  const int me = t.rank;
  const std::size_t block = a.bytes();
  auto* recv = static_cast<std::byte*>(a.recv);
  std::byte* own = recv + static_cast<std::size_t>(me) * block;
  if (!a.in_place) std::memcpy(own, a.send, block);

  // 1. Receives and sends between nodes, in eager pieces (p2p::irecv_pieces / isend_pieces).
  std::vector<MPI_Request> req;
  for (int r : received_by(t, t.local_rank))
    p2p::irecv_pieces(recv + r * block, block, r, kBlockTag, comm.mpi, req);
  // To the other nodes, starting with the next one. A rank alone on its node has no node step to
  // overlap: beyond two nodes it sends to one node at a time, so that each link carries one flow
  // per direction (as reduce_scatter(hierarchical) does there).
  const bool one_at_a_time = t.local_size == 1 && t.num_nodes > 2;
  for (int i = 1; i < t.num_nodes; ++i) {
    const std::vector<int>& ranks = t.node_ranks[(t.node + i) % t.num_nodes];
    const int q = ranks[t.local_rank % ranks.size()];
    if (!one_at_a_time) {
      p2p::isend_pieces(own, block, q, kBlockTag, comm.mpi, req);
      continue;
    }
    std::vector<MPI_Request> out;
    p2p::isend_pieces(own, block, q, kBlockTag, comm.mpi, out);
    comm.wait_all(out.data(), static_cast<int>(out.size()),
                  "allgather(hierarchical): a block to another node", {q});
  }

  // 2. The node's own blocks, while those messages move.
  std::vector<std::vector<int>> node_blocks(t.local_size);
  for (int l = 0; l < t.local_size; ++l)
    node_blocks[l] = {t.node_ranks[t.node][l]};
  share_on_node(comm, a, node_blocks, "allgather(hierarchical) node blocks");

  // 3. The other nodes' blocks, once here.
  comm.wait_all(req.data(), static_cast<int>(req.size()),
                "allgather(hierarchical): blocks between nodes");
  std::vector<std::vector<int>> received(t.local_size);
  for (int l = 0; l < t.local_size; ++l)
    received[l] = received_by(t, l);
  share_on_node(comm, a, received, "allgather(hierarchical) blocks from other nodes");
}

}  // namespace

extern const Algorithm allgather_hierarchical{"hierarchical", Collective::AllGather, can_use, run};

}  // namespace tilecomm::detail
