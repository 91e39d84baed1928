// After an idle gap, send B bytes per rank: to 1 peer (i+1) or split over every other rank at once,
// in 63 KiB eager messages; median time of the slowest rank.
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
static double now() {
  return MPI_Wtime();
}
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t B = std::atol(argv[1]), msg = 63 * 1024;
  std::vector<char> s(B), d(B * n);
  for (int peers : {1, n - 1})
    for (double idle : {0.0, 4.0}) {
      std::vector<double> t;
      for (int it = 0; it < 25; ++it) {
        if (idle > 0) std::this_thread::sleep_for(std::chrono::microseconds(int(idle * 1000)));
        MPI_Barrier(MPI_COMM_WORLD);
        double a = now();
        std::vector<MPI_Request> rq;
        const std::size_t per = B / peers;
        for (int k = 1; k <= peers; ++k) {
          int from = (r - k + n) % n;
          for (std::size_t o = 0; o < per; o += msg) {
            rq.emplace_back();
            MPI_Irecv(d.data() + k * B + o, int(std::min(msg, per - o)), MPI_BYTE, from, 1,
                      MPI_COMM_WORLD, &rq.back());
          }
        }
        for (int k = 1; k <= peers; ++k) {
          int to = (r + k) % n;
          for (std::size_t o = 0; o < per; o += msg) {
            rq.emplace_back();
            MPI_Isend(s.data() + o, int(std::min(msg, per - o)), MPI_BYTE, to, 1, MPI_COMM_WORLD,
                      &rq.back());
          }
        }
        MPI_Waitall(int(rq.size()), rq.data(), MPI_STATUSES_IGNORE);
        double b = now() - a, m;
        MPI_Allreduce(&b, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it >= 3) t.push_back(m * 1e6);
      }
      std::sort(t.begin(), t.end());
      if (r == 0)
        std::printf("peers %d idle %.0f ms: median %.0f us min %.0f\n", peers, idle,
                    t[t.size() / 2], t[0]);
    }
  MPI_Finalize();
}
