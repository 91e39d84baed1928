#pragma once
// The MPI proxy of a fused kernel: a workgroup on a high-priority stream that owns every MPI call
// of one operator call. It pre-posts the receives the call expects, posts the sends compute WGs
// hand it, and keeps Open MPI progressing (Open MPI 4.1 moves TCP data only inside MPI calls)
// while the compute WGs run. Like NCCL's proxy thread, but a resident WG of the device model.

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
  Proxy(MPI_Comm comm, double timeout_s, const char* op) : comm_(comm), timeout_s_(timeout_s), op_(op) {}

  // ---- host side, before the kernel launches ----
  void reset();
  /// A receive to post; on completion flags[idx] = value (release).
  void expect_recv(void* buf, int count, MPI_Datatype type, int src, int tag, TileFlags* flags,
                   std::size_t idx, std::uint32_t value);
  /// The number of send() calls this operator call will make.
  void expect_sends(std::size_t n) { expected_sends_ = n; }
  bool idle() const { return recvs_.empty() && expected_sends_ == 0; }

  // ---- any WG ----
  /// Queues an MPI send of `buf` (which must stay untouched until the call ends).
  void send(const void* buf, int count, MPI_Datatype type, int dst, int tag);

  // ---- the proxy WG ----
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
  MPI_Comm comm_;
  double timeout_s_;
  const char* op_;
  std::vector<Recv> recvs_;
  std::size_t expected_sends_ = 0;
  std::mutex mu_;
  std::vector<Send> pending_;  // guarded by mu_
};

}  // namespace tilecomm::detail
