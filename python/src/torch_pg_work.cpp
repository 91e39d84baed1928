// The Work of the C++ "tilecomm" process group (torch_pg.hpp says what it promises).
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <thread>
#include <utility>

#include "torch_pg.hpp"

namespace tilecomm::python {

bool torch_pg_mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

TilecommWork::TilecommWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), outputs_(std::move(outputs)), done_(true) {}

TilecommWork::TilecommWork(int rank, c10d::OpType type, Request request,
                           std::function<void()> finish, std::vector<at::Tensor> outputs,
                           std::vector<at::Tensor> keep, std::shared_ptr<CommState> state)
    : c10d::Work(rank, type),
      request_(std::move(request)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      keep_(std::move(keep)),
      state_(std::move(state)) {}

TilecommWork::~TilecommWork() {
  if (done_ || torch_pg_mpi_finalized()) return;
  try {
    complete();
  } catch (...) {  // nobody is left to see the error
  }
}

void TilecommWork::complete() {
  std::lock_guard lock(mu_);
  complete_locked();
}

void TilecommWork::complete_locked() {
  if (!done_) {
    try {
      request_.wait();
      if (finish_) finish_();
    } catch (...) {
      error_ = std::current_exception();
    }
    release_locked();
  }
  if (error_) std::rethrow_exception(error_);
}

void TilecommWork::release_locked() {
  done_ = true;
  request_ = Request{};
  finish_ = nullptr;
  keep_.clear();
  state_.reset();
}

bool TilecommWork::isCompleted() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // the future's thread is completing it
  if (done_) return true;
  try {
    if (!request_.test()) return false;
    complete_locked();
  } catch (...) {  // kept: exception() / wait() report it
    if (!done_) {
      error_ = std::current_exception();
      release_locked();
    }
  }
  return true;
}

bool TilecommWork::isSuccess() const {
  std::lock_guard lock(mu_);
  return done_ && !error_;
}

std::exception_ptr TilecommWork::exception() const {
  std::lock_guard lock(mu_);
  return error_;
}

std::vector<at::Tensor> TilecommWork::result() {
  complete();
  return outputs_;
}

void TilecommWork::synchronize() {
  complete();
}

bool TilecommWork::wait(std::chrono::milliseconds /*timeout*/) {
  complete();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TilecommWork::getFuture() {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  auto self = c10::intrusive_ptr<TilecommWork>::unsafe_reclaim_from_nonowning(this);
  auto settle = [self, future] {
    try {
      self->complete();
    } catch (...) {
      future->setError(std::current_exception());
      return;
    }
    future->markCompleted(c10::IValue(self->outputs_));
  };
  bool done = false;
  {
    std::lock_guard lock(mu_);
    done = done_;
  }
  if (done)
    settle();
  else
    std::thread(std::move(settle)).detach();
  return future;
}

}  // namespace tilecomm::python
