#pragma once
// The MPI proxy of a fused kernel. Per operator call: the host posts the receives the call expects
// before the kernel launches; a compute WG posts its tile's MPI_Isend itself the moment the tile is
// done (MPI_THREAD_MULTIPLE) and hands the request over; the host thread, idle until the kernel
// ends anyway, then runs the proxy (run()), which completes every request and raises the arrival
// flags. Open MPI 4.1 moves TCP data only inside MPI calls, so the proxy keeps calling
// MPI_Testsome (backing off) while the compute WGs run, and WGs waiting for an off-node tile poll
// too (poll()). Sends never wait for the proxy: on an oversubscribed machine it may wait
// milliseconds for a core.

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/flags.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/device.hpp"

namespace tilecomm::detail {

class Proxy {
 public:
  Proxy(MPI_Comm comm, double timeout_s, const char* op)
      : comm_(comm), timeout_s_(timeout_s), op_(op) {}

  // ---- host side, before the kernels launch ----
  /// Forgets the previous call.
  void reset();
  /// A receive of this call; on completion flags[idx] = value (release).
  void expect_recv(void* buf, int count, MPI_Datatype type, int src, int tag, TileFlags* flags,
                   std::size_t idx, std::uint32_t value);
  /// The number of send() calls this operator call will make. The proxy hurries (hurry()) as soon
  /// as the last of them has been posted, not only when the call's last task ends: the tasks left
  /// then wait for peers' blocks that only MPI progress brings, and a background-paced proxy
  /// (sleeps of 20-160 us) made them wait for its next poll (fused GEMV+AllReduce across 2
  /// emulated nodes took 1.3-1.4x sequential's time at decode's shapes: docs/ops.md).
  void expect_sends(std::size_t n) { expected_sends_ = n; }
  /// Posts the expected receives (before the kernel launches).
  void start();

  // ---- any WG ----
  /// Posts an MPI_Isend of `buf` (untouched until the call ends) and hands the request over.
  void send(const WorkgroupContext& wg, const void* buf, int count, MPI_Datatype type, int dst,
            int tag);

  /// Completes what MPI has finished if no other thread is doing so (try-lock): a WG that waits for
  /// a tile the proxy will receive calls this while it waits, so progress never depends on the
  /// host thread getting a core.
  void poll(const WorkgroupContext& wg);
  /// Waits (pausing as `policy` says, polling MPI) until flags[idx] reaches value; Error(Timeout)
  /// whose message starts with `what` (which names the operator), or Error(MpiError) at once after
  /// abort_waits().
  void wait(const WorkgroupContext& wg, const TileFlags& flags, std::size_t idx,
            std::uint32_t value, const char* what, const WaitPolicy& policy);

  /// The call's last compute task has ended: nothing but the proxy polls MPI any more and the
  /// call ends when the proxy does, so run() ends its current sleep now and from then on pauses as
  /// WaitPolicy::latency() says. Without it the call's end waited up to a whole background sleep
  /// (160 us) for the proxy to see its last send complete. Any thread; idempotent per call.
  void hurry();
  /// The call has failed in run() (an MPI error, the proxy's deadline): every wait() of this call
  /// raises at once instead of waiting for a tile that will not come until its own deadline (a
  /// truncated receive left the WG waiting for it 300 s by default). Any thread; until start().
  void abort_waits() { waits_aborted_.store(true, std::memory_order_release); }

  // ---- the host (wg: its trace lane, FusedPlan::host_context(); nullptr: no trace marks) ----
  /// Progresses until every expected receive and send has completed (deadline timeout_s), sleeping
  /// between polls as `policy` says (only its sleep phase is used: the proxy never spins beside the
  /// compute it serves) until hurry(), then WaitPolicy::latency(). Once
  /// `abandoned()` returns true (checked at every poll: the call's kernel has failed and ended, so
  /// no more sends will be posted) it winds down (wind_down()) and returns; on its deadline it
  /// winds down, then raises Error(Timeout).
  void run(const WorkgroupContext* wg, const WaitPolicy& policy = kBackgroundPolicy,
           const std::function<bool()>& abandoned = {});
  /// The proxy's pace beside the WGs it serves, which post their own sends and poll MPI while they
  /// wait: sleeps back off 20 -> 160 us, since every wake-up is CPU that this rank's compute, or
  /// another rank's, lacks (TCP keeps flowing from the socket buffers meanwhile).
  static inline const WaitPolicy kBackgroundPolicy{
      {}, {}, std::chrono::microseconds(20), std::chrono::microseconds(160), 1, 1};
  /// How long a winding-down run() lets posted sends and cancelled receives complete (eager sends
  /// complete within microseconds; one that needs a receiver that has failed too never would).
  static constexpr std::chrono::milliseconds kSendGrace{100};

 private:
  struct Recv {
    void* buf;
    int count;
    MPI_Datatype type;
    int src, tag;
    TileFlags* flags;
    std::size_t idx;
    std::uint32_t value;
  };
  struct Posted {
    MPI_Request req;
    int dst;
  };
  // Under progress_mu_: adopts handed-over sends, completes what MPI has finished. True if
  // anything happened.
  bool progress(const WorkgroupContext* wg);
  // Under progress_mu_: counts the first `outcount` requests in done_idx_ as complete and raises
  // their flags (with `errors`: not for those whose status has an error, which it frees).
  void complete(const WorkgroupContext* wg, int outcount, bool errors);
  // Under progress_mu_, after MPI_ERR_IN_STATUS: Error(MpiError) naming the first failed request
  // (the tile and peer; a truncated receive says the ranks disagree on sizes).
  [[noreturn]] void fail_request(int outcount) const;
  bool done() const { return recvs_left_ == 0 && sends_done_ == expected_sends_; }
  // Under progress_mu_: what the call still waits for, for the Timeout's message.
  std::string pending_what() const;
  // The call failed. Cancels the pending receives (so nothing lands in the caller's output after
  // the call has returned) and gives them and the posted sends up to kSendGrace to complete: a
  // peer learns of the failure from those sends (GemmAllToAll's per-call headers), and a receive
  // that had matched already completes instead of cancelling. Then it frees what is left. Sends
  // are never cancelled: Open MPI's ob1 cannot cancel a send, and one still pending then needs a
  // receiver that will never match it; the context's communicator is kept allocated after a
  // failure (free_comm()), so it stays unmatched.
  void wind_down(const WorkgroupContext* wg);

  MPI_Comm comm_;
  double timeout_s_;
  const char* op_;
  std::vector<Recv> recvs_;
  std::size_t expected_sends_ = 0;
  std::atomic<std::size_t> sends_handed_{0};  // send() calls of this call, by any WG
  std::atomic<bool> waits_aborted_{false};

  std::mutex queue_mu_;  // guards handed_ (never held across an MPI call)
  std::vector<Posted> handed_;

  std::mutex wake_mu_;  // guards hurried_; run() sleeps on wake_cv_ until hurry()
  std::condition_variable wake_cv_;
  bool hurried_ = false;
  std::mutex progress_mu_;  // guards the state below once the kernels run
  // Written by the host before launch, then under progress_mu_.
  std::vector<MPI_Request> reqs_;  // [0, recvs) receives, then sends in hand-over order
  std::vector<int> send_peer_;
  std::vector<int> done_idx_;
  std::vector<MPI_Status> statuses_;
  std::vector<Posted> batch_;
  std::size_t recvs_left_ = 0, sends_posted_ = 0, sends_done_ = 0;
  bool winding_down_ = false;  // completed receives are cancelled ones, or land in a failed call
};

}  // namespace tilecomm::detail
