#pragma once
// CPU time for fused_perf's CPU-aware ideal: this process's CPU clock (every thread: the device's
// workers, MPI's, the host's) and the ranks that share a host with it, with the cores they may run
// on (the union of their affinity masks).
#include <mpi.h>
#include <sched.h>

#include <ctime>
#include <vector>

namespace tilecomm::bench {

/// CPU time this process has used (all threads, user + system), microseconds.
inline double process_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

/// The ranks of MPI_COMM_WORLD on this host (MPI_COMM_TYPE_SHARED: the real host, whatever
/// TILECOMM_NODE_SIZE pretends). Collective to create.
class NodeCpu {
 public:
  NodeCpu() {
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm_);
    cpu_set_t mask;
    CPU_ZERO(&mask);
    sched_getaffinity(0, sizeof(mask), &mask);
    // cpu_set_t is an array of unsigned longs: OR them over the host's ranks.
    constexpr int words = sizeof(cpu_set_t) / sizeof(unsigned long);
    std::vector<unsigned long> bits(words);
    for (int w = 0; w < words; ++w)
      bits[w] = reinterpret_cast<const unsigned long*>(&mask)[w];
    MPI_Allreduce(MPI_IN_PLACE, bits.data(), words, MPI_UNSIGNED_LONG, MPI_BOR, comm_);
    for (int w = 0; w < words; ++w)
      reinterpret_cast<unsigned long*>(&mask)[w] = bits[w];
    cores_ = CPU_COUNT(&mask);
  }
  ~NodeCpu() { MPI_Comm_free(&comm_); }
  NodeCpu(const NodeCpu&) = delete;
  NodeCpu& operator=(const NodeCpu&) = delete;

  /// Cores the host's ranks can run on (the union of their affinity masks).
  int cores() const { return cores_; }
  /// Collective over the host's ranks: the sum of their `value`.
  double sum(double value) const {
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, comm_);
    return value;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int cores_ = 1;
};

}  // namespace tilecomm::bench
