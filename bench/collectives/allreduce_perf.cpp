// allreduce_perf: nccl-tests-style benchmark of every allreduce algorithm against MPI (see
// harness.hpp).
#include "harness.hpp"

int main(int argc, char** argv) {
  return tilecomm::bench::run_perf(argc, argv, tilecomm::Collective::AllReduce);
}
