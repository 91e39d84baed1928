#pragma once
/// \file env.hpp
/// Every TILECOMM_* environment variable, read and validated in one place (runtime/env.cpp).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tilecomm/defaults.hpp"

namespace tilecomm {

/// The values of all TILECOMM_* variables. A field keeps its default when the variable is unset or
/// empty; a value that does not parse raises tilecomm::Error naming the variable and the value.
struct Env {
  /// TILECOMM_CUS: compute units per rank (0: cores in mask)
  int cus = defaults::kNumCus;
  /// TILECOMM_WG_SLOTS: max resident workgroups per CU
  int wg_slots = defaults::kWgSlotsPerCu;
  /// TILECOMM_LDS_BYTES: LDS capacity per CU (K/M suffix ok)
  std::size_t lds_bytes = defaults::kLdsBytesPerCu;
  /// TILECOMM_PIN: pin CU threads to cores (0/1)
  bool pin = defaults::kPinThreads;
  /// TILECOMM_TRACE: write a Chrome trace to this path
  std::string trace;
  /// TILECOMM_SPIN_US: busy-spin before a waiter yields
  double spin_us = defaults::kSpinUs;
  /// TILECOMM_TIMEOUT_S: deadline of every wait (0: none)
  double timeout_s = defaults::kTimeoutS;
  /// TILECOMM_ALLREDUCE: force an AllReduce algorithm
  std::string allreduce;
  /// TILECOMM_REDUCE_SCATTER: force a ReduceScatter algorithm
  std::string reduce_scatter;
  /// TILECOMM_ALLGATHER: force an AllGather algorithm
  std::string allgather;
  /// TILECOMM_ALLTOALL: force an All-to-All(v) algorithm
  std::string alltoall;
  std::string broadcast;  ///< TILECOMM_BROADCAST
  /// TILECOMM_NODE_SIZE: pretend nodes of N ranks (0: real)
  int node_size = defaults::kNodeSize;
  /// TILECOMM_SHM_BYTES: shared segment per rank (K/M/G ok)
  std::size_t shm_bytes = defaults::kShmBytes;
  /// TILECOMM_CHECK: fingerprint calls across ranks (0/1)
  bool check = defaults::kCheck;
  /// TILECOMM_ISA: cap the kernels' vector ISA: scalar, avx2 or avx512 ("": the CPU's widest)
  std::string isa;
  /// TILECOMM_PROFILE: the calibrated cost profile Mode::Auto reads ("": the default path under
  /// cache_home, if that file exists; docs/model.md)
  std::string profile;
  /// The user's cache directory: XDG_CACHE_HOME, else $HOME/.cache ("" when neither is set). Not a
  /// TILECOMM_* variable; the default profile lives in <cache_home>/tilecomm/.
  std::string cache_home;
  /// Ranks the launcher started on this node (OMPI_COMM_WORLD_LOCAL_SIZE, or MPICH's
  /// MPI_LOCALNRANKS); 0 when not launched by one. Not a TILECOMM_* variable: a value that does not
  /// parse is ignored (treated as 0), never an error.
  int launcher_local_ranks = 0;
  /// This process's rank and the job's size as the launcher reports them (OMPI_COMM_WORLD_RANK /
  /// _SIZE, PMI_RANK / PMI_SIZE, PMIX_RANK); -1 and 0 when not launched by one. Used before MPI is
  /// initialised (the trace path); ignored when they do not parse.
  int launcher_rank = -1;
  int launcher_size = 0;

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

/// TILECOMM_TRACE's path for one rank of a job: every "%r" becomes the rank; without one, a job of
/// several ranks gets ".rank<N>" before the file's extension (trace.json -> trace.rank1.json), so
/// ranks never write the same file. A single process keeps the path as given.
std::string rank_trace_path(const std::string& path, int rank, int size);

}  // namespace tilecomm
