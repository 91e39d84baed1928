#pragma once
// Issue order of a communicator's calls, blocking and non-blocking: non-blocking calls run on a
// progress thread, one after the other; a blocking call runs inline unless calls are queued, then
// behind them.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tilecomm::detail {

class ProgressQueue {
 public:
  ProgressQueue() = default;
  /// Runs what is queued, then stops and joins the progress thread.
  ~ProgressQueue();
  ProgressQueue(const ProgressQueue&) = delete;
  ProgressQueue& operator=(const ProgressQueue&) = delete;

  /// Runs `op` after every earlier queued operation: inline when the queue is empty (blocking
  /// calls), else through the progress thread; rethrows what `op` throws.
  void run_blocking(const std::function<void()>& op);
  /// Queues `op` for the progress thread (started on first use); `done(error)` is called there
  /// after it runs.
  void run_async(std::function<void()> op, std::function<void(std::exception_ptr)> done);

 private:
  struct Queued {
    std::function<void()> op;
    std::function<void(std::exception_ptr)> done;
  };
  void progress_loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Queued> queue_;
  std::size_t in_flight_ = 0;  ///< queued + running, guarded by mutex_
  bool stopping_ = false;
  std::thread progress_;
};

}  // namespace tilecomm::detail
