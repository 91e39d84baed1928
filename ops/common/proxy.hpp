#pragma once
// The MPI proxy of a fused kernel. Per operator call it owns every MPI request: the host posts the
// receives the call expects (start()) before the kernels launch; compute WGs hand it sends; one
// proxy WG on a high-priority stream loops until every request has completed. Open MPI 4.1 moves
// TCP data only inside MPI calls, and on an oversubscribed machine a sleeping proxy may wait
// milliseconds for a core, so a WG that hands over a tile also posts it and polls right away when
// no one else is in MPI (try_lock): progress happens wherever there is a thread to spare.

#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tilecomm/device.hpp"
#include "tilecomm/flags.hpp"

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
  /// The number of send() calls this operator call will make.
  void expect_sends(std::size_t n) { expected_sends_ = n; }
  /// Posts the expected receives, then launches the proxy WG (run()) on `stream`, which should
  /// have a higher priority than the compute kernel's so the proxy is resident before it.
  void launch(Stream& stream, const char* name);

  // ---- any WG ----
  /// Sends `buf` (untouched until the call ends): posted now if MPI is free, else by the proxy.
  void send(const WorkgroupContext& wg, const void* buf, int count, MPI_Datatype type, int dst,
            int tag);

  // ---- the proxy WG ----
  /// Progresses until every expected receive and send has completed (deadline timeout_s).
  void run(const WorkgroupContext& wg);

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
  struct Send {
    const void* buf;
    int count;
    MPI_Datatype type;
    int dst, tag;
  };
  // With progress_mu_ held: posts queued sends, completes what MPI has finished. True if anything
  // happened.
  bool progress(const WorkgroupContext& wg);
  void start();
  bool done() const { return recvs_left_ == 0 && sends_done_ == expected_sends_; }
  [[noreturn]] void fail_timeout();

  MPI_Comm comm_;
  double timeout_s_;
  const char* op_;
  std::vector<Recv> recvs_;
  std::size_t expected_sends_ = 0;

  std::mutex queue_mu_;  // guards pending_
  std::vector<Send> pending_;

  std::mutex progress_mu_;         // serializes MPI calls and guards the state below
  std::vector<MPI_Request> reqs_;  // [0, recvs) receives, then sends in posting order
  std::vector<int> send_peer_;
  std::vector<int> done_idx_;
  std::vector<Send> batch_;
  std::size_t recvs_left_ = 0, sends_posted_ = 0, sends_done_ = 0;
};

}  // namespace tilecomm::detail
