#pragma once
// Mapping of tilecomm types to MPI's, for the `mpi` passthrough algorithms.

#include <mpi.h>

#include <functional>
#include <string>

#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

/// MPI datatype of `t` (bfloat16 travels as MPI_UINT16_T: MPI cannot reduce it; the reducing
/// `mpi` algorithms widen it to float32 first, see reduce_bf16_as_float).
MPI_Datatype mpi_datatype(DataType t);
MPI_Op mpi_op(ReduceOp op);
/// Empty when MPI can reduce `args.dtype` with `args.op` (bfloat16: as float32); else why not.
std::string mpi_can_reduce(const CommImpl&, const CollArgs& args);
/// Empty when every count fits MPI's int.
std::string mpi_int_counts(const CollArgs& args, std::size_t largest);

/// bfloat16 through MPI: widens `n` elements of `in` to float32 in private memory, lets
/// `reduce(float* buf)` reduce them in place as MPI_FLOAT (so partial results stay float32, as
/// tilecomm's bfloat16 contract says), and rounds `out_n` elements at `buf + out_offset` back to
/// bfloat16 into `out` once.
void reduce_bf16_as_float(const void* in, std::size_t n, void* out, std::size_t out_offset,
                          std::size_t out_n, const std::function<void(float*)>& reduce);

}  // namespace tilecomm::detail
