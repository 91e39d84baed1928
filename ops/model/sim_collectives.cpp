#include "ops/model/sim_collectives.hpp"

#include <algorithm>
#include <cmath>

#include "collectives/default_thresholds.hpp"

namespace tilecomm::model {

using detail::DefaultThresholds;
using detail::Topology;

namespace {
// The collectives' messages between nodes (eager pieces: reduce_scatter(hierarchical)'s, the
// hierarchical AllReduce's), and a cap on how many the simulator replays per partner (more only
// split the same bytes finer).
constexpr double kEagerPieceBytes = double(DefaultThresholds::eager_message_bytes);
constexpr int kMaxPieces = 64;

// The eager pieces `bytes` go in (at least one, at most kMaxPieces).
std::uint64_t eager_pieces(double bytes) {
  return static_cast<std::uint64_t>(
      std::clamp(std::ceil(bytes / kEagerPieceBytes), 1.0, double(kMaxPieces)));
}

// The message key of piece k of the message keyed `key` (keys of different collectives are apart
// by at least 16, so pieces never collide).
std::uint64_t piece_key(std::uint64_t key, std::uint64_t k) {
  return key + (k << 20);
}
}  // namespace

double hot_share(const Profile& p, double footprint) {
  if (p.l2_bytes <= 0 || p.reduce_hot.points == 0) return 0;
  return footprint <= p.l2_bytes ? 1.0 : p.l2_bytes / footprint;
}

double MemCosts::reduce(double bytes) const {
  if (bytes <= 0) return 0;
  auto at = [bytes](const Fit& f) {
    const double t = f.at(bytes);
    return t > 0 ? t : f.c[1] * bytes;
  };
  return hot > 0 ? hot * at(p.reduce_hot) + (1 - hot) * at(p.reduce) : at(p.reduce);
}

double MemCosts::copy(double bytes) const {
  if (bytes <= 0) return 0;
  // A copy streams memory as a reduction does: the segment's per-byte cost when the profile
  // measured it, else the reduction's (a profile made with one rank per node has no shm path,
  // and borrowing the MPI path's beta would charge a network's rate for a memcpy).
  // The ping-pong's per-byte cost (its buffers hot) for the hot share.
  const bool shm = p.shm.measured && p.shm.beta() > 0;
  const double cold_beta = shm ? p.shm.beta() : p.reduce.c[1];
  const double hot_beta = shm && p.shm.time.c[1] > 0 ? p.shm.time.c[1] : cold_beta;
  const double beta = hot * hot_beta + (1 - hot) * cold_beta;
  return beta > 0 ? beta * bytes : 0;
}

namespace {

// Every on-node rank (this one included) flags `key` to every other; then this rank waits for all.
void node_exchange(std::vector<SimStep>& steps, const Topology& topo, std::uint64_t key) {
  for (int r : topo.node_ranks[topo.node])
    if (r != topo.rank) steps.push_back(SimStep::send(r, key, 0, SimPath::Flag));
  for (int r : topo.node_ranks[topo.node])
    if (r != topo.rank) steps.push_back(SimStep::await(r, key));
}

}  // namespace

void allreduce_steps(std::vector<SimStep>& steps, const Topology& topo, double bytes,
                     const Profile& p, std::uint64_t base, double hot) {
  const int q = topo.local_size, nn = topo.num_nodes;
  if (topo.size <= 1) return;
  const MemCosts mem(p, hot);
  if (nn == 1 && bytes <= DefaultThresholds::allreduce_one_shot_max_for(q)) {
    // one_shot: every rank stages its input, every rank reduces all of them.
    node_exchange(steps, topo, base);
    steps.push_back(SimStep::compute(mem.copy((q - 1) * bytes) + mem.reduce((q - 1) * bytes)));
    return;
  }
  const double slice = bytes / q;
  if (q > 1) {
    // Node-local reduce-scatter: stage the input in the segment (two_shot: all but my slice;
    // hierarchical: all of it), then read the q - 1 other ranks' copies of my slice and add.
    const double staged = nn == 1 ? (q - 1) * slice : bytes;
    steps.push_back(SimStep::compute(mem.copy(staged)));
    node_exchange(steps, topo, base + 1);
    steps.push_back(SimStep::compute(mem.reduce((q - 1) * slice)));
  }
  if (nn > 1) {  // between the nodes: the ranks of my local rank, one per node
    auto partner = [&](int node) { return topo.node_ranks[node][topo.local_rank]; };
    // Every node sends `bytes` to every other, in eager pieces (p2p::isend_pieces), posted at
    // once; then this rank waits for every piece from every other node.
    auto exchange = [&](double bytes, std::uint64_t key) {
      const std::uint64_t pieces = eager_pieces(bytes);
      for (int i = 1; i < nn; ++i)
        for (std::uint64_t k = 0; k < pieces; ++k)
          steps.push_back(SimStep::send(partner((topo.node + i) % nn), piece_key(key, k),
                                        bytes / double(pieces), SimPath::Mpi));
      for (int i = 1; i < nn; ++i)
        for (std::uint64_t k = 0; k < pieces; ++k)
          steps.push_back(SimStep::await(partner((topo.node - i + nn) % nn), piece_key(key, k)));
    };
    if (slice <= DefaultThresholds::allreduce_cross_one_round_max_for(nn)) {
      exchange(slice, base + 3);
      steps.push_back(SimStep::compute(mem.reduce((nn - 1) * slice)));
    } else {  // direct reduce-scatter of the slice, then all-gather
      const double part = slice / nn;
      exchange(part, base + 4);
      steps.push_back(SimStep::compute(mem.reduce((nn - 1) * part)));
      exchange(part, base + 5);
    }
  }
  if (q > 1) {  // node-local all-gather: copy every reduced slice, mine too, into the output
    node_exchange(steps, topo, base + 2);
    steps.push_back(SimStep::compute(mem.copy(bytes)));
  }
}

void reduce_scatter_steps(std::vector<SimStep>& steps, const Topology& topo, double bytes,
                          const Profile& p, std::uint64_t base, double hot) {
  const int q = topo.local_size, nn = topo.num_nodes;
  if (topo.size <= 1) return;
  const MemCosts mem(p, hot);
  const double node_slice = bytes / q;  // what a local rank sums for its node
  if (q > 1) {
    // Stage the input in the segment (shm: every block but mine; hierarchical: every block),
    // then read my node slice from the q - 1 peers and add.
    steps.push_back(SimStep::compute(mem.copy(nn == 1 ? (q - 1) * node_slice : bytes)));
    node_exchange(steps, topo, base + 6);
    steps.push_back(SimStep::compute(mem.reduce((q - 1) * node_slice)));
  }
  if (nn > 1) {
    auto partner = [&](int node) { return topo.node_ranks[node][topo.local_rank]; };
    const double part = node_slice / nn;  // each other node's share of my node slice
    // reduce_scatter(hierarchical) sends each share in eager pieces and folds each piece as it
    // arrives. (Beyond two nodes of one rank it sends to one node at a time; posted at once here,
    // the sender's egress FIFO serialises them alike.)
    const std::uint64_t pieces = eager_pieces(part);
    const double piece = part / double(pieces);
    auto key = [&](std::uint64_t k) { return piece_key(base + 7, k); };
    for (std::uint64_t k = 0; k < pieces; ++k)
      for (int i = 1; i < nn; ++i)
        steps.push_back(SimStep::send(partner((topo.node + i) % nn), key(k), piece, SimPath::Mpi));
    for (std::uint64_t k = 0; k < pieces; ++k) {
      for (int i = 1; i < nn; ++i)
        steps.push_back(SimStep::await(partner((topo.node - i + nn) % nn), key(k)));
      steps.push_back(SimStep::compute(mem.reduce((nn - 1) * piece)));
    }
  }
}

void alltoallv_steps(std::vector<SimStep>& steps, const Topology& topo,
                     const std::vector<double>& send, const std::vector<double>& recv,
                     const Profile& p, std::uint64_t base, double hot, bool reshape) {
  const int n = topo.size, me = topo.rank;
  double received = recv[me];  // bytes copied at the end
  const MemCosts mem(p, hot);
  for (int i = 1; i < n; ++i) {
    const int q = (me + i) % n;
    if (send[q] <= 0) continue;
    steps.push_back(SimStep::send(q, base, send[q], topo.on_node(q) ? SimPath::Shm : SimPath::Mpi));
  }
  for (int i = 1; i < n; ++i) {
    const int s = (me - i + n) % n;
    if (recv[s] <= 0) continue;
    steps.push_back(SimStep::await(s, base));
    if (reshape || topo.on_node(s)) received += recv[s];
  }
  steps.push_back(SimStep::compute(mem.copy(received)));
}

}  // namespace tilecomm::model
