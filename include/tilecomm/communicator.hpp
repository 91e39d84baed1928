#pragma once
/// \file communicator.hpp
/// A tilecomm communicator: an MPI communicator plus node-local shared memory.

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace tilecomm {

namespace detail {
struct CommImpl;
struct CommAccess;
}  // namespace detail

/// How a Communicator is built. Negative/zero values take the TILECOMM_* defaults.
struct CommConfig {
  /// Bytes of the shared-memory data segment per rank (TILECOMM_SHM_BYTES). Large messages are
  /// pipelined through it in chunks; nothing is allocated in proportion to a message.
  std::size_t shm_bytes = 0;
  /// Pretend nodes of this many consecutive ranks (TILECOMM_NODE_SIZE), so off-node paths run
  /// through MPI point-to-point even on one host. -1: environment; 0: real nodes.
  int node_size = -1;
  /// Deadline of every wait inside collectives, seconds (TILECOMM_TIMEOUT_S). < 0: environment.
  double timeout_s = -1.0;
  /// Verify mode (TILECOMM_CHECK; the field keeps its historical name): before each collective or
  /// operator call, compare a fingerprint of it (operation, dtype, op, counts/shape,
  /// algorithm/mode as requested, call number) across ranks and raise Error(Mismatch) on every
  /// rank on any difference (docs/failure.md).
  /// 1: on; 0: off; -1: environment. On for every rank when any rank asks for it.
  int check = -1;
};

/// A group of ranks that run collectives together. Built collectively from an MPI communicator,
/// which it duplicates: the user's communicator never carries tilecomm's traffic. On-node peers
/// (MPI_COMM_TYPE_SHARED, or pretend nodes) share a symmetric MPI shared-memory window and load and
/// store each other's segments directly; off-node peers are reached by MPI point-to-point.
///
/// Rules (as for an MPI communicator): every rank makes the same calls in the same order; calls on
/// one Communicator must not run concurrently from several threads; blocking and non-blocking calls
/// execute in issue order. MPI must be initialised with MPI_THREAD_MULTIPLE. Construction and
/// destruction are collective.
///
/// Lifetime: a Communicator must outlive every operator context built on it (GemvAllReduce,
/// EmbeddingAllToAll, GemmAllToAll) and every Request made from it; destroy those first.
class Communicator {
 public:
  explicit Communicator(MPI_Comm comm, CommConfig config = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  /// This rank's node, the number of nodes, and its index among the node's ranks.
  int node() const;
  int num_nodes() const;
  int local_rank() const;
  int local_size() const;
  /// The node of any rank.
  int node_of(int rank) const;
  /// The internal (duplicated) MPI communicator.
  MPI_Comm mpi_comm() const;
  /// Waits for every rank (through shared memory on a node, MPI between nodes).
  void barrier();

 private:
  friend struct detail::CommAccess;  // the library's own layers reach the state through it
  std::unique_ptr<detail::CommImpl> impl_;
};

}  // namespace tilecomm
