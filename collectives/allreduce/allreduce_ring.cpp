// AllReduce by a ring over MPI point-to-point: the ring ReduceScatter followed by the ring
// AllGather (collectives/ring_phases.hpp), as UCC's ring AllReduce. Works with any node layout,
// any count (blocks of count/p elements, the first count % p one longer; count < p leaves some
// blocks empty). Cost 2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ: bandwidth-optimal, for large messages.
//
// Determinism: block b is reduced once, by the ring in the fixed order b+1, ..., p-1, 0, ..., b,
// then copied to every rank, so all ranks hold the same bits in every run. bfloat16 partials stay
// float32 between hops and round once.
#include "collectives/algorithm.hpp"
#include "collectives/ring_phases.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl&, const CollArgs&) {
  return {};
}

void run(CommImpl& comm, const CollArgs& a) {
  const Blocks blocks{a.count, comm.topo.size};
  auto* own = static_cast<std::byte*>(a.recv) + blocks.offset(comm.topo.rank) * a.elem();
  ring_reduce_scatter(comm, a.send, own, blocks, a.dtype, a.op);  // recv block rank = result
  ring_allgather(comm, a.recv, blocks, a.dtype);                  // everyone's blocks
}

}  // namespace

extern const Algorithm allreduce_ring{"ring", Collective::AllReduce, can_use, run};

}  // namespace tilecomm::detail
