#include "ops/common/proxy.hpp"

#include <fmt/format.h>

#include "collectives/comm_impl.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/wait.hpp"

namespace tilecomm::detail {

void Proxy::reset() {
  recvs_.clear();
  expected_sends_ = 0;
  std::lock_guard lock(mu_);
  pending_.clear();
}

void Proxy::expect_recv(void* buf, int count, MPI_Datatype type, int src, int tag, TileFlags* flags,
                        std::size_t idx, std::uint32_t value) {
  recvs_.push_back({buf, count, type, src, tag, flags, idx, value});
}

void Proxy::send(const void* buf, int count, MPI_Datatype type, int dst, int tag) {
  std::lock_guard lock(mu_);
  pending_.push_back({buf, count, type, dst, tag});
}

void Proxy::run(const WorkgroupContext& wg) {
  // Request slots: [0, recvs) are receives, the rest sends in posting order.
  std::vector<MPI_Request> reqs(recvs_.size(), MPI_REQUEST_NULL);
  std::vector<int> send_peer;  // per send slot, for trace marks and errors
  for (std::size_t i = 0; i < recvs_.size(); ++i) {
    const Recv& r = recvs_[i];
    mpi_check(MPI_Irecv(r.buf, r.count, r.type, r.src, r.tag, comm_, &reqs[i]), "MPI_Irecv");
  }
  std::size_t recvs_left = recvs_.size();
  std::size_t sends_posted = 0, sends_done = 0;
  std::vector<Send> batch;
  std::vector<int> done_idx(64);
  Backoff backoff;
  while (recvs_left > 0 || sends_done < expected_sends_) {
    bool progressed = false;
    {
      std::lock_guard lock(mu_);
      batch.swap(pending_);
    }
    for (const Send& s : batch) {
      reqs.push_back(MPI_REQUEST_NULL);
      send_peer.push_back(s.dst);
      mpi_check(MPI_Isend(s.buf, s.count, s.type, s.dst, s.tag, comm_, &reqs.back()), "MPI_Isend");
      wg.mark("send posted", s.tag, s.dst);
      ++sends_posted;
      progressed = true;
    }
    batch.clear();
    if (done_idx.size() < reqs.size()) done_idx.resize(reqs.size());
    int outcount = 0;
    mpi_check(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, done_idx.data(),
                           MPI_STATUSES_IGNORE),
              "MPI_Testsome");
    for (int j = 0; j < outcount && outcount != MPI_UNDEFINED; ++j) {
      const std::size_t i = static_cast<std::size_t>(done_idx[j]);
      if (i < recvs_.size()) {
        const Recv& r = recvs_[i];
        r.flags->signal(r.idx, r.value);
        wg.mark("tile received", r.tag, r.src);
        --recvs_left;
      } else {
        wg.mark("tile sent", -1, send_peer[i - recvs_.size()]);
        ++sends_done;
      }
      progressed = true;
    }
    if (progressed) {
      backoff = Backoff();
      continue;
    }
    backoff.pause();
    if (timeout_s_ > 0 && (backoff.polls() & 63) == 0 && backoff.elapsed_s() > timeout_s_) {
      std::string what;
      for (std::size_t i = 0; i < recvs_.size(); ++i)
        if (reqs[i] != MPI_REQUEST_NULL) {
          what = fmt::format("tile (tag {}) from rank {}", recvs_[i].tag, recvs_[i].src);
          break;
        }
      if (what.empty())
        what = fmt::format("{} of {} sends to complete ({} posted)", expected_sends_ - sends_done,
                           expected_sends_, sends_posted);
      for (MPI_Request& r : reqs)
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
      throw Error(ErrorCode::Timeout, fmt::format("{} proxy: waited {} s for {}", op_,
                                                  static_cast<int>(timeout_s_), what));
    }
  }
}

}  // namespace tilecomm::detail
