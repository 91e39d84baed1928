#pragma once
// The "tilecomm" torch.distributed process group in C++ (the module tilecomm._torch_pg, built
// against Debian's libtorch 1.13 when it is present): the ProcessGroup subclass (torch_pg.cpp)
// and its Work (torch_pg_work.cpp). Same operations, checks, messages and communicator rules as
// the Python process group of python/tilecomm/torch/_backend.py, which stays the fallback.
//
// Errors: a bad argument raises c10::TypeError / c10::ValueError (Python TypeError / ValueError)
// naming the torch.distributed function, before any communication; an operation tilecomm does not
// provide raises c10::Error (RuntimeError) naming it and the backend that does.
//
// Blocking or not: torch.distributed does not tell a process group whether its caller passed
// async_op; it waits on the returned Work at once when async_op is False. A blocking call runs
// tilecomm's blocking collective on the calling thread (no hand-off to the communicator's
// progress thread: that hand-off costs tens of microseconds on a loaded machine), so the group
// looks at the calling Python frame (caller_blocks()): a call from a torch.distributed function
// whose local async_op is False blocks; any other call (async_op=True, a direct call, a C++
// caller such as DDP's reducer) posts tilecomm's non-blocking form and returns a Work backed by
// its Request. Either way calls run in issue order.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "binding.hpp"

namespace tilecomm::python {

/// True once MPI_Finalize has run (this module's copy of _core's mpi_finalized()).
bool torch_pg_mpi_finalized();

/// The result of a call: complete at birth (a blocking call, `finish` already run) or backed by a
/// tilecomm Request. wait() waits for the request, then runs `finish` (copies out of staging
/// tensors, the division of avg) once; the tensors and the communicator stay referenced until
/// then. Completion is guarded by a lock, so wait() may race the thread behind getFuture().
/// Dropping an unfinished Work waits for it (its tensors must outlive the call).
class TilecommWork final : public c10d::Work {
 public:
  /// A completed call.
  TilecommWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  /// A call in flight.
  TilecommWork(int rank, c10d::OpType type, Request request, std::function<void()> finish,
               std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
               std::shared_ptr<CommState> state);
  ~TilecommWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  /// Waits for completion (the timeout is not used: tilecomm's own TILECOMM_TIMEOUT_S applies);
  /// rethrows the call's error.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /// A future completed with the output tensors (as result()) once the call has finished, or with
  /// its error. It completes on its own, like gloo's: a thread waits for the request, so
  /// callbacks chained with then() run on that thread.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void complete();         // waits, finishes; rethrows the error
  void complete_locked();  // the same with mu_ held
  void release_locked();   // done: drops the request, the finisher and what they kept alive

  mutable std::mutex mu_;
  Request request_;
  std::function<void()> finish_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  std::shared_ptr<CommState> state_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// The process group: one tilecomm Communicator (shared with the Python tilecomm.Communicator it
/// was made from), every collective posted on it in call order.
class ProcessGroupTilecomm final : public c10d::ProcessGroup {
 public:
  explicit ProcessGroupTilecomm(std::shared_ptr<CommState> state);

  const std::string getBackendName() const override { return "tilecomm"; }
  const std::shared_ptr<CommState>& state() const { return state_; }
  /// Calls run blocking on the calling thread / posted non-blocking so far (for tests).
  std::size_t blocking_calls() const { return blocking_calls_; }
  std::size_t async_calls() const { return async_calls_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // What tilecomm does not provide: c10::Error naming the operation and gloo.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  /// One collective: `call(comm, blocking)` runs tilecomm's blocking form (returning an empty
  /// Request) or posts its non-blocking form, with the communicator's lock held.
  using Call = std::function<Request(Communicator&, bool blocking)>;
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const Call& call,
                                     std::function<void()> finish, std::vector<at::Tensor> outputs,
                                     std::vector<at::Tensor> keep);

  std::shared_ptr<CommState> state_;
  std::size_t blocking_calls_ = 0;
  std::size_t async_calls_ = 0;
};

}  // namespace tilecomm::python
