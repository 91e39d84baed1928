// The progress thread of a communicator and the issue order of its calls.
#include "collectives/progress_queue.hpp"

#include <utility>

namespace tilecomm::detail {

ProgressQueue::~ProgressQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (progress_.joinable()) progress_.join();
}

void ProgressQueue::run_blocking(const std::function<void()>& op) {
  {
    std::unique_lock lock(mutex_);
    if (in_flight_ > 0) {  // keep issue order: go through the queue behind earlier requests
      std::exception_ptr error;
      bool finished = false;
      lock.unlock();
      run_async(op, [&](std::exception_ptr e) {
        std::lock_guard l(mutex_);
        error = e;
        finished = true;
        changed_.notify_all();
      });
      lock.lock();
      changed_.wait(lock, [&] { return finished; });
      if (error) std::rethrow_exception(error);
      return;
    }
  }
  op();
}

void ProgressQueue::run_async(std::function<void()> op,
                              std::function<void(std::exception_ptr)> done) {
  std::lock_guard lock(mutex_);
  if (!progress_.joinable()) progress_ = std::thread([this] { progress_loop(); });
  queue_.push_back({std::move(op), std::move(done)});
  ++in_flight_;
  changed_.notify_all();
}

void ProgressQueue::progress_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      q.op();
    } catch (...) {
      error = std::current_exception();
    }
    q.done(error);
    lock.lock();
    --in_flight_;
    changed_.notify_all();
  }
}

}  // namespace tilecomm::detail
