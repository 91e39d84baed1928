// Calls of one collective back to back (the shaped operators' chunks), the A/B probe of
// docs/collectives.md ("The hierarchical ReduceScatter and AllGather in eager pieces too",
// "All-to-All across nodes"). Built against libtilecomm.a (the link line of
// build/bench/collectives/*_perf):
//   chain rs|ag|a2a BYTES_PER_BLOCK CHUNKS [ALGORITHM]
// times CHUNKS calls of the collective, each on blocks of BYTES_PER_BLOCK (one per rank), 20 times
// after 3 warm-ups, and prints the median [min, max] of the slowest rank (ms). CHAIN_VERBOSE=1 also
// prints each call's end within a few iterations, per rank.
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
    const std::string coll = argv[1];
    const std::size_t block = std::atol(argv[2]) / 4;  // floats per rank block per call
    const int chunks = std::atoi(argv[3]);
    CollectiveOptions o;
    o.algorithm = argc > 4 ? argv[4] : "";
    std::vector<float> whole(block * p * chunks, 1.0f), part(block * chunks),
        out(block * p * chunks);
    std::vector<double> times;
    for (int it = 0; it < 23; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      std::vector<double> ends;
      for (int c = 0; c < chunks; ++c) {
        float* w = whole.data() + c * block * p;
        if (coll == "rs")
          reduce_scatter(comm, w, part.data() + c * block, block, DataType::Float32, ReduceOp::Sum,
                         o);
        else if (coll == "ag")
          allgather(comm, part.data() + c * block, w, block, DataType::Float32, o);
        else
          alltoall(comm, w, out.data() + c * block * p, block, DataType::Float32, o);
        ends.push_back((MPI_Wtime() - t0) * 1e3);
      }
      double t = ends.back();
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (std::getenv("CHAIN_VERBOSE") && it >= 3 && it < 9) {
        std::printf("rank %d it %d:", comm.rank(), it);
        for (double e : ends)
          std::printf(" %.1f", e);
        std::printf("\n");
      }
      if (it >= 3) times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    if (comm.rank() == 0)
      std::printf("%s: %d calls x %zu B/rank-block algo %s: median %.1f ms [%.1f, %.1f]\n",
                  coll.c_str(), chunks, block * 4, o.algorithm.c_str(), times[times.size() / 2],
                  times.front(), times.back());
  }
  MPI_Finalize();
}
