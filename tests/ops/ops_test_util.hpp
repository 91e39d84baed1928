#pragma once
// Shared pieces of the operator tests: exact inputs, a device per rank, stragglers.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <random>
#include <thread>
#include <vector>

#include "moe_reference.hpp"
#include "tilecomm/tilecomm.hpp"

namespace tilecomm::test {

inline constexpr Mode kModes[] = {Mode::Sequential, Mode::Shaped, Mode::Fused};

inline int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// A small device: 2 CUs x 2 slots whatever the machine (tests oversubscribe 2 cores).
inline RuntimeConfig test_device_config() {
  RuntimeConfig c = RuntimeConfig::from_env();
  c.num_cus = 2;
  c.wg_slots_per_cu = 2;
  return c;
}

/// test_device_config() with the device's tracer on (the fused kernels' tile marks).
inline RuntimeConfig traced_test_device_config() {
  RuntimeConfig c = test_device_config();
  c.trace = true;
  return c;
}

/// The "tile handed to proxy" marks of a trace: how many, and their bytes (what a rank put on the
/// link, off-node).
struct HandedToProxy {
  long long tiles = 0, bytes = 0;
};
inline HandedToProxy handed_to_proxy(const Tracer& tracer) {
  HandedToProxy h;
  for (const TraceEvent& e : tracer.events())
    if (e.phase == 'i' && e.name == "tile handed to proxy") ++h.tiles, h.bytes += e.bytes;
  return h;
}

/// Whether the job spans (pretend) nodes of equal sizes.
inline bool equal_nodes_across(const Communicator& comm) {
  return comm.num_nodes() > 1 && comm.size() % comm.num_nodes() == 0;
}

/// Small integers in [-r, r]: every sum and product below stays exact in float32.
inline float small_int(std::uint64_t seed, int r = 2) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((seed >> 33) % (2 * r + 1)) - r);
}

/// A straggler: sleeps a random time (0..max_us) before a call, and keeps some of the device's
/// slots busy for a random time during it, so tiles of the call are delayed unevenly per rank.
class Straggler {
 public:
  Straggler(Device& device, unsigned seed)
      : dev_(device), noise_(device.create_stream(Stream::kHigh)), rng_(seed) {}
  void before_call(int max_us = 3000) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng_() % (max_us + 1)));
    const int busy_us = static_cast<int>(rng_() % (max_us + 1));
    noise_.launch({"straggler", {1, 1}, 0}, [busy_us](const WorkgroupContext&) {
      std::this_thread::sleep_for(std::chrono::microseconds(busy_us));
    });
  }
  void after_call() { noise_.synchronize(); }

 private:
  Device& dev_;
  Stream noise_;
  std::mt19937 rng_;
};

}  // namespace tilecomm::test
