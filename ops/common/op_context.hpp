#pragma once
// What every operator context owns and does the same way: its streams, its private communicator,
// the node's symmetric segment with per-tile flags, the proxy for off-node peers, the call epoch,
// mode dispatch behind the verify-mode hook, and the shaped mode's chunk loop. An operator adds
// its compute kernels, its memory layout and its tile list (docs/ops.md, "How to add an operator").

#include <mpi.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "collectives/progress_queue.hpp"
#include "ops/common/auto_mode.hpp"
#include "ops/common/proxy.hpp"
#include "ops/common/symmetric.hpp"
#include "ops/model/predict.hpp"
#include "runtime/flags.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm::detail {

/// Names an operator: `name` in errors ("GemvAllReduce"), `trace` as the prefix of its kernels'
/// trace names ("gemv_allreduce" -> "gemv_allreduce.fused"), `shape` the names of the up to three
/// shape values its verify-mode fingerprint carries (unused entries null).
struct OpInfo {
  const char* name;
  const char* trace;
  std::array<const char*, 3> shape;
  /// Whether OpOptions::fused_algorithm may be other than Auto (operators with several fused
  /// reduction protocols).
  bool fused_algorithms = false;
  /// The name of the operator's second kind of call in verify mode's fingerprints (dispatch's
  /// `kind` 1), or null when it has one kind of call.
  const char* second_call = nullptr;
};

/// Shaped mode (Cui & Pericas) as data: chunk c's compute kernel (tiles(c) WGs, shaped LDS) runs on
/// the compute stream; its collective runs as a one-WG kernel on the high-priority stream once the
/// chunk's compute has finished, overlapping the next chunk's compute.
struct ShapedChunks {
  std::size_t chunks = 1;
  /// WGs of chunk c's compute kernel (0: no compute kernel; the chunk's collective still runs).
  std::function<std::size_t(std::size_t chunk)> tiles;
  /// The compute of WG `tile` of chunk c.
  std::function<void(std::size_t chunk, std::size_t tile)> compute;
  /// Chunk c's collective.
  std::function<void(std::size_t chunk)> communicate;
};

class OpContext {
 public:
  /// Local: no communication (an operator checks its arguments before its first collective).
  /// `comm` and `device` must outlive this.
  OpContext(Communicator& comm, Device& device, OpOptions options, const OpInfo& info);
  ~OpContext();
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;

  Communicator& communicator;
  CommImpl& comm;
  const Topology& topo;
  Device& device;
  const OpOptions options;
  const OpInfo info;
  Stream compute_stream, comm_stream;
  /// The shaped mode's streams: compute_stream/comm_stream (Lds policy), or a pair with disjoint
  /// CU masks (CuMask policy).
  Stream shaped_compute, shaped_comm;
  /// Private duplicate of the communicator: the fused kernel's tags and per-call exchanges.
  MPI_Comm mpi = MPI_COMM_NULL;

  /// Error(InvalidArgument) "<name>: <what>".
  [[noreturn]] void invalid(const std::string& what) const;
  /// Collective: Error(Mismatch) on every rank unless every rank passed the same `values`.
  void agree(std::initializer_list<const char*> names, std::vector<long long> values) const;
  /// OpOptions::auto_min_trial_ms in whole microseconds (agree()'s values are integers).
  long long auto_min_trial_us() const { return std::llround(options.auto_min_trial_ms * 1e3); }
  /// Collective: the smallest `value` of all ranks (tile sizes derived from each rank's device).
  std::size_t min_across_ranks(std::size_t value) const;

  /// "<trace>.<phase>", the name of one of the operator's kernels in traces.
  std::string kernel_name(std::string_view phase) const;
  /// Every rank once, in the order a fused kernel should produce their tiles: with
  /// `remote_first`, off-node ranks, then other on-node ranks, then this rank, each class rotated
  /// to start after this rank (rank r serves r+1 first: no rank is everyone's first destination, no
  /// incast); else plain rank order (the unrotated baseline).
  std::vector<int> destination_order(bool remote_first) const;
  /// Every other rank once, in the order their tiles are expected to arrive under the rotated
  /// destination order: rank - 1 first (its first destination is this rank), then rank - 2, ...
  std::vector<int> source_order() const;
  /// The largest MPI tag the fused kernel may use on `mpi` (MPI_TAG_UB; 32767, the standard's
  /// minimum, if the attribute is missing).
  std::size_t tag_upper_bound() const;
  /// WG slots of the device (CUs x slots per CU).
  std::size_t wg_slots() const;
  /// True when some peers are reached over MPI (the fused kernel then has a proxy).
  bool spans_nodes() const { return topo.num_nodes > 1; }

  // ---- the node's symmetric segment (fused mode) ----
  /// Collective: duplicates the communicator (mpi), maps `layout.size()` zeroed bytes per rank of
  /// the node's symmetric segment, creates the proxy when the job spans nodes. Call once, last in
  /// the operator's constructor.
  void map_segment(const SegmentLayout& layout);
  /// Region at `offset` of on-node rank `local`'s segment.
  template <class T = float>
  T* region(int local, std::size_t offset) const {
    return reinterpret_cast<T*>(segment_->segment(local) + offset);
  }
  /// `count` flags at `offset` in every on-node rank's segment, indexed by local rank.
  std::vector<TileFlags> flags_at(std::size_t offset, std::size_t count) const;
  /// The MPI proxy of the fused kernel; null when every peer is on this node.
  Proxy* proxy() const { return proxy_.get(); }
  /// The epoch of a new fused call (flags hold epochs, so they never need resetting).
  std::uint32_t next_epoch() { return ++epoch_; }
  /// The epoch of the last fused call (0 before the first).
  std::uint32_t epoch() const { return epoch_; }
  /// Staging of off-node tiles (FusedPlan::stage), grown as calls need, reused across calls.
  std::vector<float>& staging() { return staging_; }
  /// rows x cols floats with row stride ld, committed and cached (host thread only; WGs may use a
  /// type once the host has created it).
  MPI_Datatype block_type(std::size_t rows, std::size_t cols, std::size_t ld);

  // ---- a call ----
  /// A call: verify mode's hook (the call's shape and mode across ranks), then `validate` (may
  /// return false: nothing to do on any rank), then the mode's own path.
  /// Mode::Auto is resolved here (auto_mode.hpp): the call runs its trial mode, timed, or the
  /// settled one.
  /// `kind`: which of the operator's calls this is (0, or 1 for a second kind of call such as
  /// GemmAllToAll::run_layer), each with its own Auto trials and choice.
  template <class Validate, class Sequential, class Shaped, class Fused>
  void dispatch(Mode mode, std::array<std::uint64_t, 3> shape, Validate&& validate,
                Sequential&& sequential, Shaped&& shaped, Fused&& fused, std::size_t kind = 0) {
    refuse_if_failed();
    AutoMode& auto_ = autos_.at(kind);
    tiles_moving_ = false;
    try {
      // The first Auto call of a kind is verified as "auto" before it plans (a collective), so
      // that a rank that passed another mode gets a Mismatch, not a stray AllReduce.
      const bool planning = mode == Mode::Auto && !auto_planned_.at(kind);
      if (planning) {
        verify(mode, shape, kind);
        plan_auto(kind);
      }
      const bool trial = mode == Mode::Auto && !auto_.choice();
      if (mode == Mode::Auto) mode = auto_.next();
      if (!planning) verify(mode, shape, kind);
      if constexpr (std::is_same_v<decltype(validate()), bool>) {
        if (!validate()) return;
      } else {
        validate();
      }
      if (trial && auto_.measuring()) barrier(communicator);  // see auto_mode.hpp
      const auto t0 =
          trial ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      if (mode == Mode::Sequential) {
        sequential();
      } else if (mode == Mode::Shaped) {
        shaped();
      } else if (mode == Mode::Fused) {
        fused();
      } else {
        invalid("run: mode = " + std::to_string(static_cast<int>(mode)));
      }
      if (trial &&
          auto_.record(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()))
        settle_auto(auto_);
    } catch (...) {
      note_failure(std::current_exception());
      throw;
    }
  }
  /// Mode::Auto's settled mode for calls of `kind`; empty while it is still trying modes.
  std::optional<Mode> auto_choice(std::size_t kind = 0) const { return autos_.at(kind).choice(); }
  /// The shape of calls of `kind` for Auto's model (ops/model/predict.hpp), set by the operator;
  /// it may be refined (e.g. from the first call's indices) until the first Auto call of that kind
  /// plans. A kind without one measures.
  void set_model_shape(const model::OpShape& shape, std::size_t kind = 0) {
    model_shapes_.at(kind) = shape;
  }
  /// Whether the first Auto call of `kind` has planned (predicted and agreed) yet.
  bool auto_planned(std::size_t kind = 0) const { return auto_planned_.at(kind); }
  /// The model's agreed predictions (slowest rank's, per mode) for `kind`, when Auto planned from
  /// a profile.
  std::optional<std::array<double, 3>> auto_predictions(std::size_t kind = 0) const {
    return predictions_.at(kind);
  }
  /// The rank layout the model sees: ranks, nodes, this device's CUs and WG slots.
  model::Layout model_layout() const;
  /// The off-node path the tile rules cut for: this rank's profile's (model::off_node_path), the
  /// defaults without one. Ranks may differ: an op agrees on its tiling (min_across_ranks).
  detail::OffNodePath off_node_path() const {
    return profile_ ? model::off_node_path(*profile_) : detail::OffNodePath{};
  }
  /// Sequential mode's compute: a `tiles`-WG kernel on every CU, waited for.
  void run_compute(std::size_t tiles, const std::function<void(std::size_t tile)>& compute);
  /// Runs the shaped mode's chunk loop as ShapedOptions::policy says and waits for all of it.
  void run_shaped(const ShapedChunks& plan);
  /// Called by a fused call before its first tile moves: from then on any error of the call (even
  /// an InvalidArgument or a Mismatch one rank finds in a peer's header) leaves peers out of step,
  /// so it fails the context.
  void tiles_moving() { tiles_moving_ = true; }

 private:
  void verify(Mode mode, std::array<std::uint64_t, 3> shape, std::size_t kind);
  // A call that fails after communication began (Timeout, MPI error, an error inside a workgroup)
  // leaves peers out of step and MPI requests behind: the context is marked failed and every later
  // call raises Error(InvalidUsage) saying why, as NCCL does after a communicator abort.
  void note_failure(std::exception_ptr error);
  // Collective: the slowest rank's time of every Auto trial call, then the choice.
  void settle_auto(AutoMode& state);
  // Collective (the first Auto call of `kind`): every rank's prediction of each mode from its
  // profile, the slowest rank's agreed (one AllReduce of 4 doubles); a clear winner settles at
  // once, else only the plausible candidates are tried. Without a profile (or a shape) on some
  // rank: all measure.
  void plan_auto(std::size_t kind);
  std::array<AutoMode, 2> autos_;          // per kind of call
  std::optional<model::Profile> profile_;  // Auto's cost profile (OpOptions::profile)
  std::array<std::optional<model::OpShape>, 2> model_shapes_;
  std::array<std::optional<std::array<double, 3>>, 2> predictions_;
  std::array<bool, 2> auto_planned_{};
  // The NonBlocking policy's chunk loop: compute on every CU, each chunk's collective handed to
  // host_progress_ once its compute is done.
  void run_nonblocking(const ShapedChunks& plan);
  void refuse_if_failed() const;
  std::string failure_;
  bool tiles_moving_ = false;  // this call's tiles may have moved (tiles_moving())

  std::unique_ptr<SymmetricBuffer> segment_;
  std::unique_ptr<Proxy> proxy_;
  // The NonBlocking policy's progress thread (started on first use). Not the communicator's: a
  // chunk's collective is itself a blocking call that goes through the communicator's queue.
  std::unique_ptr<ProgressQueue> host_progress_;
  std::vector<float> staging_;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t>, MPI_Datatype> block_types_;
  std::uint32_t epoch_ = 0;
  // The operator's call kinds in verify mode's fingerprints (per dispatch `kind`).
  const std::array<std::uint16_t, 2> verify_kinds_;
};

}  // namespace tilecomm::detail
