// AllGather by MPI_Iallgather: the baseline.
#include "collectives/mpi_types.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl& comm, const CollArgs& a) {
  return mpi_int_counts(a, a.count);
}

void run(CommImpl& comm, const CollArgs& a) {
  MPI_Request req;
  const MPI_Datatype t = mpi_datatype(a.dtype);
  const int n = static_cast<int>(a.count);
  mpi_check(MPI_Iallgather(a.in_place ? MPI_IN_PLACE : a.send, n, t, a.recv, n, t, comm.mpi, &req),
            "MPI_Iallgather");
  comm.wait_all(&req, 1, "allgather(mpi)");
}

}  // namespace

extern const Algorithm allgather_mpi{"mpi", Collective::AllGather, can_use, run};

}  // namespace tilecomm::detail
