// AllReduce by MPI_Iallreduce on the duplicated communicator: the baseline.
#include "collectives/mpi_types.hpp"

namespace tilecomm::detail {
namespace {

void run(CommImpl& comm, const CollArgs& a) {
  MPI_Request req;
  mpi_check(MPI_Iallreduce(a.in_place ? MPI_IN_PLACE : a.send, a.recv, static_cast<int>(a.count),
                           mpi_datatype(a.dtype), mpi_op(a.op), comm.comm, &req),
            "MPI_Iallreduce");
  comm.wait_all(&req, 1, "allreduce(mpi)");
}

}  // namespace

extern const Algorithm allreduce_mpi{"mpi", Collective::AllReduce, mpi_can_reduce, run};

}  // namespace tilecomm::detail
