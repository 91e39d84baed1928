#include "ops/common/proxy.hpp"

#include <fmt/format.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "collectives/comm_impl.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

/// While alive, the calling (host) thread's sleeps are precise to 1 us, as the device threads' are
/// (Linux's default timer slack adds 50 us to every sleep); restores the thread's own slack.
class HostTimerSlack {
 public:
  HostTimerSlack() : saved_(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) {
    if (saved_ >= 0) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  }
  ~HostTimerSlack() {
    if (saved_ >= 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(saved_), 0, 0, 0);
  }
  HostTimerSlack(const HostTimerSlack&) = delete;
  HostTimerSlack& operator=(const HostTimerSlack&) = delete;

 private:
  int saved_;
};

}  // namespace

void Proxy::reset() {
  {
    std::lock_guard w(wake_mu_);
    hurried_ = false;
  }
  recvs_.clear();
  expected_sends_ = 0;
  sends_handed_.store(0, std::memory_order_relaxed);
  std::lock_guard q(queue_mu_);
  handed_.clear();
}

void Proxy::expect_recv(void* buf, int count, MPI_Datatype type, int src, int tag, TileFlags* flags,
                        std::size_t idx, std::uint32_t value) {
  recvs_.push_back({buf, count, type, src, tag, flags, idx, value});
}

void Proxy::start() {
  reqs_.assign(recvs_.size(), MPI_REQUEST_NULL);
  send_peer_.clear();
  recvs_left_ = recvs_.size();
  sends_posted_ = sends_done_ = 0;
  winding_down_ = false;
  waits_aborted_.store(false, std::memory_order_relaxed);
  for (std::size_t i = 0; i < recvs_.size(); ++i) {
    const Recv& r = recvs_[i];
    mpi_check(MPI_Irecv(r.buf, r.count, r.type, r.src, r.tag, comm_, &reqs_[i]), "MPI_Irecv");
  }
}

void Proxy::send(const WorkgroupContext& wg, const void* buf, int count, MPI_Datatype type, int dst,
                 int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Isend(buf, count, type, dst, tag, comm_, &req), "MPI_Isend");
  wg.mark("send posted", tag, dst);
  {
    std::lock_guard q(queue_mu_);
    handed_.push_back({req, dst});
  }
  const std::size_t handed = sends_handed_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (handed == expected_sends_) hurry();
}

bool Proxy::progress(const WorkgroupContext* wg) {
  bool progressed = false;
  {
    std::lock_guard q(queue_mu_);
    batch_.swap(handed_);
  }
  for (const Posted& s : batch_) {
    reqs_.push_back(s.req);
    send_peer_.push_back(s.dst);
    ++sends_posted_;
    progressed = true;
  }
  batch_.clear();
  if (reqs_.empty()) return progressed;
  if (done_idx_.size() < reqs_.size()) {
    done_idx_.resize(reqs_.size());
    statuses_.resize(reqs_.size());
  }
  // Open MPI's MPI_Testsome either reports the requests already complete or, finding none,
  // progresses MPI once and returns none: what that progress completed would wait for the next
  // poll (the background proxy's is 20-160 us away; an off-node owner's inputs landed one per
  // poll). So a call that progressed is followed by one that reports: up to three calls, ending
  // after the second that finds nothing.
  bool progressed_mpi = false;
  for (int call = 0; call < 3; ++call) {
    int outcount = 0;
    const int rc = MPI_Testsome(static_cast<int>(reqs_.size()), reqs_.data(), &outcount,
                                done_idx_.data(), statuses_.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) mpi_check(rc, "MPI_Testsome");
    if (outcount == MPI_UNDEFINED) break;  // nothing pending
    // The statuses' MPI_ERROR fields are defined only with MPI_ERR_IN_STATUS.
    complete(wg, outcount, rc == MPI_ERR_IN_STATUS);
    if (rc == MPI_ERR_IN_STATUS) fail_request(outcount);
    progressed = progressed || outcount > 0;
    if (outcount == 0) {
      if (progressed_mpi) break;
      progressed_mpi = true;
    }
  }
  return progressed;
}

void Proxy::complete(const WorkgroupContext* wg, int outcount, bool errors) {
  for (int j = 0; j < outcount; ++j) {
    const auto i = static_cast<std::size_t>(done_idx_[j]);
    const bool failed = errors && statuses_[j].MPI_ERROR != MPI_SUCCESS;
    // MPI leaves a request that completed in error allocated: free it, so that the next poll (a
    // winding-down one) does not report it again. fail_request() then names it.
    if (failed && reqs_[i] != MPI_REQUEST_NULL) MPI_Request_free(&reqs_[i]);
    if (i < recvs_.size()) {
      const Recv& r = recvs_[i];
      if (!winding_down_ && !failed) {
        r.flags->signal(r.idx, r.value);
        if (wg != nullptr) wg->mark("tile received", r.tag, r.src);
      }
      --recvs_left_;
    } else {
      if (wg != nullptr && !failed) wg->mark("tile sent", -1, send_peer_[i - recvs_.size()]);
      ++sends_done_;
    }
  }
}

void Proxy::fail_request(int outcount) const {
  for (int j = 0; j < outcount; ++j) {
    const int err = statuses_[j].MPI_ERROR;
    if (err == MPI_SUCCESS) continue;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = 0;
    MPI_Error_string(err, text, &len);
    MPI_Error_class(err, &cls);
    const auto i = static_cast<std::size_t>(done_idx_[j]);
    const std::string what =
        i < recvs_.size()
            ? fmt::format("receiving tile (tag {}) from rank {}", recvs_[i].tag, recvs_[i].src)
            : fmt::format("sending to rank {}", send_peer_[i - recvs_.size()]);
    throw Error(ErrorCode::MpiError,
                fmt::format("{} proxy: {} failed: {}{}", op_, what, std::string(text, len),
                            cls == MPI_ERR_TRUNCATE
                                ? " (the message is longer than the receive posted for it: "
                                  "the ranks disagree on this call's sizes or counts)"
                                : ""));
  }
  throw Error(ErrorCode::MpiError,
              fmt::format("{} proxy: MPI_Testsome returned MPI_ERR_IN_STATUS, but no status of "
                          "its {} completed requests has an error",
                          op_, outcount));
}

void Proxy::poll(const WorkgroupContext& wg) {
  std::unique_lock lock(progress_mu_, std::try_to_lock);
  if (lock.owns_lock()) progress(&wg);
}

void Proxy::wait(const WorkgroupContext& wg, const TileFlags& flags, std::size_t idx,
                 std::uint32_t value, const char* what, const WaitPolicy& policy) {
  auto arrived = [&] {
    if (flags.test(idx, value)) return true;
    if (waits_aborted_.load(std::memory_order_acquire))
      throw Error(ErrorCode::MpiError,
                  fmt::format("{} {}: the call's MPI proxy failed; not waiting for it", what, idx));
    poll(wg);  // progress never depends on the host thread getting a core
    return false;
  };
  if (!poll_until(arrived, timeout_s_, policy))
    throw Error(ErrorCode::Timeout,  // `what` names the operator
                fmt::format("{} {} did not reach {} within {} s", what, idx, value, timeout_s_));
}

void Proxy::hurry() {
  {
    std::lock_guard w(wake_mu_);
    hurried_ = true;
  }
  wake_cv_.notify_all();
}

void Proxy::run(const WorkgroupContext* wg, const WaitPolicy& policy,
                const std::function<bool()>& abandoned) {
  // The proxy shares cores with the compute WGs it serves, which post their own sends and poll MPI
  // while they wait: it only keeps data moving in the background, so it polls, then sleeps a
  // little (TCP keeps flowing from the socket buffers meanwhile) instead of spinning. Once hurried
  // (the call's last send posted, or its last task ended) it polls at the latency policy's pace.
  bool gave_up = false;
  std::exception_ptr mpi_error;  // an MPI error completing a request (e.g. a truncated receive)
  auto finished = [&] {
    if (abandoned && abandoned()) return gave_up = true;
    std::lock_guard lock(progress_mu_);
    try {
      progress(wg);
    } catch (const Error&) {
      mpi_error = std::current_exception();
      return true;
    }
    return done();
  };
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto expired = [&] {
    return timeout_s_ > 0 &&
           std::chrono::duration<double>(clock::now() - start).count() > timeout_s_;
  };
  HostTimerSlack precise_sleeps;  // the sleeps as asked, not 50 us longer
  bool ended = finished();
  Backoff fast(WaitPolicy::latency());
  auto sleep = std::max(policy.sleep_min, std::chrono::nanoseconds(1000));
  while (!ended) {
    std::unique_lock w(wake_mu_);
    if (hurried_) {
      w.unlock();
      fast.pause();
    } else {
      wake_cv_.wait_for(w, sleep, [&] { return hurried_; });
      w.unlock();
      sleep = std::min(2 * sleep, std::max(policy.sleep_max, sleep));
    }
    ended = finished();
    if (!ended && expired()) break;
  }
  if (ended && !gave_up && !mpi_error) return;
  std::string what;
  if (!ended) {
    std::lock_guard lock(progress_mu_);
    what = pending_what();
  }
  wind_down(wg);
  if (mpi_error) std::rethrow_exception(mpi_error);
  if (!gave_up)
    throw Error(ErrorCode::Timeout,
                fmt::format("{} proxy: waited {} s for {}", op_, timeout_s_, what));
}

void Proxy::wind_down(const WorkgroupContext* wg) {
  std::unique_lock lock(progress_mu_);
  winding_down_ = true;
  for (std::size_t i = 0; i < recvs_.size(); ++i)
    if (reqs_[i] != MPI_REQUEST_NULL) MPI_Cancel(&reqs_[i]);
  const auto until = std::chrono::steady_clock::now() + kSendGrace;
  try {
    progress(wg);  // adopts every send handed over
    while ((recvs_left_ > 0 || sends_done_ < sends_posted_) &&
           std::chrono::steady_clock::now() < until) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
      progress(wg);
    }
  } catch (const Error&) {  // the call has failed already; this is not its cause
  }
  for (MPI_Request& r : reqs_)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

std::string Proxy::pending_what() const {
  for (std::size_t i = 0; i < recvs_.size(); ++i)
    if (reqs_[i] != MPI_REQUEST_NULL)
      return fmt::format("tile (tag {}) from rank {}", recvs_[i].tag, recvs_[i].src);
  return fmt::format("{} of {} sends to complete ({} posted)", expected_sends_ - sends_done_,
                     expected_sends_, sends_posted_);
}

}  // namespace tilecomm::detail
