// How much of the tbf bucket a reduce_scatter gets back after the link idles (spin or sleep).
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <tilecomm/tilecomm.hpp>
#include <vector>
using clk = std::chrono::steady_clock;
static double now() {
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  int prov;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
  {
    tilecomm::Communicator comm(MPI_COMM_WORLD);
    int r = comm.rank(), n = comm.size();
    std::size_t bytes = argc > 1 ? std::atol(argv[1]) : (2 << 20);
    std::size_t rc = bytes / 4 / n;
    std::vector<float> s(rc * n, 1.0f), d(rc);
    for (double idle_ms : {0.0, 1.0, 3.0, 6.0}) {
      for (int how = 0; how < 2; ++how) {  // 0 sleep, 1 spin
        std::vector<double> t;
        for (int i = 0; i < 25; ++i) {
          if (idle_ms > 0) {
            if (how == 0)
              std::this_thread::sleep_for(std::chrono::microseconds(int(idle_ms * 1000)));
            else {
              double e = now() + idle_ms / 1000;
              volatile double x = 0;
              while (now() < e)
                x += 1;
            }
          }
          MPI_Barrier(MPI_COMM_WORLD);
          double a = now();
          tilecomm::reduce_scatter(comm, s.data(), d.data(), rc, tilecomm::DataType::Float32,
                                   tilecomm::ReduceOp::Sum,
                                   {"", getenv("CANON") ? tilecomm::ReduceOrder::Canonical
                                                        : tilecomm::ReduceOrder::Any});
          double b = now() - a, m;
          MPI_Allreduce(&b, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          if (i >= 3) t.push_back(m * 1e6);
        }
        std::sort(t.begin(), t.end());
        if (r == 0)
          std::printf("idle %.0f ms %s: median %.0f us min %.0f\n", idle_ms, how ? "spin" : "sleep",
                      t[t.size() / 2], t[0]);
        if (idle_ms == 0) break;
      }
    }
  }
  MPI_Finalize();
}
