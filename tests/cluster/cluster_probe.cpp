// cluster_probe: sanity check for tools/cluster/cluster.sh (emulated nodes = network namespaces).
//
// On >= 2 ranks it
//   1. reports where every rank runs: host name, network-namespace inode (/proc/self/ns/net), its
//      address in the emulated subnet, the emulated node index, the size of its
//      MPI_COMM_TYPE_SHARED communicator;
//   2. checks that ranks of different emulated nodes are in different network namespaces (and ranks
//      of the same node in the same one) and that MPI's node split follows the emulated nodes;
//   3. checks an MPI_Allreduce (sum of rank-dependent integers, exact);
//   4. measures the 8-byte ping-pong latency and times a ping-pong of a few MiB between rank 0 and
//   the last rank (another node), verifies the
//      payload and prints the bandwidth; if the links are shaped (TILECOMM_CLUSTER_RATE_BITS set
//      by cluster.sh) it checks the bandwidth is below --max-factor times the shaped rate.
//
// Options: --bytes N (default 4 MiB), --iters N (default 5), --max-factor F (default 3),
//          --no-node-check (skip step 2, e.g. under a plain mpirun).
// Exit status 0 on success, 1 if any rank found a problem.
#include <mpi.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct RankInfo {
  std::uint64_t netns = 0;  // inode of /proc/self/ns/net
  int node = -1;            // TILECOMM_CLUSTER_NODE (set by cluster.sh), -1 if unset
  int shared_size = 0;      // size of MPI_COMM_TYPE_SHARED communicator
  std::uint64_t cpus = 0;   // the first 64 CPUs of this rank's affinity mask, one bit each
  char host[64] = {};
  char addr[INET_ADDRSTRLEN] = {};
};

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::strtol(v, nullptr, 10) : fallback;
}

// First IPv4 address that is not loopback (inside a cluster.sh namespace that is eth0's).
void first_ipv4(char* out, std::size_t len) {
  std::snprintf(out, len, "-");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if (ntohl(sin->sin_addr.s_addr) >> 24 == 127) continue;
    inet_ntop(AF_INET, &sin->sin_addr, out, static_cast<socklen_t>(len));
    break;
  }
  freeifaddrs(list);
}

std::uint8_t pattern(std::size_t i, int iter, int from) {
  return static_cast<std::uint8_t>((i * 131u) ^ (static_cast<unsigned>(iter) * 7u) ^
                                   (static_cast<unsigned>(from) << 5));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::size_t bytes = std::size_t{4} << 20;
  int iters = 5;
  double max_factor = 3.0;
  bool node_check = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--bytes" && i + 1 < argc)
      bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--iters" && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else if (a == "--max-factor" && i + 1 < argc)
      max_factor = std::atof(argv[++i]);
    else if (a == "--no-node-check")
      node_check = false;
    else {
      if (rank == 0) std::fprintf(stderr, "cluster_probe: unknown argument '%s'\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "cluster_probe: needs at least 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  int ok = 1;
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "cluster_probe: rank %d: FAIL: %s\n", rank, what);
    ok = 0;
  };

  // 1. Where am I?
  RankInfo me;
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) == 0) me.netns = st.st_ino;
  me.node = static_cast<int>(env_long("TILECOMM_CLUSTER_NODE", -1));
  gethostname(me.host, sizeof me.host - 1);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0)
    for (int c = 0; c < 64; ++c)
      if (CPU_ISSET(c, &mask)) me.cpus |= std::uint64_t{1} << c;
  first_ipv4(me.addr, sizeof me.addr);
  MPI_Comm shared;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
  MPI_Comm_size(shared, &me.shared_size);
  MPI_Comm_free(&shared);

  std::vector<RankInfo> all(static_cast<std::size_t>(size));
  MPI_Gather(&me, sizeof me, MPI_BYTE, all.data(), sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
  const long nodes = env_long("TILECOMM_CLUSTER_NODES", -1);
  const long rpn = env_long("TILECOMM_CLUSTER_RANKS_PER_NODE", -1);
  if (rank == 0) {
    std::printf("cluster_probe: %d ranks (emulated nodes %ld, ranks per node %ld)\n", size, nodes,
                rpn);
    for (int r = 0; r < size; ++r) {
      const RankInfo& x = all[static_cast<std::size_t>(r)];
      std::printf("  rank %d: host %s node %d netns %llu addr %s shared-comm size %d cpus 0x%llx\n",
                  r, x.host, x.node, static_cast<unsigned long long>(x.netns), x.addr,
                  x.shared_size, static_cast<unsigned long long>(x.cpus));
    }
    // 2. Ranks on different emulated nodes must be in different network namespaces. Without
    // cluster.sh's environment we only demand that rank 0 and the last rank differ.
    if (node_check) {
      for (int r = 0; r < size; ++r) {
        for (int s = r + 1; s < size; ++s) {
          const RankInfo& a = all[static_cast<std::size_t>(r)];
          const RankInfo& b = all[static_cast<std::size_t>(s)];
          bool same_node =
              (a.node >= 0 && b.node >= 0) ? a.node == b.node : (r != 0 || s != size - 1);
          if (same_node != (a.netns == b.netns)) {
            std::fprintf(stderr,
                         "cluster_probe: FAIL: ranks %d and %d: same node %d but same netns %d\n",
                         r, s, same_node, a.netns == b.netns);
            ok = 0;
          }
        }
        const RankInfo& a = all[static_cast<std::size_t>(r)];
        if (rpn > 0 && a.shared_size != rpn) {
          std::fprintf(
              stderr,
              "cluster_probe: FAIL: rank %d: MPI_COMM_TYPE_SHARED has %d ranks, expected %ld\n", r,
              a.shared_size, rpn);
          ok = 0;
        }
      }
      // 2b. cluster.sh --cpus split: a node's ranks share one CPU set, other nodes' sets are
      // disjoint from it (each emulated node has its own cores).
      const char* cpus_mode = std::getenv("TILECOMM_CLUSTER_CPUS");
      if (cpus_mode && std::string(cpus_mode) == "split") {
        for (int r = 0; r < size; ++r)
          for (int s = r + 1; s < size; ++s) {
            const RankInfo& a = all[static_cast<std::size_t>(r)];
            const RankInfo& b = all[static_cast<std::size_t>(s)];
            const bool ok_pair = a.node == b.node ? a.cpus == b.cpus : (a.cpus & b.cpus) == 0;
            if (!ok_pair || a.cpus == 0) {
              std::fprintf(stderr,
                           "cluster_probe: FAIL: --cpus split: ranks %d (node %d, cpus 0x%llx) "
                           "and %d (node %d, cpus 0x%llx)\n",
                           r, a.node, static_cast<unsigned long long>(a.cpus), s, b.node,
                           static_cast<unsigned long long>(b.cpus));
              ok = 0;
            }
          }
      }
      if (all[0].netns == all[static_cast<std::size_t>(size - 1)].netns)
        fail("rank 0 and the last rank share a network namespace: not on different emulated nodes");
    }
  }

  // 3. Allreduce: sum over ranks of (rank + 1) * (i + 1), exact in 64-bit integers.
  {
    const int n = 1 << 16;
    std::vector<long long> in(n), out(n, -1);
    for (int i = 0; i < n; ++i)
      in[static_cast<std::size_t>(i)] = static_cast<long long>(rank + 1) * (i + 1);
    MPI_Allreduce(in.data(), out.data(), n, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    const long long ranksum = static_cast<long long>(size) * (size + 1) / 2;
    for (int i = 0; i < n; ++i) {
      if (out[static_cast<std::size_t>(i)] != ranksum * (i + 1)) {
        fail("MPI_Allreduce result wrong");
        break;
      }
    }
    if (rank == 0)
      std::printf("cluster_probe: allreduce of %d int64 over %d ranks: %s\n", n, size,
                  ok ? "ok" : "WRONG");
  }

  // 4. Ping-pong rank 0 <-> last rank: `iters` round trips of `bytes` each way, after one warm-up.
  const int peer = (rank == 0) ? size - 1 : 0;
  if (rank == 0 || rank == size - 1) {
    std::vector<std::uint8_t> sbuf(bytes), rbuf(bytes);
    bool payload_ok = true;
    double t0 = 0;
    for (int it = -1; it < iters; ++it) {
      if (it == 0) t0 = MPI_Wtime();
      for (std::size_t i = 0; i < bytes; ++i)
        sbuf[i] = pattern(i, it, rank);
      if (rank == 0) {
        MPI_Send(sbuf.data(), static_cast<int>(bytes), MPI_BYTE, peer, it + 1, MPI_COMM_WORLD);
        MPI_Recv(rbuf.data(), static_cast<int>(bytes), MPI_BYTE, peer, it + 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(rbuf.data(), static_cast<int>(bytes), MPI_BYTE, peer, it + 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(sbuf.data(), static_cast<int>(bytes), MPI_BYTE, peer, it + 1, MPI_COMM_WORLD);
      }
      for (std::size_t i = 0; i < bytes && payload_ok; ++i)
        if (rbuf[i] != pattern(i, it, peer)) payload_ok = false;
    }
    const double secs = MPI_Wtime() - t0;  // includes the (cheap) pattern fill and check
    if (!payload_ok) fail("ping-pong payload corrupted");
    // Small-message latency over the same link (no delay is injected: this is veth + bridge + TCP).
    const int lat_iters = 200;
    char b8[8] = {};
    double l0 = 0;
    for (int it = -10; it < lat_iters; ++it) {
      if (it == 0) l0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(b8, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        MPI_Recv(b8, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(b8, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(b8, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      }
    }
    if (rank == 0)
      std::printf("cluster_probe: 8 B ping-pong latency (half round trip): %.1f us\n",
                  (MPI_Wtime() - l0) / lat_iters / 2 * 1e6);
    if (rank == 0) {
      const double moved =
          2.0 * static_cast<double>(bytes) * iters;  // bytes over the link, both ways
      const double bits_per_s = moved * 8.0 / secs;
      std::printf(
          "cluster_probe: ping-pong %zu B x %d round trips between rank 0 and rank %d: %.3f s, "
          "%.1f MB/s = %.3f Gbit/s\n",
          bytes, iters, peer, secs, moved / secs / 1e6, bits_per_s / 1e9);
      const double rate = static_cast<double>(env_long("TILECOMM_CLUSTER_RATE_BITS", 0));
      if (rate > 0) {
        std::printf("cluster_probe: shaped rate %.3f Gbit/s, measured/shaped = %.2f (limit %.1f)\n",
                    rate / 1e9, bits_per_s / rate, max_factor);
        // Only an upper bound: the ping-pong must not beat the shaper by much. It may well be far
        // below the rate (shared 2-core machine, TCP over veth, one message in flight), so there is
        // no lower bound.
        if (bits_per_s > max_factor * rate)
          fail("bandwidth far above the shaped rate: links not shaped?");
      }
    }
  }

  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) std::printf("cluster_probe: %s\n", all_ok ? "PASS" : "FAIL");
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
