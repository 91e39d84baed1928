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

}  // namespace tilecomm::detail
