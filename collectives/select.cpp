// Algorithm selection: the explicit argument, then TILECOMM_<COLLECTIVE>, then the collective's
// default table (collectives/<coll>/<coll>.cpp, thresholds in collectives/default_thresholds.hpp);
// and the dispatch from a Collective to its algorithm list and table.
#include <fmt/format.h>

#include "collectives/algorithm.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

const std::vector<const Algorithm*>& allreduce_algorithms();
const std::vector<const Algorithm*>& reduce_scatter_algorithms();
const std::vector<const Algorithm*>& allgather_algorithms();
const std::vector<const Algorithm*>& alltoall_algorithms();
const std::vector<const Algorithm*>& alltoallv_algorithms();
const std::vector<const Algorithm*>& broadcast_algorithms();
const Algorithm& allreduce_default(const CommImpl&, const CollArgs&);
const Algorithm& reduce_scatter_default(const CommImpl&, const CollArgs&);
const Algorithm& allgather_default(const CommImpl&, const CollArgs&);
const Algorithm& alltoall_default(const CommImpl&, const CollArgs&);
const Algorithm& alltoallv_default(const CommImpl&, const CollArgs&);
const Algorithm& broadcast_default(const CommImpl&, const CollArgs&);

const std::vector<const Algorithm*>& algorithms_of(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return allreduce_algorithms();
    case Collective::ReduceScatter:
      return reduce_scatter_algorithms();
    case Collective::AllGather:
      return allgather_algorithms();
    case Collective::AllToAll:
      return alltoall_algorithms();
    case Collective::AllToAllv:
      return alltoallv_algorithms();
    case Collective::Broadcast:
      return broadcast_algorithms();
  }
  return allreduce_algorithms();
}

const Algorithm& default_algorithm(const CommImpl& comm, const CollArgs& args) {
  switch (args.coll) {
    case Collective::AllReduce:
      return allreduce_default(comm, args);
    case Collective::ReduceScatter:
      return reduce_scatter_default(comm, args);
    case Collective::AllGather:
      return allgather_default(comm, args);
    case Collective::AllToAll:
      return alltoall_default(comm, args);
    case Collective::AllToAllv:
      return alltoallv_default(comm, args);
    case Collective::Broadcast:
      return broadcast_default(comm, args);
  }
  return allreduce_default(comm, args);
}

const std::string& algorithm_override(Collective c) {
  const Env& e = env();
  switch (c) {
    case Collective::AllReduce:
      return e.allreduce;
    case Collective::ReduceScatter:
      return e.reduce_scatter;
    case Collective::AllGather:
      return e.allgather;
    case Collective::AllToAll:
    case Collective::AllToAllv:
      return e.alltoall;
    case Collective::Broadcast:
      return e.broadcast;
  }
  return e.allreduce;
}

namespace {

const char* override_variable(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "TILECOMM_ALLREDUCE";
    case Collective::ReduceScatter:
      return "TILECOMM_REDUCE_SCATTER";
    case Collective::AllGather:
      return "TILECOMM_ALLGATHER";
    case Collective::Broadcast:
      return "TILECOMM_BROADCAST";
    default:
      return "TILECOMM_ALLTOALL";
  }
}

// The table's choice, unless it declines these arguments: then the first in list order that
// accepts ("not supported here" is a normal answer, as in UCC).
// With `canonical`, only algorithms that keep ReduceOrder::Canonical count.
const Algorithm& table_choice(const CommImpl& comm, const CollArgs& args, bool canonical) {
  auto why_not = [&](const Algorithm& a) -> std::string {
    if (canonical && !a.canonical_order) return "does not keep ReduceOrder::Canonical";
    return a.can_use(comm, args);
  };
  const Algorithm& preferred = default_algorithm(comm, args);
  std::string reasons = why_not(preferred);
  if (reasons.empty()) return preferred;
  reasons = fmt::format("{}: {}", preferred.name, reasons);
  for (const Algorithm* a : algorithms_of(args.coll)) {
    const std::string why = why_not(*a);
    if (why.empty()) return *a;
    reasons += fmt::format("; {}: {}", a->name, why);
  }
  throw Error(ErrorCode::NotSupported,
              fmt::format("no {} algorithm can run this call ({})", to_string(args.coll), reasons));
}

// The order matters only where a reduction of floating values happens.
bool order_matters(const CollArgs& args) {
  const bool reduces = args.coll == Collective::AllReduce || args.coll == Collective::ReduceScatter;
  const bool floating = args.dtype == DataType::Float32 || args.dtype == DataType::Float64 ||
                        args.dtype == DataType::BFloat16;
  return reduces && floating;
}

std::string canonical_names(Collective c) {
  std::string names;
  for (const Algorithm* a : algorithms_of(c))
    if (a->canonical_order) names += std::string(names.empty() ? "" : ", ") + a->name;
  return names;
}

}  // namespace

const Algorithm& choose_algorithm(const CommImpl& comm, const CollArgs& args,
                                  const std::string& requested, ReduceOrder order) {
  const bool canonical = order == ReduceOrder::Canonical && order_matters(args);
  const std::string& forced = !requested.empty() ? requested : algorithm_override(args.coll);
  const char* source =
      !requested.empty() ? "CollectiveOptions.algorithm" : override_variable(args.coll);
  if (forced.empty() || forced == "auto") return table_choice(comm, args, canonical);
  for (const Algorithm* a : algorithms_of(args.coll)) {
    if (forced != a->name) continue;
    if (canonical && !a->canonical_order)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{} = '{}' does not keep ReduceOrder::Canonical (requested in "
                              "CollectiveOptions.order); {} algorithms that do: {}",
                              source, forced, to_string(args.coll), canonical_names(args.coll)));
    std::string why = a->can_use(comm, args);
    if (!why.empty())
      throw Error(ErrorCode::NotSupported,
                  fmt::format("{} algorithm '{}' ({}) cannot run this call: {}",
                              to_string(args.coll), forced, source, why));
    return *a;
  }
  std::string valid;
  for (const Algorithm* a : algorithms_of(args.coll))
    valid += std::string(valid.empty() ? "" : ", ") + a->name;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{} = '{}' is not a known {} algorithm; valid: auto, {}", source, forced,
                          to_string(args.coll), valid));
}

}  // namespace tilecomm::detail

namespace tilecomm {

std::vector<std::string> algorithm_names(Collective c) {
  std::vector<std::string> names;
  for (const detail::Algorithm* a : detail::algorithms_of(c))
    names.emplace_back(a->name);
  return names;
}

}  // namespace tilecomm
