// The AllReduce algorithms and the default table.
#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

extern const Algorithm allreduce_mpi;
extern const Algorithm allreduce_ring;
extern const Algorithm allreduce_recursive_doubling;
extern const Algorithm allreduce_one_shot;
extern const Algorithm allreduce_two_shot;
extern const Algorithm allreduce_hierarchical;

const std::vector<const Algorithm*>& allreduce_algorithms() {
  static const std::vector<const Algorithm*> list = {&allreduce_mpi, &allreduce_ring,
                                                     &allreduce_recursive_doubling,
                                                     &allreduce_one_shot,
                                                     &allreduce_two_shot,
                                                     &allreduce_hierarchical};
  return list;
}

const Algorithm& allreduce_default(const CommImpl&, const CollArgs&) { return allreduce_mpi; }

}  // namespace tilecomm::detail
