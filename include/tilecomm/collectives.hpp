#pragma once
/// \file collectives.hpp
/// AllReduce, ReduceScatter, AllGather, All-to-All, All-to-Allv, Broadcast and Barrier on a
/// Communicator.
///
/// Common rules:
///  - counts are in elements; buffers must not be null when their count is > 0;
///  - every rank passes the same count, dtype, op and algorithm (All-to-Allv: matching counts);
///  - send and receive buffers either do not overlap or are exactly "in place" as stated per call;
///  - results are deterministic: for a given rank count and algorithm they are bitwise identical on
///    every rank and in every run (reductions combine ranks in a fixed order, never arrival order);
///  - bad arguments raise tilecomm::Error naming the argument and value, before any communication;
///  - algorithm choice: `options.algorithm` if set, else the TILECOMM_<COLLECTIVE> variable
///    (All-to-Allv: TILECOMM_ALLTOALL), else ("auto") the default table: a choice by node layout
///    and message size whose thresholds and measurements are in docs/collectives.md ("Where the
///    default thresholds come from"); when the table's choice cannot run the arguments, the first
///    algorithm of algorithm_names() that can. An unknown name is an error listing the valid
///    ones; a named algorithm that cannot run these arguments is an error saying why.
///  - non-blocking calls (i*) return a Request; buffers must stay valid and untouched until it
///    completes. Calls execute in issue order, blocking or not.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tilecomm/communicator.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm {

enum class Collective { AllReduce, ReduceScatter, AllGather, AllToAll, AllToAllv, Broadcast };
std::string_view to_string(Collective c) noexcept;

/// The order in which a reducing collective (AllReduce, ReduceScatter) combines the ranks' values.
/// Every algorithm is deterministic (the same call on the same communicator gives the same bits on
/// every rank and in every run); they differ in the order, and so, for floating types, in the last
/// bits of a sum.
enum class ReduceOrder {
  /// The chosen algorithm's own order (the default, the fastest): ring and recursive doubling
  /// combine ranks in an order that depends on the element's position and the rank count.
  Any,
  /// Every element is the left fold, over the nodes in node order, of each node's left fold over
  /// its ranks in ascending rank order: (x0 op x1) op x2 ... on one node; with two nodes of two
  /// ranks, (x0 op x1) op (x2 op x3). The same bits whatever the size, chunking or algorithm, and
  /// the order the fused operators use, so a GemvAllReduce gives the same bits in every mode. Only
  /// algorithms that keep it run: AllReduce one_shot and two_shot (one node) and hierarchical;
  /// ReduceScatter shm (one node) and hierarchical. Forcing another (argument or TILECOMM_*) raises
  /// Error(InvalidArgument); a call none of them can run raises Error(NotSupported). Integer types
  /// ignore it (their sums wrap, so every order gives the same bits).
  Canonical,
};

/// Per-call options.
struct CollectiveOptions {
  std::string algorithm;                 ///< empty: environment override, then the default table
  ReduceOrder order = ReduceOrder::Any;  ///< see ReduceOrder; every rank must pass the same
};

namespace detail {
struct RequestAccess;
}  // namespace detail

/// A non-blocking collective in flight. Its Communicator must outlive it.
class Request {
 public:
  Request() = default;
  /// True when complete; rethrows the operation's error.
  bool test();
  /// Blocks until complete; rethrows the operation's error.
  void wait();

 private:
  struct State;
  friend struct detail::RequestAccess;  // the collectives make requests through it
  explicit Request(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

/// recv[i] = op over ranks of send[i], for i < count. In place when send == recv.
void allreduce(Communicator& comm, const void* send, void* recv, std::size_t count, DataType dtype,
               ReduceOp op, const CollectiveOptions& options = {});
Request iallreduce(Communicator& comm, const void* send, void* recv, std::size_t count,
                   DataType dtype, ReduceOp op, const CollectiveOptions& options = {});

/// send holds size()*recv_count elements; rank r receives the reduction of block r.
/// In place when recv == send + rank()*recv_count (in elements).
void reduce_scatter(Communicator& comm, const void* send, void* recv, std::size_t recv_count,
                    DataType dtype, ReduceOp op, const CollectiveOptions& options = {});
Request ireduce_scatter(Communicator& comm, const void* send, void* recv, std::size_t recv_count,
                        DataType dtype, ReduceOp op, const CollectiveOptions& options = {});

/// recv (size()*send_count elements) gets every rank's send block in rank order.
/// In place when send == recv + rank()*send_count (in elements).
void allgather(Communicator& comm, const void* send, void* recv, std::size_t send_count,
               DataType dtype, const CollectiveOptions& options = {});
Request iallgather(Communicator& comm, const void* send, void* recv, std::size_t send_count,
                   DataType dtype, const CollectiveOptions& options = {});

/// Block p of send (count elements) goes to rank p and lands in block rank() of its recv.
/// In place when send == recv.
void alltoall(Communicator& comm, const void* send, void* recv, std::size_t count, DataType dtype,
              const CollectiveOptions& options = {});
Request ialltoall(Communicator& comm, const void* send, void* recv, std::size_t count,
                  DataType dtype, const CollectiveOptions& options = {});

/// Per-peer counts and displacements (elements) into a buffer of `capacity` elements.
struct VarLayout {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> displs;
  std::size_t capacity = 0;
};

/// send.counts[p] elements at send.displs[p] go to rank p, landing at recv.displs[rank()] there;
/// recv.counts[p] must equal what rank p sends here. Not in place: buffers must not overlap.
void alltoallv(Communicator& comm, const void* send, const VarLayout& send_layout, void* recv,
               const VarLayout& recv_layout, DataType dtype, const CollectiveOptions& options = {});
Request ialltoallv(Communicator& comm, const void* send, const VarLayout& send_layout, void* recv,
                   const VarLayout& recv_layout, DataType dtype,
                   const CollectiveOptions& options = {});

/// buf (count elements) on every rank gets root's buf. Always in place: there is one buffer.
/// root must be a rank of the communicator and the same on every rank. Algorithms: "mpi"
/// (MPI_Ibcast, any node layout), "shm" (one node: the root streams through its shared segment,
/// every other rank copies out), "hierarchical" (shm on the root's node, MPI_Ibcast among local
/// rank 0 of every node, then shm on the other nodes). Default: shm on one node, else mpi;
/// TILECOMM_BROADCAST overrides. Ordered with the other calls like them.
void broadcast(Communicator& comm, void* buf, std::size_t count, DataType dtype, int root,
               const CollectiveOptions& options = {});
Request ibroadcast(Communicator& comm, void* buf, std::size_t count, DataType dtype, int root,
                   const CollectiveOptions& options = {});

/// Waits for every rank (through the shared segment on a node, MPI_Ibarrier between node leaders):
/// the same as Communicator::barrier(). Ordered with the other calls: ibarrier() completes after
/// every call issued before it on this rank has completed, and on no rank before every rank has
/// issued it.
void barrier(Communicator& comm);
Request ibarrier(Communicator& comm);

/// Names of the algorithms of a collective, in table order.
std::vector<std::string> algorithm_names(Collective c);
/// The algorithm the default table (plus environment override) picks for these arguments.
std::string selected_algorithm(const Communicator& comm, Collective c, std::size_t count,
                               DataType dtype);

/// Typed convenience: allreduce over spans (in place when both spans are the same memory).
template <class T>
void allreduce(Communicator& comm, std::span<const T> send, std::span<T> recv, ReduceOp op,
               const CollectiveOptions& options = {}) {
  allreduce(comm, send.data(), recv.data(), send.size(), data_type_of<T>(), op, options);
}

}  // namespace tilecomm
