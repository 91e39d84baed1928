// The AllGather algorithms and the default table.
#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

extern const Algorithm allgather_mpi;
extern const Algorithm allgather_ring;
extern const Algorithm allgather_shm;

const std::vector<const Algorithm*>& allgather_algorithms() {
  static const std::vector<const Algorithm*> list = {&allgather_mpi, &allgather_ring,
                                                     &allgather_shm};
  return list;
}

const Algorithm& allgather_default(const CommImpl&, const CollArgs&) { return allgather_mpi; }

}  // namespace tilecomm::detail
