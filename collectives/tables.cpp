// Dispatch from a Collective to its algorithm list and default table.
#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

const std::vector<const Algorithm*>& allreduce_algorithms();
const std::vector<const Algorithm*>& reduce_scatter_algorithms();
const std::vector<const Algorithm*>& allgather_algorithms();
const std::vector<const Algorithm*>& alltoall_algorithms();
const std::vector<const Algorithm*>& alltoallv_algorithms();
const Algorithm& allreduce_default(const CommImpl&, const CollArgs&);
const Algorithm& reduce_scatter_default(const CommImpl&, const CollArgs&);
const Algorithm& allgather_default(const CommImpl&, const CollArgs&);
const Algorithm& alltoall_default(const CommImpl&, const CollArgs&);
const Algorithm& alltoallv_default(const CommImpl&, const CollArgs&);

const std::vector<const Algorithm*>& algorithms_of(Collective c) {
  switch (c) {
    case Collective::AllReduce: return allreduce_algorithms();
    case Collective::ReduceScatter: return reduce_scatter_algorithms();
    case Collective::AllGather: return allgather_algorithms();
    case Collective::AllToAll: return alltoall_algorithms();
    case Collective::AllToAllv: return alltoallv_algorithms();
  }
  return allreduce_algorithms();
}

const Algorithm& default_algorithm(const CommImpl& comm, const CollArgs& args) {
  switch (args.coll) {
    case Collective::AllReduce: return allreduce_default(comm, args);
    case Collective::ReduceScatter: return reduce_scatter_default(comm, args);
    case Collective::AllGather: return allgather_default(comm, args);
    case Collective::AllToAll: return alltoall_default(comm, args);
    case Collective::AllToAllv: return alltoallv_default(comm, args);
  }
  return allreduce_default(comm, args);
}

}  // namespace tilecomm::detail
