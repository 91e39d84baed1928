#pragma once
/// \file env.hpp
/// Every TILECOMM_* environment variable, read and validated in one place (runtime/env.cpp).

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tilecomm {

/// The values of all TILECOMM_* variables. A field keeps its default when the variable is unset or
/// empty; a value that does not parse raises tilecomm::Error naming the variable and the value.
struct Env {
  int cus = 0;                       ///< TILECOMM_CUS: compute units per rank (0: cores in mask)
  int wg_slots = 2;                  ///< TILECOMM_WG_SLOTS: max resident workgroups per CU
  std::size_t lds_bytes = 64 << 10;  ///< TILECOMM_LDS_BYTES: LDS capacity per CU (K/M suffix ok)
  bool pin = true;                   ///< TILECOMM_PIN: pin CU threads to cores (0/1)
  std::string trace;                 ///< TILECOMM_TRACE: write a Chrome trace to this path
  double spin_us = 50.0;             ///< TILECOMM_SPIN_US: busy-spin before a waiter yields
  double timeout_s = 300.0;          ///< TILECOMM_TIMEOUT_S: deadline of every wait (0: none)
  std::string allreduce;             ///< TILECOMM_ALLREDUCE: force an AllReduce algorithm
  std::string reduce_scatter;        ///< TILECOMM_REDUCE_SCATTER: force a ReduceScatter algorithm
  std::string allgather;             ///< TILECOMM_ALLGATHER: force an AllGather algorithm
  std::string alltoall;              ///< TILECOMM_ALLTOALL: force an All-to-All(v) algorithm
  int node_size = 0;                 ///< TILECOMM_NODE_SIZE: pretend nodes of N ranks (0: real)
  std::size_t shm_bytes = 8 << 20;   ///< TILECOMM_SHM_BYTES: shared segment per rank (K/M/G ok)
  bool check = false;                ///< TILECOMM_CHECK: fingerprint calls across ranks (0/1)

  /// Looks a variable up by name; returns nullopt when unset.
  using Lookup = std::function<std::optional<std::string>(const std::string&)>;

  /// Parses the variables through `lookup` (pure: used by tests and fuzzers).
  static Env parse(const Lookup& lookup);
  /// Parses the process environment now.
  static Env from_process();

  /// One row per variable: name, current value, meaning. Used by `tilecomm_info`.
  struct Row {
    std::string name, value, doc;
  };
  std::vector<Row> describe() const;
};

/// The process environment, parsed once on first use and cached (like NCCL_PARAM).
const Env& env();

}  // namespace tilecomm
