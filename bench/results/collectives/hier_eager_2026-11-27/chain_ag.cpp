// 4 back-to-back ReduceScatters of `bytes` per rank-pair vs one of 4x: the shaped chain.
#include <mpi.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "tilecomm/tilecomm.hpp"
using namespace tilecomm;
int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    Communicator comm(MPI_COMM_WORLD);
    const int p = comm.size();
    const std::size_t chunk_floats = std::atol(argv[1]) / 4;  // per rank block per chunk
    const int chunks = std::atoi(argv[2]);
    std::string algo = argc > 3 ? argv[3] : "";
    std::vector<float> send(chunk_floats * p * chunks, 1.0f), recv(chunk_floats * chunks);
    CollectiveOptions o;
    o.algorithm = algo;
    std::vector<double> t1, tc;
    for (int it = 0; it < 23; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      double ends[16];
      for (int c = 0; c < chunks; ++c) {
        allgather(comm, recv.data() + c * chunk_floats, send.data() + c * chunk_floats * p,
                  chunk_floats, DataType::Float32, o);
        ends[c] = (MPI_Wtime() - t0) * 1e3;
      }
      if (std::getenv("CHAIN_VERBOSE") && it >= 3 && it < 9) {
        char line[256];
        int n = std::snprintf(line, sizeof line, "rank %d it %d:", comm.rank(), it);
        for (int c = 0; c < chunks; ++c)
          n += std::snprintf(line + n, sizeof line - n, " %.1f", ends[c]);
        std::printf("%s\n", line);
      }
      double t = (MPI_Wtime() - t0) * 1e3;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (it >= 3) tc.push_back(t);
    }
    std::sort(tc.begin(), tc.end());
    if (comm.rank() == 0)
      std::printf("chunks %d x %zu B/rank-block algo %s: median %.1f ms [%.1f, %.1f]\n", chunks,
                  chunk_floats * 4, algo.c_str(), tc[tc.size() / 2], tc.front(), tc.back());
  }
  MPI_Finalize();
}
