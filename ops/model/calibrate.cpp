// tilecomm::calibrate (include/tilecomm/calibrate.hpp): the measurements behind a Profile — the
// compute sweeps, the overheads and the summary here; the message paths in calibrate_paths.cpp,
// the link under load in calibrate_link.cpp. Every figure is the median of repeated timings after
// a warm-up; fits go through least_squares() (LAPACKE_dgels).
#include "tilecomm/calibrate.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "ops/common/op_util.hpp"
#include "ops/kernels/embedding_pool.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/gemv.hpp"
#include "ops/model/calibrate_link.hpp"
#include "ops/model/calibrate_paths.hpp"
#include "ops/model/calibrate_util.hpp"
#include "ops/model/fit.hpp"
#include "ops/model/profile.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {
namespace {
using detail::CommImpl;
using detail::Topology;
using model::Fit;
using namespace model::calib;  // NOLINT(google-build-using-namespace): timing helpers, Points

// Called before every point of a compute sweep: a barrier, so that every rank of the job measures
// the same shape at the same time, as an operator's ranks run the same kernel at once (they share
// memory bandwidth and caches; unsynchronised, the two ranks of np 2 timed the same GEMV tile up
// to 2.3x apart, each meeting its partner's sweep at another shape).
using Sync = std::function<void()>;

// Weights far larger than the caches, walked through so every tile reads memory as a real call's
// tiles do (a call streams W once).
constexpr std::size_t kStreamFloats = std::size_t{24} << 20;  // 96 MiB

// GEMV tiles streaming W from `big` (at most 16 MiB of W: a call reads W once), or, `warm`, with
// W in the caches: `big`'s first block reused (at most 4 MiB, which the L3 holds), as a loop
// calling one operator on small weights meets it.
Points calibrate_gemv(std::vector<float>& big, const Sync& sync, bool warm) {
  Points pts;
  std::vector<float> x(8192, 1.0f), y(4096);
  const std::size_t max_elems = warm ? std::size_t{1} << 20 : std::size_t{4} << 20;
  for (std::size_t rows : {16, 64, 256, 1024, 4096})
    for (std::size_t k : {16, 64, 256, 1024, 4096}) {
      if (rows * k > max_elems) continue;
      const std::size_t elems = rows * k, slots = warm ? 1 : kStreamFloats / elems;
      auto tile = [&](int r) {
        const float* w = big.data() + (static_cast<std::size_t>(r) % slots) * elems;
        kernels::gemv_f32_operator(w, rows, k, x.data(), y.data());
      };
      const int reps = reps_for(tile);
      sync();
      pts.add(double(rows), double(rows * k), time_median(reps, tile));
    }
  return pts;
}

// A data or unified cache of cpu0 in sysfs, bytes (0: unknown): at `level`, or (0) its highest
// level. Not sysconf(_SC_LEVEL3_CACHE_SIZE): on this VM it reports 320 MiB (the host socket's,
// from CPUID), where the guest's topology has one 32 MiB L3.
double cache_bytes_at(int level) {
  int best_level = 0;
  double bytes = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    std::ifstream level_file(dir + "level"), size_file(dir + "size"), type_file(dir + "type");
    int at = 0;
    std::string size, type;
    if (!(level_file >> at) || !(size_file >> size) || size.empty()) continue;
    if ((type_file >> type) && type == "Instruction") continue;
    double scale = 1;
    if (size.back() == 'K') scale = 1024;
    if (size.back() == 'M') scale = 1024.0 * 1024;
    if (level ? at == level : at > best_level) {
      best_level = at;
      bytes = std::atof(size.c_str()) * scale;
    }
  }
  return bytes;
}

// Embedding tiles fetching random rows of a 96 MiB table: every lookup a cache miss. Or, `warm`,
// random rows of a set read just before (8 MiB of rows scattered over the same table): L3 hits,
// as a loop calling one operator on the same indices meets the rows its last call fetched, with
// the TLB misses of rows spread over large tables. (One set of indices looked up again instead
// times the L1 and L2, which hold a tile's rows but not a call's: a quarter of such calls'
// measured compute; 8 MiB of adjacent rows, 0.6 of it.)
constexpr std::size_t kWarmRowsFloats = std::size_t{2} << 20;  // 8 MiB

Points calibrate_embedding(std::vector<float>& big, const Sync& sync, bool warm) {
  Points pts;
  std::vector<std::int64_t> idx, off, hot;
  std::vector<float> out(256 * 256);
  std::uint64_t seed = 12345;
  auto random = [&](std::size_t below) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((seed >> 33) % below);
  };
  for (std::size_t dim : {16, 64, 256})
    for (std::size_t bags : {8, 64, 256})
      for (std::size_t pool : {1, 20}) {
        // Fresh random rows for every repetition (repeating one set times the L1 and L2).
        const std::size_t rows = kStreamFloats / dim, n = bags * pool;
        hot.clear();
        if (warm)
          for (std::size_t i = 0; i < kWarmRowsFloats / dim; ++i)
            hot.push_back(random(rows));
        auto draw = [&](std::size_t count) {
          idx.clear();
          for (std::size_t i = 0; i < count; ++i)
            idx.push_back(warm ? hot[static_cast<std::size_t>(random(hot.size()))] : random(rows));
        };
        off.assign(1, 0);
        for (std::size_t b = 0; b < bags; ++b)
          off.push_back(off.back() + static_cast<std::int64_t>(pool));
        kernels::PoolJob job;
        job.offsets = off.data();
        job.bag0 = 0;
        job.bag1 = bags;
        job.dim = dim;
        job.dst = out.data();
        job.stride = dim;
        auto call = [&](int r) {
          job.indices = idx.data() + static_cast<std::size_t>(r) * n;
          kernels::embedding_pool().f32(big.data(), job);
        };
        draw(n);
        const int reps = reps_for(call);
        draw(n * static_cast<std::size_t>(reps + 1));
        volatile float sink = 0;
        for (std::int64_t row : hot)  // warm: the set's rows into the caches
          for (std::size_t j = 0; j < dim; j += 16)
            sink = sink + big[static_cast<std::size_t>(row) * dim + j];
        sync();
        pts.add(double(n), double(n * dim), time_median(reps, call));
      }
  return pts;
}

// A call's GEMM tiles read their rows of A and write their rows of C once, through memory the
// caches do not hold (C alone is 8 MiB per rank at GemmReduceScatter M = 2048, N = 1024), while
// the packed weights stay warm: A and C walk through `big`'s two halves, W is reused. (Hot A and C
// put that call's compute at 0.8x its measured time.) The rows include multiples of the
// micro-kernel's 6 (kernels::kGemmMr) besides 8, 16 and 32: a tile's cost per row is not smooth in
// its rows (remainder rows run narrower kernels). With only 8 and 32, the eager-sized 12-row tiles
// of GemmReduceScatter across nodes at N = 1024 were read as 0.0149 ns per multiply-add, where
// they run at 0.0115 (8 rows: 0.0157, 16: 0.0125, 24: 0.0112; 2026-11-28), and the compute at
// 2-4 emulated nodes was predicted at 1.15-1.32x its measured time.
Points calibrate_gemm(std::vector<float>& big, const Sync& sync) {
  Points pts;
  const std::size_t half = big.size() / 2;
  for (std::size_t k : {64, 256})
    for (std::size_t n : {64, 256, 1024}) {  // packed weights 16 KiB .. 1 MiB (past L2)
      std::vector<float> b(k * n, 0.5f);
      kernels::PackedWeights w;
      w.reset(1, k, n);
      w.pack(0, b.data(), n, 0, w.panels());
      for (std::size_t rows : {6, 8, 12, 16, 24, 32, 64, 128, 256}) {
        const std::size_t slots = half / (rows * std::max(k, n));
        auto tile = [&](int r) {
          const std::size_t slot = static_cast<std::size_t>(r) % slots;
          kernels::gemm_tile(big.data() + slot * rows * k, k, rows, w, 0, 0, n,
                             big.data() + half + slot * rows * n, n);
        };
        const int reps = reps_for(tile);
        sync();
        pts.add(double(rows), double(rows * k * n), time_median(reps, tile));
      }
    }
  return pts;
}

// Reductions and on-node bulk copies as a call's collective makes them: every rank of the node at
// once, through memory the caches do not hold (the collective follows compute that streamed its
// weights or tables through them). `big` is walked through in two halves, source and destination.
// A hot loop measured 3-10x faster than a call's collective gets: a 4 MiB embedding All-to-All at
// np 2 takes 2 ms after its compute, the hot ping-pong's 40 GB/s promised 0.2.
std::pair<float*, float*> cold_pair(std::vector<float>& big, std::size_t floats, int r) {
  const std::size_t half = big.size() / 2, slots = half / floats;
  const std::size_t off = (static_cast<std::size_t>(r) % slots) * floats;
  return {big.data() + off, big.data() + half + off};
}

// Adds as above (cold), or `hot`: on 4-256 KiB arrays the L2 holds (the start of `big`'s two
// halves, added again and again), a collective's input the compute before it has just written
// (MemCosts).
Points calibrate_reduce(std::vector<float>& big, const Sync& sync, bool hot) {
  Points pts;
  const std::vector<std::size_t> sizes =
      hot ? std::vector<std::size_t>{1 << 10, 1 << 12, 1 << 14, 1 << 16}
          : std::vector<std::size_t>{1 << 10, 1 << 13, 1 << 16, 1 << 18, 1 << 20};
  for (std::size_t n : sizes) {
    auto add = [&](int r) {
      const auto [x, y] = cold_pair(big, n, hot ? 0 : r);
      for (std::size_t i = 0; i < n; ++i)
        y[i] += x[i];
    };
    const int reps = reps_for(add);
    sync();
    pts.add(double(n * sizeof(float)), 0, time_median(reps, add));
  }
  return pts;
}

// The per-byte cost of a bulk on-node copy (the fit t = c0 + c1 bytes, c1), the slowest rank's.
double calibrate_bulk_copy(Communicator& comm, std::vector<float>& big, const Sync& sync) {
  Points pts;
  for (std::size_t n : {1 << 14, 1 << 16, 1 << 18, 1 << 20}) {
    auto copy = [&](int r) {
      const auto [from, to] = cold_pair(big, n, r);
      std::memcpy(to, from, n * sizeof(float));
    };
    const int reps = reps_for(copy);
    sync();
    pts.add(double(n * sizeof(float)), 0, time_median(reps, copy));
  }
  return std::max(0.0, pts.slowest(comm).fit(2).c[1]);
}

std::string fit_row(const char* name, const char* form, const Fit& f) {
  return fmt::format("  {:<14} {:<34} c = [{:.3g}, {:.3g}, {:.3g}]  rms {:.2g} s, max {:.0f} %\n",
                     name, form, f.c[0], f.c[1], f.c[2], f.rms, 100 * f.max_rel);
}

}  // namespace

std::string calibrate(Communicator& comm, Device& device, const CalibrateOptions& options) {
  CommImpl& c = detail::impl_of(comm);
  const Topology& topo = c.topo;
  std::string path = !options.path.empty() ? options.path : env().profile;
  if (path.empty()) path = model::default_profile_path();
  if (path.empty())
    throw Error(ErrorCode::InvalidArgument,
                "calibrate: no path: set CalibrateOptions::path, TILECOMM_PROFILE, "
                "XDG_CACHE_HOME or HOME");
  detail::blas_single_threaded();
  const double start = now();
  model::Profile p;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.version = model::version();
  p.cus = device.num_cus();
  p.ranks = topo.size;
  p.nodes = topo.num_nodes;
  p.cache_bytes = cache_bytes_at(0);
  p.l2_bytes = cache_bytes_at(2);
  double bulk_beta = 0;
  {
    // Compute: every rank at once, one thread each (a CU's WG runs the kernel this way), point by
    // point (Sync).
    std::vector<float> big(kStreamFloats);
    for (std::size_t i = 0; i < big.size(); ++i)
      big[i] = static_cast<float>(i % 7) * 0.25f;
    const Sync sync = [&] { barrier(comm); };
    p.gemv = calibrate_gemv(big, sync, false).compute_fit(comm);
    p.gemv_warm = calibrate_gemv(big, sync, true).compute_fit(comm);
    p.embedding = calibrate_embedding(big, sync, false).compute_fit(comm);
    p.embedding_warm = calibrate_embedding(big, sync, true).compute_fit(comm);
    p.gemm = calibrate_gemm(big, sync).compute_fit(comm);
    p.reduce = calibrate_reduce(big, sync, false).slowest(comm).fit(2);
    p.reduce_hot = calibrate_reduce(big, sync, true).slowest(comm).fit(2);
    bulk_beta = calibrate_bulk_copy(comm, big, sync);
  }
  barrier(comm);
  // Paths: on-node (shared segment) with local rank 1; MPI with the first off-node rank, else
  // (one node) with rank 1 through MPI's own on-node transport.
  p.shm = model::calibrate_shm(comm, p.flag_s);
  if (p.shm.measured) p.shm.bulk_beta = bulk_beta;
  barrier(comm);
  // (Rank 0 decides: on_node() is relative to the caller.)
  int partner = -1;
  for (int q = 1; q < topo.size && partner < 0; ++q)
    if (!topo.on_node(q) || topo.num_nodes == 1) partner = q;
  MPI_Bcast(&partner, 1, MPI_INT, 0, c.mpi);
  if (partner > 0) p.mpi = model::calibrate_mpi(comm, partner);
  barrier(comm);
  p.link_bytes_per_s = model::calibrate_link_rate(comm);
  // Overheads.
  {
    Stream s = device.create_stream(Stream::kNormal);
    p.launch_s = time_median(500, [&](int) {
      s.launch({"calibrate.empty", {1, 1}, 0}, [](const WorkgroupContext&) {});
      s.synchronize();
    });
    // One WG per slot, each returning once every slot's WG has started: a kernel's workers beyond
    // the first come in. (Empty WGs would all run on the first worker before the others wake.)
    const int grid = device.num_cus() * device.wg_slots_per_cu();
    std::atomic<int> started{0};
    p.launch_grid_s = time_median(500, [&](int) {
      started.store(0, std::memory_order_relaxed);
      s.launch({"calibrate.grid", {static_cast<std::size_t>(grid), 1}, 0},
               [&](const WorkgroupContext&) {
                 started.fetch_add(1, std::memory_order_acq_rel);
                 Backoff wait(WaitPolicy::latency());
                 while (started.load(std::memory_order_acquire) < grid)
                   wait.pause();
               });
      s.synchronize();
    });
  }
  p.barrier_s = time_median(500, [&](int) { barrier(comm); });
  // The proxy: the fused path's one-way time minus plain MPI's for the same 8 bytes. Not
  // measurable with one rank: then half the proxy's shortest background sleep.
  p.proxy_s = 0.5 * 20e-6;
  if (partner > 0) {
    const double through_proxy = model::proxy_one_way(comm, device, partner);
    if (through_proxy >= 0) p.proxy_s = std::max(0.0, through_proxy - p.mpi.time.at(8));
  }
  barrier(comm);
  MPI_Bcast(&p.barrier_s, 1, MPI_DOUBLE, 0, c.mpi);
  if (topo.rank == 0) {
    model::save_profile(p, path);
    if (options.print) {
      std::string out = fmt::format(
          "tilecomm_calibrate: {} ranks on {} node(s), {} CU(s) per rank, host {}, {:.1f} s\n",
          p.ranks, p.nodes, p.cus, p.host, now() - start);
      out +=
          "compute (one CU, per tile, the slowest rank's; the model reads the measured points, "
          "the fit t = c0 + c1 x1 + c2 x2 (LAPACKE_dgelsy) shows how far from linear they are):\n";
      out += fit_row("gemv", "x1 = rows, x2 = rows K n", p.gemv);
      out += fit_row("gemv warm", "the same, W in the caches", p.gemv_warm);
      out += fit_row("embedding", "x1 = lookups, x2 = lookups dim", p.embedding);
      out += fit_row("embedding warm", "the same, the rows in the caches", p.embedding_warm);
      out += fit_row("gemm", "x1 = rows, x2 = rows K N", p.gemm);
      out += fit_row("reduce", "x1 = bytes added (cold)", p.reduce);
      out += fit_row("reduce hot", "x1 = bytes added (in the L2)", p.reduce_hot);
      out += "paths (one message: t = alpha + beta bytes; CPU per message):\n";
      for (const auto& [name, pc] :
           {std::pair<const char*, const model::PathCost&>{"shm", p.shm}, {"mpi", p.mpi}}) {
        if (!pc.measured) {
          out += fmt::format("  {:<4} not measured (no partner for it in this job)\n", name);
          continue;
        }
        out += fmt::format(
            "  {:<4} alpha {:8.2f} us  beta {:7.3f} ns/B ({:6.2f} GB/s)  rms {:.2g} s  "
            "cpu send {:.2f} us + {:.3f} ns/B, recv {:.2f} us + {:.3f} ns/B\n",
            name, pc.alpha() * 1e6, pc.beta() * 1e9, pc.beta() > 0 ? 1e-9 / pc.beta() : 0.0,
            pc.time.rms, pc.cpu_send.c[0] * 1e6, pc.cpu_send.c[1] * 1e9, pc.cpu_recv.c[0] * 1e6,
            pc.cpu_recv.c[1] * 1e9);
        if (pc.bulk_beta > 0)
          out += fmt::format(
              "       (beta: the larger of a ping-pong's {:.2f} GB/s and a cold bulk "
              "copy's {:.2f} GB/s, every rank of the node copying)\n",
              pc.time.c[1] > 0 ? 1e-9 / pc.time.c[1] : 0.0, 1e-9 / pc.bulk_beta);
      }
      if (p.link_bytes_per_s > 0)
        out += fmt::format(
            "  link {:.3g} Gbit/s per node, every rank sending to every off-node rank\n",
            p.link_bytes_per_s * 8 / 1e9);
      out += fmt::format(
          "overheads: flag {:.2f} us, launch {:.2f} us (a WG per slot: {:.2f} us), barrier {:.2f} "
          "us, proxy {:.2f} us "
          "(per off-node tile, beyond MPI's latency)\nwrote {}\n",
          p.flag_s * 1e6, p.launch_s * 1e6, p.launch_grid_s * 1e6, p.barrier_s * 1e6,
          p.proxy_s * 1e6, path);
      fmt::print("{}", out);
    }
  }
  return path;
}

}  // namespace tilecomm
