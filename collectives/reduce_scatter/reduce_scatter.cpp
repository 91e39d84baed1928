// The ReduceScatter algorithms and the default table.
#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

extern const Algorithm reduce_scatter_mpi;
extern const Algorithm reduce_scatter_ring;
extern const Algorithm reduce_scatter_shm;

const std::vector<const Algorithm*>& reduce_scatter_algorithms() {
  static const std::vector<const Algorithm*> list = {&reduce_scatter_mpi, &reduce_scatter_ring,
                                                     &reduce_scatter_shm};
  return list;
}

const Algorithm& reduce_scatter_default(const CommImpl&, const CollArgs&) { return reduce_scatter_mpi; }

}  // namespace tilecomm::detail
