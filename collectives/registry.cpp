// Algorithm lookup and selection: explicit argument, then TILECOMM_<COLLECTIVE>, then the table.
#include <fmt/format.h>

#include "collectives/algorithm.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {

std::string_view to_string(Collective c) noexcept {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "allgather";
    case Collective::AllToAll: return "alltoall";
    case Collective::AllToAllv: return "alltoallv";
  }
  return "?";
}

std::string_view to_string(DataType t) noexcept {
  switch (t) {
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::BFloat16: return "bfloat16";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

namespace detail {
namespace {

const std::string& env_override(Collective c) {
  const Env& e = env();
  switch (c) {
    case Collective::AllReduce: return e.allreduce;
    case Collective::ReduceScatter: return e.reduce_scatter;
    case Collective::AllGather: return e.allgather;
    case Collective::AllToAll:
    case Collective::AllToAllv: return e.alltoall;
  }
  return e.allreduce;
}

const char* env_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "TILECOMM_ALLREDUCE";
    case Collective::ReduceScatter: return "TILECOMM_REDUCE_SCATTER";
    case Collective::AllGather: return "TILECOMM_ALLGATHER";
    default: return "TILECOMM_ALLTOALL";
  }
}

}  // namespace

const Algorithm& choose_algorithm(const CommImpl& comm, const CollArgs& args,
                                  const std::string& requested) {
  const std::string& forced = !requested.empty() ? requested : env_override(args.coll);
  const char* source = !requested.empty() ? "CollectiveOptions.algorithm" : env_name(args.coll);
  if (forced.empty() || forced == "auto") {
    // The table's choice, unless it declines these arguments: then the first in list order that
    // accepts ("not supported here" is a normal answer, as in UCC).
    const Algorithm& preferred = default_algorithm(comm, args);
    if (preferred.can_use(comm, args).empty()) return preferred;
    std::string reasons = fmt::format("{}: {}", preferred.name, preferred.can_use(comm, args));
    for (const Algorithm* a : algorithms_of(args.coll)) {
      const std::string why = a->can_use(comm, args);
      if (why.empty()) return *a;
      reasons += fmt::format("; {}: {}", a->name, why);
    }
    throw Error(ErrorCode::NotSupported,
                fmt::format("no {} algorithm can run this call ({})", to_string(args.coll), reasons));
  }
  for (const Algorithm* a : algorithms_of(args.coll)) {
    if (forced != a->name) continue;
    std::string why = a->can_use(comm, args);
    if (!why.empty())
      throw Error(ErrorCode::NotSupported,
                  fmt::format("{} algorithm '{}' ({}) cannot run this call: {}", to_string(args.coll),
                              forced, source, why));
    return *a;
  }
  std::string valid;
  for (const Algorithm* a : algorithms_of(args.coll)) valid += std::string(valid.empty() ? "" : ", ") + a->name;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{} = '{}' is not a known {} algorithm; valid: auto, {}", source, forced,
                          to_string(args.coll), valid));
}

}  // namespace detail

std::vector<std::string> algorithm_names(Collective c) {
  std::vector<std::string> names;
  for (const detail::Algorithm* a : detail::algorithms_of(c)) names.emplace_back(a->name);
  return names;
}

}  // namespace tilecomm
