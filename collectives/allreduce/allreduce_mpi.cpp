// AllReduce by MPI_Iallreduce on the duplicated communicator: the baseline.
#include "collectives/mpi_types.hpp"

namespace tilecomm::detail {
namespace {

void run(CommImpl& comm, const CollArgs& a) {
  MPI_Request req;
  if (a.dtype == DataType::BFloat16) {  // as float32, rounded once
    reduce_bf16_as_float(a.in_place ? a.recv : a.send, a.count, a.recv, 0, a.count, [&](float* f) {
      mpi_check(MPI_Iallreduce(MPI_IN_PLACE, f, static_cast<int>(a.count), MPI_FLOAT, mpi_op(a.op),
                               comm.mpi, &req),
                "MPI_Iallreduce");
      comm.wait_all(&req, 1, "allreduce(mpi)");
    });
    return;
  }
  mpi_check(MPI_Iallreduce(a.in_place ? MPI_IN_PLACE : a.send, a.recv, static_cast<int>(a.count),
                           mpi_datatype(a.dtype), mpi_op(a.op), comm.mpi, &req),
            "MPI_Iallreduce");
  comm.wait_all(&req, 1, "allreduce(mpi)");
}

}  // namespace

extern const Algorithm allreduce_mpi{"mpi", Collective::AllReduce, mpi_can_reduce, run};

}  // namespace tilecomm::detail
