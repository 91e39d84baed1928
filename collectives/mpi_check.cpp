#include "collectives/mpi_check.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <string>

#include "tilecomm/error.hpp"

namespace tilecomm::detail {

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(ErrorCode::MpiError, fmt::format("{} failed: {}", what, std::string(text, len)));
}

void free_comm(MPI_Comm& comm, bool failed) {
  if (comm == MPI_COMM_NULL) return;
  if (!failed) MPI_Comm_free(&comm);
  comm = MPI_COMM_NULL;
}

}  // namespace tilecomm::detail
