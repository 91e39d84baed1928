// ReduceScatter by a ring over MPI point-to-point: p-1 steps, each rank sends and receives one
// block (chunk) per step; works with any node layout. Cost (p-1)(α + n/p·β + n/p·γ), n the bytes
// of the whole input. Reduction order and bfloat16 handling: collectives/ring_phases.hpp.
#include "collectives/algorithm.hpp"
#include "collectives/ring_phases.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl&, const CollArgs&) {
  return {};
}

void run(CommImpl& comm, const CollArgs& a) {
  const Blocks blocks{a.count * static_cast<std::size_t>(comm.topo.size), comm.topo.size};
  ring_reduce_scatter(comm, a.send, a.recv, blocks, a.dtype, a.op);
}

}  // namespace

extern const Algorithm reduce_scatter_ring{"ring", Collective::ReduceScatter, can_use, run};

}  // namespace tilecomm::detail
