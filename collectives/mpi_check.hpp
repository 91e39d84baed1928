#pragma once
// The return-code check of every MPI call tilecomm makes, and how its communicators are freed.

#include <mpi.h>

namespace tilecomm::detail {

/// Throws Error(MpiError) naming `what` and MPI's error string when rc != MPI_SUCCESS.
void mpi_check(int rc, const char* what);

/// Frees `comm` (MPI_Comm_free; null afterwards) unless `failed`. A communicator whose calls
/// failed may still have messages in flight: sends to a peer that gave up, receives cancelled
/// under a peer's sends. Freed, its context id goes to the next communicator the job creates,
/// and Open MPI delivers those stale messages there (it crashed in MPI_Win_allocate_shared's
/// communicator duplication, or the new communicator's calls waited for messages its sequence
/// numbers had skipped: AllToAllSkew.FailedCallsLeaveNothingForTheNextCommunicator). So a failed
/// communicator stays allocated until MPI_Finalize, where its stale messages stay unmatched: one
/// handle's worth of memory per failure.
void free_comm(MPI_Comm& comm, bool failed);

}  // namespace tilecomm::detail
