// reduce_scatter_perf: nccl-tests-style benchmark of every reduce_scatter algorithm against MPI
// (see harness.hpp).
#include "harness.hpp"

int main(int argc, char** argv) {
  return tilecomm::bench::run_perf(argc, argv, tilecomm::Collective::ReduceScatter);
}
