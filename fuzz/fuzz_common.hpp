#pragma once
// Shared pieces of the fuzzers: a byte reader, a contract check that aborts (libFuzzer reports it
// as a crash), and MPI set-up for a single-rank (MPI_COMM_SELF) communicator.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tilecomm/tilecomm.hpp"

namespace fuzz {

struct Input {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  /// Mostly small; sometimes a large or negative 64-bit value.
  std::int64_t value() {
    const std::uint8_t kind = byte();
    if (kind < 200) return byte() % 24;
    if (kind < 230) return -static_cast<std::int64_t>(byte());
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v = (v << 8) | byte();
    return static_cast<std::int64_t>(v);
  }
};

inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: contract broken: %s\n", what);
    std::abort();
  }
}

/// Small integers in [-2, 2]: sums and products below stay exact in float32.
inline float small_int(std::uint64_t seed) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((seed >> 33) % 5) - 2);
}

/// MPI (singleton, no mpiexec), one rank: the operators' argument checks need a communicator.
inline tilecomm::Communicator& self_comm() {
  static tilecomm::Communicator* comm = [] {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    return new tilecomm::Communicator(MPI_COMM_SELF);
  }();
  return *comm;
}

inline tilecomm::Device& small_device() {
  static tilecomm::Device* dev = [] {
    tilecomm::RuntimeConfig c = tilecomm::RuntimeConfig::from_env();
    c.num_cus = 1;
    c.wg_slots_per_cu = 2;
    c.pin_threads = false;
    return new tilecomm::Device(c);
  }();
  return *dev;
}

}  // namespace fuzz
