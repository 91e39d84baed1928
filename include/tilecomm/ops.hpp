#pragma once
/// \file ops.hpp
/// What the fused operators share: the three execution modes and their options.
///
///  - Sequential: the compute kernel runs on all CUs and finishes; then the collective runs.
///  - Shaped (Cui & Pericas, occupancy shaping): the work is split into chunks; each chunk's
///  compute
///    kernel asks for enough LDS that fewer of its WGs are resident, leaving room for a
///    communication kernel on a high-priority stream that runs the collective of chunk i while
///    chunk i+1 computes. Overlap at kernel granularity.
///  - Fused (Punniyamurthy et al.): one persistent kernel whose WGs compute a tile and, the moment
///    it is done, store it into the on-node destination's shared buffer with a release flag, or
///    hand it to an MPI proxy for an off-node destination, while other WGs keep computing.
///    Remote-bound tiles are scheduled first. Overlap at workgroup granularity.
/// All three give the same result (bitwise where they reduce in the same order; see each op).

#include <string>
#include <string_view>

namespace tilecomm {

namespace detail {
struct BenchAccess;  // the benchmark hooks' way in (tilecomm/bench_hooks.hpp)
}

/// Auto, with a cost profile (OpOptions::profile, TILECOMM_PROFILE or the default path; written by
/// tilecomm_calibrate, docs/model.md): the first Auto call predicts each mode's time from the
/// profile and agrees across ranks on the slowest rank's prediction of each (one AllReduce of 4
/// doubles; if any rank has no profile, every rank measures as below). If the fastest prediction
/// beats every other by more than 3x (best x 3 < other: the model's ranking error reaches that),
/// Auto settles on it at once (no trial calls); otherwise it measures, as below, only the modes
/// predicted within 3x of the best.
/// Auto without a profile: the context's first calls try sequential, shaped and fused in turn, in
/// blocks: per mode one lead-in call (not timed) and OpOptions::auto_rounds timed calls of the same
/// mode, so each timed call follows a call of its own mode as it will once settled; then every
/// rank settles on the same mode for good: the one with the lowest median of the slowest rank's
/// call time, where a mode other than sequential must beat sequential by 2 % (noise margin). When
/// another mode's fastest trial call was no slower than that mode's median (not clear), it first
/// runs another pass of blocks (in rotated order), up to twice, and more while the timed calls add
/// up to under 10x OpOptions::auto_min_trial_ms; a clear result too while they add up to under
/// auto_min_trial_ms (20 ms; calls of a few hundred microseconds); at most 8 extra passes in all.
/// Settling costs one small AllReduce per decision.
/// Every mode computes the same result (see each operator for the bitwise rules), so trial calls
/// are ordinary calls. Pass Auto on every rank for the same calls, like any collective argument;
/// calls with an explicit mode in between are neither timed nor counted.
enum class Mode { Sequential, Shaped, Fused, Auto };

std::string_view to_string(Mode mode) noexcept;
/// "sequential", "shaped", "fused" or "auto"; anything else raises Error(InvalidArgument) listing
/// them.
Mode parse_mode(std::string_view name);

/// How a fused reduction moves partial results (GemvAllReduce):
///  - OneShot: every rank publishes its partial of each row block once per peer (a store into its
///    own shared segment for on-node peers, one MPI message per off-node peer) and reduces every
///    block itself. One communication step: the latency path.
///  - TwoShot: each block has an owner that reduces it and sends the sum back (ReduceScatter +
///    AllGather at tile granularity): half the bytes per rank at p = 2, fewer at larger p, two
///    steps.
enum class FusedAlgorithm { Auto, OneShot, TwoShot };

/// "auto", "one_shot" or "two_shot".
std::string_view to_string(FusedAlgorithm algorithm) noexcept;
/// The inverse of to_string; anything else raises Error(InvalidArgument) listing the names.
FusedAlgorithm parse_fused_algorithm(std::string_view name);

/// How the shaped mode leaves room for its communication kernels:
///  - Lds (Cui & Pericas): each compute kernel asks for enough LDS that `free_cus` CUs' worth of
///    WG slots stay free; compute and communication share every CU.
///  - CuMask: whole CUs, a dedicated communication core: the compute kernels run on a stream
///    masked to CUs free_cus..num_cus-1, the communication kernels on one masked to CUs
///    0..free_cus-1 (Device::create_stream with a CU mask, as HIP's CU-masked streams). Needs
///    1 <= free_cus < the device's CUs, else the operator's constructor raises
///    Error(InvalidArgument).
///  - NonBlocking: nothing is reserved (free_cus is ignored), the chunked non-blocking pattern of
///    frameworks: every chunk's compute kernel runs on every CU; as each chunk's compute finishes
///    the host posts its collective to a progress thread (tilecomm's own i* collectives run the
///    same way), which runs them in chunk order while later chunks compute.
enum class ShapedPolicy { Lds, CuMask, NonBlocking };

/// "lds", "cu_mask" or "nonblocking".
std::string_view to_string(ShapedPolicy policy) noexcept;
/// The inverse of to_string; anything else raises Error(InvalidArgument) listing the names.
ShapedPolicy parse_shaped_policy(std::string_view name);

/// Knobs of the shaped mode. They may differ between ranks (results do not depend on them) except
/// `chunks`, which must be equal.
struct ShapedOptions {
  /// CUs' worth of WG slots (Lds) or whole CUs (CuMask) left to the communication kernels;
  /// ignored by NonBlocking.
  int free_cus = 1;
  /// Chunks the work is split into (each: one compute kernel, then one communication kernel).
  int chunks = 4;
  ShapedPolicy policy = ShapedPolicy::Lds;
};

/// Options shared by the operators (fixed when the Context is created).
struct OpOptions {
  ShapedOptions shaped;
  /// Collective algorithm for sequential and shaped modes ("" = tilecomm's default, "mpi", ...).
  std::string algorithm;
  /// Tile size along the op's tiled dimension (rows, bags or tokens); 0 = the op's default.
  std::size_t tile = 0;
  /// Fused mode: schedule tiles bound for other ranks before tiles that stay local.
  bool remote_first = true;
  /// Fused mode's reduction protocol, for operators that reduce (GemvAllReduce; the others accept
  /// only Auto). Auto picks OneShot for small outputs (latency-bound calls such as decode), TwoShot
  /// above; see the operator's header. Must be equal on every rank.
  FusedAlgorithm fused_algorithm = FusedAlgorithm::Auto;
  /// Mode::Auto's timed calls per mode (each block: a lead-in, then these) before it settles; >= 1
  /// (up to 3x as many when the result is not clear, 9x when the calls are short, or unclear
  /// and a few ms). Must be equal on every rank.
  int auto_rounds = 3;
  /// Mode::Auto: measured trials adding up to less than this (milliseconds, the slowest rank's
  /// calls), or to less than 10x this when they do not tell the modes apart, are extended by
  /// another pass of blocks, at most 8 times in all: a few sub-millisecond calls per mode are too
  /// few samples on a shared machine. >= 0 (0: off). Must be equal on every rank.
  double auto_min_trial_ms = 20;
  /// Mode::Auto's cost profile: "" = the file TILECOMM_PROFILE names, else the default path
  /// ($XDG_CACHE_HOME or ~/.cache, tilecomm/profile-<host>-<version>.json) if that file exists (a
  /// corrupt default file: a warning on stderr, no profile); a path = that file; "none" = no
  /// profile (measured Auto). A file named here or by TILECOMM_PROFILE must exist and parse: the
  /// constructor raises Error(InvalidArgument) naming it otherwise. May differ between ranks.
  /// GemvAllReduce also cuts its default one-shot blocks across nodes for the profile's link and
  /// message costs (every mode computes in them; the ranks take the smallest tile).
  std::string profile;
};

}  // namespace tilecomm
