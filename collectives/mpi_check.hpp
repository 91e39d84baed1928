#pragma once
// The return-code check of every MPI call tilecomm makes.

namespace tilecomm::detail {

/// Throws Error(MpiError) naming `what` and MPI's error string when rc != MPI_SUCCESS.
void mpi_check(int rc, const char* what);

}  // namespace tilecomm::detail
