// The AllReduce algorithms and the default table.
#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

extern const Algorithm allreduce_mpi;

const std::vector<const Algorithm*>& allreduce_algorithms() {
  static const std::vector<const Algorithm*> list = {&allreduce_mpi};
  return list;
}

const Algorithm& allreduce_default(const CommImpl&, const CollArgs&) { return allreduce_mpi; }

}  // namespace tilecomm::detail
