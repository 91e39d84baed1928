// AllReduce by recursive doubling over MPI point-to-point: log2(p) exchange steps of the whole
// vector, for small messages (cost log p·(α + nβ + nγ)); works with any node layout.
//
// Any p: with p2 the largest power of two <= p and rem = p - p2, the first 2·rem ranks fold in
// pairs first (even rank 2i sends its data to 2i+1 and waits), so p2 ranks remain, renumbered in
// rank order; they run recursive doubling; at the end each odd rank 2i+1 sends the result back to
// 2i. Large vectors go in chunks of a bounded staging slot; each chunk runs the whole scheme.
//
// Why every rank ends with the same bits: in every combination the operand of the lower rank
// comes first: the fold computes d(2i) op d(2i+1), and in the doubling step with distance m the
// two partners hold the results of two adjacent, aligned groups of m (renumbered) ranks and both
// compute value(lower group) op value(upper group). By induction both partners' inputs are
// bit-identical, so they compute the same expression on the same bits and get the same bits; after
// the last step all p2 ranks hold one value, a fixed tree over the ranks in rank order, and the
// folded ranks receive a copy. The tree is the same in every run. bfloat16 is carried as float32
// throughout and rounded once at the end (identically on every rank).
#include <bit>
#include <cstring>
#include <utility>
#include <vector>

#include "collectives/algorithm.hpp"
#include "collectives/p2p_common.hpp"
#include "collectives/reduce.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl&, const CollArgs&) {
  return {};
}

// The scheme's constants for one call.
struct Plan {
  int p2, rem, me;  // power-of-two group size, folded pairs, rank in the group (-1: folded away)
  bool bf16;
  DataType wire;
  std::size_t slot;
  std::byte* stage;  // two slots
  // The real rank of group rank n.
  int real(int n) const { return n < rem ? 2 * n + 1 : n + rem; }
};

// The whole scheme on elements [c0, c0 + n).
void run_chunk(CommImpl& comm, const CollArgs& a, const Plan& plan, std::size_t c0, std::size_t n) {
  const int r = comm.topo.rank, tag = p2p::kTagRecursiveDoubling;
  const std::size_t es = a.elem(), bytes = n * size_of(plan.wire);
  auto* out = static_cast<std::byte*>(a.recv) + c0 * es;
  const auto* in = static_cast<const std::byte*>(a.send) + c0 * es;
  // x: this rank's current value; y: where the peer's arrives. For bfloat16 both are float32
  // staging slots; otherwise x starts as the user's recv chunk and the two swap roles.
  std::byte* x = out;
  std::byte* y = plan.stage;
  if (plan.bf16) {
    x = plan.stage + plan.slot;
    p2p::bf16_to_float(reinterpret_cast<float*>(x), in, n);
  } else if (!a.in_place) {
    std::memcpy(x, in, n * es);
  }
  // Each exchange in eager pieces (p2p::isend_pieces): a whole chunk above Open MPI's TCP eager
  // limit would wait for a clear-to-send, a round trip more per step.
  std::vector<MPI_Request> req;
  auto exchange = [&](int peer, bool send, bool recv) {
    req.clear();
    if (recv) p2p::irecv_pieces(y, bytes, peer, tag, comm.mpi, req);
    if (send) p2p::isend_pieces(x, bytes, peer, tag, comm.mpi, req);
    comm.wait_all(req.data(), static_cast<int>(req.size()), "allreduce(recursive_doubling)");
  };
  // x = (peer is lower) ? y op x : x op y: the lower rank's operand first.
  auto combine = [&](bool peer_lower) {
    const void* srcs[2] = {peer_lower ? y : x, peer_lower ? x : y};
    reduce_n(peer_lower ? y : x, srcs, 2, n, plan.wire, a.op);
    if (peer_lower) std::swap(x, y);
  };
  if (plan.me < 0) {  // folded: hand the data to r+1, get the result back
    exchange(r + 1, true, true);
    std::swap(x, y);
  } else {
    if (r < 2 * plan.rem) {  // odd rank of a fold pair: d(r-1) op d(r)
      exchange(r - 1, false, true);
      combine(true);
    }
    for (int m = 1; m < plan.p2; m <<= 1) {
      const int partner = plan.me ^ m;
      exchange(plan.real(partner), true, true);
      combine(partner < plan.me);
    }
    if (r < 2 * plan.rem) exchange(r - 1, true, false);
  }
  if (plan.bf16)
    p2p::float_to_bf16(out, reinterpret_cast<const float*>(x), n);
  else if (x != out)
    std::memcpy(out, x, n * es);
}

void run(CommImpl& comm, const CollArgs& a) {
  const int p = comm.topo.size, r = comm.topo.rank;
  Plan plan;
  plan.p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));
  plan.rem = p - plan.p2;
  plan.me = r < 2 * plan.rem ? (r % 2 == 1 ? r / 2 : -1) : r - plan.rem;
  plan.bf16 = a.dtype == DataType::BFloat16;
  plan.wire = p2p::partial_type(a.dtype);
  plan.slot = p2p::slot_bytes(comm, 2);
  plan.stage = p2p::staging(comm, 2 * plan.slot);
  const std::size_t chunk = plan.slot / size_of(plan.wire);
  for (std::size_t c0 = 0; c0 < a.count; c0 += chunk)
    run_chunk(comm, a, plan, c0, std::min(chunk, a.count - c0));
}

}  // namespace

extern const Algorithm allreduce_recursive_doubling{"recursive_doubling", Collective::AllReduce,
                                                    can_use, run};

}  // namespace tilecomm::detail
