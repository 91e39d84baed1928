// The message paths' costs for tilecomm::calibrate (calibrate_paths.hpp).
#include "ops/model/calibrate_paths.hpp"

#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "ops/common/proxy.hpp"
#include "ops/common/symmetric.hpp"
#include "ops/model/calibrate_util.hpp"
#include "runtime/flags.hpp"
#include "runtime/wait.hpp"

namespace tilecomm::model {
namespace {

using namespace calib;  // NOLINT(google-build-using-namespace): the calibration's own helpers
using detail::CommImpl;

// A message path's fits (t and CPU = c[0] + c[1] bytes) from its points. Under load a small
// message can measure slower than a large one and the least-squares line then falls (a negative
// per-byte cost, or latency): no path costs less than nothing, so such a coefficient is clamped
// to 0 (the summary shows it as 0; the fit's residuals still tell how well the line fits).
model::PathCost path_cost(const Points& time, const Points& send, const Points& recv) {
  model::PathCost pc;
  pc.measured = true;
  pc.time = time.fit(2);
  pc.cpu_send = send.fit(2);
  pc.cpu_recv = recv.fit(2);
  for (Fit* f : {&pc.time, &pc.cpu_send, &pc.cpu_recv})
    for (int i = 0; i < 2; ++i)
      f->c[i] = std::max(0.0, f->c[i]);
  return pc;
}

constexpr std::size_t kSizes[] = {8, 1 << 10, 8 << 10, 64 << 10, 256 << 10, 1 << 20};
constexpr int kPingPongs = 100;

}  // namespace

// MPI ping-pong between rank 0 and `partner` (the others wait at the final barrier).
model::PathCost calibrate_mpi(Communicator& comm, int partner) {
  model::PathCost pc;
  CommImpl& c = detail::impl_of(comm);
  const int me = c.topo.rank;
  std::vector<char> buf(kSizes[std::size(kSizes) - 1]);
  Points time, send, recv;
  for (std::size_t bytes : kSizes) {
    const int n = static_cast<int>(bytes);
    std::vector<double> rtt, cpu_s, cpu_r;
    for (int r = 0; r <= kPingPongs; ++r) {
      if (me == 0) {
        const double t0 = now(), c0 = thread_cpu();
        MPI_Send(buf.data(), n, MPI_BYTE, partner, 7, c.mpi);
        const double c1 = thread_cpu();
        MPI_Recv(buf.data(), n, MPI_BYTE, partner, 7, c.mpi, MPI_STATUS_IGNORE);
        if (r > 0) {
          rtt.push_back(now() - t0);
          cpu_s.push_back(c1 - c0);
        }
      } else if (me == partner) {
        MPI_Recv(buf.data(), n, MPI_BYTE, 0, 7, c.mpi, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), n, MPI_BYTE, 0, 7, c.mpi);
      }
    }
    // The receiver's CPU: the partner sends, rank 0 waits for it to be sent (a zero-byte ack),
    // then times its receive (the copy out of MPI's buffers, or the whole rendezvous).
    for (int r = 0; r <= 5; ++r) {
      if (me == 0) {
        MPI_Request req;
        MPI_Irecv(buf.data(), n, MPI_BYTE, partner, 8, c.mpi, &req);
        MPI_Recv(nullptr, 0, MPI_BYTE, partner, 9, c.mpi, MPI_STATUS_IGNORE);
        usleep(200);
        const double c0 = thread_cpu();
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (r > 0) cpu_r.push_back(thread_cpu() - c0);
      } else if (me == partner) {
        MPI_Request req;
        MPI_Isend(buf.data(), n, MPI_BYTE, 0, 8, c.mpi, &req);
        MPI_Send(nullptr, 0, MPI_BYTE, 0, 9, c.mpi);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
    }
    if (me == 0) {
      time.add(double(bytes), 0, lower_quartile(rtt) / 2);
      send.add(double(bytes), 0, median(cpu_s));
      recv.add(double(bytes), 0, median(cpu_r));
    }
  }
  if (me == 0) pc = path_cost(time, send, recv);
  return pc;
}

// Shared-memory ping-pong between rank 0 and local rank 1 through the node's symmetric segment:
// a copy into the peer's segment and a release flag, the fused kernel's on-node tile path.
// flag_s is the fit's intercept: a zero-byte handshake.
model::PathCost calibrate_shm(Communicator& comm, double& flag_s) {
  model::PathCost pc;
  CommImpl& c = detail::impl_of(comm);
  const std::size_t max = kSizes[std::size(kSizes) - 1];
  const std::size_t flag_bytes = TileFlags::bytes_for(1);
  detail::SymmetricBuffer seg(c, flag_bytes + max);  // collective over the node
  const int me = c.topo.local_rank;
  if (c.topo.local_size < 2 || me > 1) return pc;
  const int peer = 1 - me;
  TileFlags mine(seg.segment(me), 1), theirs(seg.segment(peer), 1);
  std::byte* their_data = seg.segment(peer) + flag_bytes;
  std::vector<std::byte> src(max, std::byte{1});
  std::uint32_t epoch = 0;
  Points time, send, recv;
  for (std::size_t bytes : kSizes) {
    std::vector<double> rtt, cpu_s, cpu_r;
    for (int r = 0; r <= kPingPongs * 5; ++r) {
      ++epoch;
      const double t0 = now();
      if (me == 0) {
        const double c0 = thread_cpu();
        std::memcpy(their_data, src.data(), bytes);
        theirs.signal(0, epoch);
        cpu_s.push_back(thread_cpu() - c0);
        mine.wait(0, epoch);
        const double c1 = thread_cpu();
        mine.wait(0, epoch);  // already set: what a receiver pays to see a tile
        cpu_r.push_back(thread_cpu() - c1);
        rtt.push_back(now() - t0);
      } else {
        mine.wait(0, epoch);
        std::memcpy(their_data, src.data(), bytes);
        theirs.signal(0, epoch);
      }
    }
    if (me == 0) {
      rtt.erase(rtt.begin());
      cpu_s.erase(cpu_s.begin());
      time.add(double(bytes), 0, lower_quartile(rtt) / 2);
      send.add(double(bytes), 0, median(cpu_s));
      recv.add(double(bytes), 0, median(cpu_r));
    }
  }
  if (me == 0) {
    pc = path_cost(time, send, recv);
    flag_s = pc.alpha();
  }
  return pc;
}

// The fused kernel's off-node path as it runs (FusedPlan::run): a compute WG hands an 8-byte tile
// to the MPI proxy, which the host thread drives; the peer's WG waits for it, polling MPI as fused
// kernels' WGs do, and answers the same way. Returns the one-way time, the median of round trips
// halved, on rank 0; -1 elsewhere. Collective over `comm`.
double proxy_one_way(Communicator& comm, Device& device, int partner) {
  CommImpl& c = detail::impl_of(comm);
  const int me = c.topo.rank;
  MPI_Comm mpi;
  MPI_Comm_dup(c.mpi, &mpi);  // a communicator of its own keeps the tags apart (every rank)
  if (me != 0 && me != partner) {
    MPI_Comm_free(&mpi);
    return -1;
  }
  const int peer = me == 0 ? partner : 0;
  double result = -1;
  {
    detail::Proxy proxy(mpi, c.timeout_s, "calibrate");
    TileFlags flags(1);
    Stream compute = device.create_stream(Stream::kNormal);
    std::uint64_t out = 0, in = 0;
    std::vector<double> rtt;
    constexpr int kReps = 60;
    for (int r = 1; r <= kReps + 1; ++r) {
      const auto epoch = static_cast<std::uint32_t>(r);
      proxy.reset();
      proxy.expect_recv(&in, 8, MPI_BYTE, peer, 2 * r + (me == 0), &flags, 0, epoch);
      proxy.expect_sends(1);
      proxy.start();
      double t = 0;
      compute.launch({"calibrate.tile", {1, 1}, 0}, [&](const WorkgroupContext& wg) {
        const double t0 = now();
        if (me == 0) proxy.send(wg, &out, 8, MPI_BYTE, peer, 2 * r);
        proxy.wait(wg, flags, 0, epoch, "calibrate: proxy ping-pong", WaitPolicy::backoff(2.0));
        if (me != 0) proxy.send(wg, &out, 8, MPI_BYTE, peer, 2 * r + 1);
        t = now() - t0;
      });
      proxy.run(nullptr);
      compute.synchronize();
      if (r > 1) rtt.push_back(t);
    }
    if (me == 0) result = median(std::move(rtt)) / 2;
  }
  MPI_Comm_free(&mpi);
  return result;
}

}  // namespace tilecomm::model
