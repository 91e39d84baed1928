// All-to-All and All-to-Allv by MPI_Ialltoall / MPI_Ialltoallv: the baselines.
#include <algorithm>
#include <vector>

#include "collectives/mpi_types.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl&, const CollArgs& a) {
  return mpi_int_counts(a, a.count);
}

void run(CommImpl& comm, const CollArgs& a) {
  MPI_Request req;
  const MPI_Datatype t = mpi_datatype(a.dtype);
  const int n = static_cast<int>(a.count);
  mpi_check(MPI_Ialltoall(a.in_place ? MPI_IN_PLACE : a.send, n, t, a.recv, n, t, comm.mpi, &req),
            "MPI_Ialltoall");
  comm.wait_all(&req, 1, "alltoall(mpi)");
}

std::string can_use_v(const CommImpl&, const CollArgs& a) {
  std::size_t largest = std::max(a.send_layout.capacity, a.recv_layout.capacity);
  return mpi_int_counts(a, largest);
}

void run_v(CommImpl& comm, const CollArgs& a) {
  auto ints = [](const std::vector<std::size_t>& v) {
    return std::vector<int>(v.begin(), v.end());
  };
  std::vector<int> sc = ints(a.send_layout.counts), sd = ints(a.send_layout.displs);
  std::vector<int> rc = ints(a.recv_layout.counts), rd = ints(a.recv_layout.displs);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  MPI_Request req;
  mpi_check(MPI_Ialltoallv(a.send, sc.data(), sd.data(), t, a.recv, rc.data(), rd.data(), t,
                           comm.mpi, &req),
            "MPI_Ialltoallv");
  comm.wait_all(&req, 1, "alltoallv(mpi)");
}

}  // namespace

extern const Algorithm alltoall_mpi{"mpi", Collective::AllToAll, can_use, run};
extern const Algorithm alltoallv_mpi{"mpi", Collective::AllToAllv, can_use_v, run_v};

}  // namespace tilecomm::detail
