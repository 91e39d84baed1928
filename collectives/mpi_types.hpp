#pragma once
// Mapping of tilecomm types to MPI's, for the `mpi` passthrough algorithms.

#include <mpi.h>

#include <string>

#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

/// MPI datatype of `t` (bfloat16 travels as MPI_UINT16_T: MPI cannot reduce it).
MPI_Datatype mpi_datatype(DataType t);
MPI_Op mpi_op(ReduceOp op);
/// Empty when MPI can reduce `args.dtype` with `args.op`; else why not.
std::string mpi_can_reduce(const CommImpl&, const CollArgs& args);
/// Empty when every count fits MPI's int.
std::string mpi_int_counts(const CollArgs& args, std::size_t largest);

}  // namespace tilecomm::detail
