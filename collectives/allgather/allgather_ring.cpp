// AllGather by a ring over MPI point-to-point: p-1 steps, each rank forwards the block it received
// in the previous step; works with any node layout. Cost (p-1)(α + n·β), n the bytes per rank.
#include <cstring>

#include "collectives/algorithm.hpp"
#include "collectives/ring_phases.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl&, const CollArgs&) {
  return {};
}

void run(CommImpl& comm, const CollArgs& a) {
  const Blocks blocks{a.count * static_cast<std::size_t>(comm.topo.size), comm.topo.size};
  auto* own = static_cast<std::byte*>(a.recv) + blocks.offset(comm.topo.rank) * a.elem();
  if (!a.in_place && a.bytes() > 0) std::memcpy(own, a.send, a.bytes());
  ring_allgather(comm, a.recv, blocks, a.dtype);
}

}  // namespace

extern const Algorithm allgather_ring{"ring", Collective::AllGather, can_use, run};

}  // namespace tilecomm::detail
