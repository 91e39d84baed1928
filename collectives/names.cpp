// Names of the public enums, as messages, fingerprints and benchmarks print them.
#include "tilecomm/collectives.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm {

std::string_view to_string(Collective c) noexcept {
  switch (c) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::ReduceScatter:
      return "reduce_scatter";
    case Collective::AllGather:
      return "allgather";
    case Collective::AllToAll:
      return "alltoall";
    case Collective::AllToAllv:
      return "alltoallv";
    case Collective::Broadcast:
      return "broadcast";
  }
  return "?";
}

std::string_view to_string(DataType t) noexcept {
  switch (t) {
    case DataType::Float32:
      return "float32";
    case DataType::Float64:
      return "float64";
    case DataType::Int32:
      return "int32";
    case DataType::Int64:
      return "int64";
    case DataType::BFloat16:
      return "bfloat16";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

}  // namespace tilecomm
