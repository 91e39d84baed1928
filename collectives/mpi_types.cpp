#include "collectives/mpi_types.hpp"

#include <fmt/format.h>

#include <climits>
#include <vector>

#include "collectives/p2p_common.hpp"

namespace tilecomm::detail {

MPI_Datatype mpi_datatype(DataType t) {
  switch (t) {
    case DataType::Float32:
      return MPI_FLOAT;
    case DataType::Float64:
      return MPI_DOUBLE;
    case DataType::Int32:
      return MPI_INT32_T;
    case DataType::Int64:
      return MPI_INT64_T;
    case DataType::BFloat16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

std::string mpi_can_reduce(const CommImpl&, const CollArgs& args) {
  return mpi_int_counts(args, args.count);
}

std::string mpi_int_counts(const CollArgs&, std::size_t largest) {
  if (largest > static_cast<std::size_t>(INT_MAX))
    return fmt::format("count {} does not fit MPI's int", largest);
  return {};
}

void reduce_bf16_as_float(const void* in, std::size_t n, void* out, std::size_t out_offset,
                          std::size_t out_n, const std::function<void(float*)>& reduce) {
  std::vector<float> wide(n);
  p2p::bf16_to_float(wide.data(), in, n);
  reduce(wide.data());
  p2p::float_to_bf16(out, wide.data() + out_offset, out_n);
}

}  // namespace tilecomm::detail
