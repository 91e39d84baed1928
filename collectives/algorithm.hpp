#pragma once
// What an algorithm is: a name, a collective, a test that may decline, and a body; and how one is
// chosen. Each collective keeps its list and its default table in collectives/<coll>/<coll>.cpp
// (thresholds: collectives/default_thresholds.hpp); selection is in collectives/select.cpp.

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "tilecomm/collectives.hpp"

namespace tilecomm::detail {

/// The validated arguments of one call. Counts are elements.
struct CollArgs {
  Collective coll = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  /// AllReduce: elements per rank; ReduceScatter: recv_count; AllGather: send_count;
  /// AllToAll: elements per peer; AllToAllv: unused; Broadcast: elements of the buffer.
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  VarLayout send_layout, recv_layout;  // AllToAllv only
  int root = 0;                        // Broadcast only

  /// In place, by the rule of each collective (see collectives.hpp); set by validation.
  bool in_place = false;

  std::size_t elem() const { return size_of(dtype); }
  /// Bytes of one rank's contribution (what the default tables are keyed on).
  std::size_t bytes() const { return count * elem(); }
};

struct Algorithm {
  const char* name;
  Collective coll;
  /// Empty when the algorithm can run these arguments on this communicator; else why not.
  std::string (*can_use)(const CommImpl& comm, const CollArgs& args);
  /// Runs the collective. Called on every rank with the same arguments, in the same order.
  void (*run)(CommImpl& comm, const CollArgs& args);
  /// True when it reduces in ReduceOrder::Canonical (read for AllReduce and ReduceScatter only).
  bool canonical_order = false;
};

/// Algorithms of a collective, in table order (defined in collectives/<coll>/<coll>.cpp).
const std::vector<const Algorithm*>& algorithms_of(Collective c);
/// The default choice for these arguments (the table, derived from bench measurements).
const Algorithm& default_algorithm(const CommImpl& comm, const CollArgs& args);
/// The TILECOMM_<COLLECTIVE> override of a collective (All-to-Allv: TILECOMM_ALLTOALL); empty
/// when unset.
const std::string& algorithm_override(Collective c);

/// The algorithm to run: `requested`, else the TILECOMM_* override, else the default. Throws
/// Error(InvalidArgument) for an unknown name (listing the valid ones) and Error(NotSupported)
/// when the chosen algorithm declines (saying why).
/// With ReduceOrder::Canonical on a floating type only algorithms that keep it are chosen, and
/// forcing another throws Error(InvalidArgument).
const Algorithm& choose_algorithm(const CommImpl& comm, const CollArgs& args,
                                  const std::string& requested,
                                  ReduceOrder order = ReduceOrder::Any);

}  // namespace tilecomm::detail
