// Broadcast by MPI_Ibcast: the baseline (bytes, so bfloat16 needs no MPI type).
#include "collectives/mpi_types.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl&, const CollArgs& a) {
  return mpi_int_counts(a, a.bytes());
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  MPI_Request req;
  mpi_check(MPI_Ibcast(a.recv, static_cast<int>(a.bytes()), MPI_BYTE, a.root, comm.mpi, &req),
            "MPI_Ibcast");
  comm.wait_all(&req, 1, "broadcast(mpi)", {a.root});
}

}  // namespace

extern const Algorithm broadcast_mpi{"mpi", Collective::Broadcast, can_use, run};

}  // namespace tilecomm::detail
