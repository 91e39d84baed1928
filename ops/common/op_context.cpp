#include "ops/common/op_context.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "collectives/verify.hpp"
#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {

OpContext::OpContext(Communicator& c, Device& d, OpOptions opts, const OpInfo& op)
    : communicator(c),
      comm(impl_of(c)),
      topo(comm.topo),
      device(d),
      options(std::move(opts)),
      info(op),
      autos_{AutoMode(options.auto_rounds, options.auto_min_trial_ms * 1e-3),
             AutoMode(options.auto_rounds, options.auto_min_trial_ms * 1e-3)},
      verify_kinds_{register_call_kind(op.name, op.shape),
                    op.second_call ? register_call_kind(op.second_call, op.shape)
                                   : register_call_kind(op.name, op.shape)} {
  comm.refuse_if_failed(info.name);
  if (options.auto_rounds < 1)
    invalid(fmt::format("auto_rounds = {} (must be >= 1)", options.auto_rounds));
  if (!(options.auto_min_trial_ms >= 0) || !std::isfinite(options.auto_min_trial_ms))
    invalid(
        fmt::format("auto_min_trial_ms = {} (must be finite and >= 0)", options.auto_min_trial_ms));
  if (options.shaped.chunks < 1)
    invalid(fmt::format("shaped.chunks = {} (must be >= 1)", options.shaped.chunks));
  if (!info.fused_algorithms && options.fused_algorithm != FusedAlgorithm::Auto)
    invalid(fmt::format("fused_algorithm = {} (this operator has one fused protocol: use auto)",
                        to_string(options.fused_algorithm)));
  // The profile is read (and an explicitly named one that is missing or corrupt refused) here,
  // before any communication; predictions wait for the first Auto call.
  if (model::Profile p; model::resolve_profile(options.profile, p)) profile_ = std::move(p);
  blas_single_threaded();
  compute_stream = device.create_stream(Stream::kNormal);
  comm_stream = device.create_stream(Stream::kHigh);
  shaped_compute = compute_stream;
  shaped_comm = comm_stream;
  if (options.shaped.policy == ShapedPolicy::CuMask) {
    const int free = options.shaped.free_cus, cus = device.num_cus();
    if (free < 1 || free >= cus)
      invalid(
          fmt::format("shaped.free_cus = {} with policy cu_mask (must be 1..{}: the device has "
                      "{} CUs and compute needs at least one)",
                      free, cus - 1, cus));
    std::vector<int> comm_cus, compute_cus;
    for (int c = 0; c < cus; ++c)
      (c < free ? comm_cus : compute_cus).push_back(c);
    shaped_compute = device.create_stream(Stream::kNormal, compute_cus);
    shaped_comm = device.create_stream(Stream::kHigh, comm_cus);
  }
}

OpContext::~OpContext() {
  for (auto& [shape, type] : block_types_)
    MPI_Type_free(&type);
  proxy_.reset();
  segment_.reset();
  free_comm(mpi, !failure_.empty());  // a failed call's stale messages must not reach the next
}

void OpContext::invalid(const std::string& what) const {
  throw Error(ErrorCode::InvalidArgument, fmt::format("{}: {}", info.name, what));
}

void OpContext::agree(std::initializer_list<const char*> names,
                      std::vector<long long> values) const {
  agree_across_ranks(comm, info.name, names, std::move(values));
}

std::size_t OpContext::min_across_ranks(std::size_t value) const {
  return detail::min_across_ranks(comm, value);
}

std::string OpContext::kernel_name(std::string_view phase) const {
  return fmt::format("{}.{}", info.trace, phase);
}

std::size_t OpContext::wg_slots() const {
  return static_cast<std::size_t>(device.num_cus()) * device.wg_slots_per_cu();
}

std::vector<int> OpContext::destination_order(bool remote_first) const {
  return detail::destination_order(topo, remote_first);
}

std::size_t OpContext::tag_upper_bound() const {
  void* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm.mpi, MPI_TAG_UB, &tag_ub, &found);
  return found ? static_cast<std::size_t>(*static_cast<int*>(tag_ub)) : 32767;
}

std::vector<int> OpContext::source_order() const {
  return detail::source_order(topo);
}

void OpContext::map_segment(const SegmentLayout& layout) {
  mpi_check(MPI_Comm_dup(comm.mpi, &mpi), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
  segment_ = std::make_unique<SymmetricBuffer>(comm, layout.size());
  if (spans_nodes()) proxy_ = std::make_unique<Proxy>(mpi, comm.timeout_s, info.name);
}

std::vector<TileFlags> OpContext::flags_at(std::size_t offset, std::size_t count) const {
  std::vector<TileFlags> flags;
  for (int l = 0; l < topo.local_size; ++l)
    flags.emplace_back(segment_->segment(l) + offset, count);
  return flags;
}

MPI_Datatype OpContext::block_type(std::size_t rows, std::size_t cols, std::size_t ld) {
  const auto key = std::make_tuple(rows, cols, ld);
  if (auto it = block_types_.find(key); it != block_types_.end()) return it->second;
  MPI_Datatype type;
  mpi_check(MPI_Type_vector(static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(ld),
                            MPI_FLOAT, &type),
            "MPI_Type_vector");
  mpi_check(MPI_Type_commit(&type), "MPI_Type_commit");
  block_types_.emplace(key, type);
  return type;
}

void OpContext::note_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // Argument errors and mismatches raised before tiles move (every rank's in verify mode, this
    // rank's own checks without it), and a collective algorithm that declines the call (chosen
    // before it communicates, alike on every rank: e.g. OpOptions::algorithm = "shm" across
    // nodes), leave the context usable; any error once tiles move does not.
    if (tiles_moving_ ||
        (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Mismatch &&
         e.code() != ErrorCode::InvalidUsage && e.code() != ErrorCode::NotSupported))
      failure_ = e.what();
  } catch (const std::exception& e) {
    failure_ = e.what();
  } catch (...) {
    failure_ = "an unknown exception";
  }
  if (!failure_.empty()) comm.mark_failed(failure_);
}

void OpContext::refuse_if_failed() const {
  if (failure_.empty()) return comm.refuse_if_failed(info.name);
  throw Error(ErrorCode::InvalidUsage,
              fmt::format("{}: an earlier call failed ({}); this context cannot run again (its "
                          "peers are out of step and MPI requests may be pending): abandon it and "
                          "its communicator, or MPI_Abort",
                          info.name, failure_));
}

void OpContext::verify(Mode mode, std::array<std::uint64_t, 3> shape, std::size_t kind) {
  verify_op_call(comm, verify_kinds_.at(kind), shape, to_string(mode));
}

void OpContext::run_compute(std::size_t tiles,
                            const std::function<void(std::size_t tile)>& compute) {
  if (tiles == 0) return;
  compute_stream.launch({kernel_name("compute"), {tiles, 1}, 0},
                        [&compute](const WorkgroupContext& wg) { compute(wg.id); });
  compute_stream.synchronize();
}

void OpContext::settle_auto(AutoMode& state) {
  std::vector<double>& t = state.samples();
  allreduce(communicator, t.data(), t.data(), t.size(), DataType::Float64, ReduceOp::Max);
  // Every rank has the same numbers now, so every rank makes the same decision. (After an
  // extension the earlier samples are maxima already: the next AllReduce leaves them as they are.)
  const Mode winner = choose_auto_mode(t, state.sample_modes());
  double trial_seconds = 0;
  for (double x : t)
    trial_seconds += x;
  if (state.should_extend(auto_choice_is_clear(t, state.sample_modes(), winner), trial_seconds))
    state.extend();
  else
    state.settle(winner);
}

model::Layout OpContext::model_layout() const {
  return {topo.size, topo.num_nodes, device.num_cus(), device.wg_slots_per_cu()};
}

void OpContext::plan_auto(std::size_t kind) {
  auto_planned_.at(kind) = true;
  const std::optional<model::OpShape>& shape = model_shapes_.at(kind);
  double v[4] = {0, 0, 0, 1};  // predictions, then "no profile here"
  if (profile_ && shape) {
    const model::Prediction p = model::predict(*profile_, *shape, model_layout(), options);
    v[0] = p.sequential;
    v[1] = p.shaped;
    v[2] = p.fused;
    v[3] = 0;
  }
  allreduce(communicator, v, v, 4, DataType::Float64, ReduceOp::Max);
  if (v[3] > 0) return;  // some rank has no profile (or no shape): every rank measures
  predictions_.at(kind) = std::array<double, 3>{v[0], v[1], v[2]};
  const model::ModelChoice c = model::choose_from_model(*predictions_.at(kind));
  AutoMode& state = autos_.at(kind);
  if (c.settle)
    state.settle(*c.settle);
  else
    state.set_candidates(c.candidates);
}

void OpContext::run_nonblocking(const ShapedChunks& plan) {
  // What a framework does with non-blocking collectives: every chunk's compute kernel is queued
  // at once on every CU (no shaping); the host waits for each chunk's event in turn and posts its
  // collective to a progress thread, which runs them in order while later chunks compute.
  const std::string compute_name = kernel_name("compute.chunk");
  std::vector<Event> computed(plan.chunks);
  for (std::size_t c = 0; c < plan.chunks; ++c) {
    if (const std::size_t tiles = plan.tiles(c); tiles > 0)
      compute_stream.launch({compute_name, {tiles, 1}, 0},
                            [&plan, c](const WorkgroupContext& wg) { plan.compute(c, wg.id); });
    computed[c] = compute_stream.record();
  }
  if (!host_progress_) host_progress_ = std::make_unique<ProgressQueue>();
  std::mutex mu;
  std::condition_variable cv;
  std::size_t posted = 0, finished = 0;
  std::exception_ptr first_error;
  auto wait_posted = [&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return finished == posted; });
  };
  try {
    for (std::size_t c = 0; c < plan.chunks; ++c) {
      computed[c].synchronize();
      {
        std::lock_guard lock(mu);
        if (first_error) break;  // a collective failed: post no more
        ++posted;
      }
      host_progress_->run_async([&plan, c] { plan.communicate(c); },
                                [&](std::exception_ptr e) {
                                  std::lock_guard lock(mu);
                                  if (e && !first_error) first_error = e;
                                  ++finished;
                                  cv.notify_all();
                                });
    }
  } catch (...) {
    wait_posted();  // the posted collectives use this frame's state
    compute_stream.synchronize();
    throw;
  }
  wait_posted();
  compute_stream.synchronize();
  if (first_error) std::rethrow_exception(first_error);
}

void OpContext::run_shaped(const ShapedChunks& plan) {
  if (options.shaped.policy == ShapedPolicy::NonBlocking) return run_nonblocking(plan);
  // Lds: compute kernels shaped by LDS on every CU. CuMask: no LDS, the masks keep them apart.
  const std::size_t lds = options.shaped.policy == ShapedPolicy::Lds
                              ? shaped_lds_bytes(device, options.shaped.free_cus)
                              : 0;
  const std::string compute_name = kernel_name("compute.chunk");
  const std::string comm_name = kernel_name("collective.chunk");
  for (std::size_t c = 0; c < plan.chunks; ++c) {
    // A chunk with nothing to compute on this rank still takes part in the chunk's collective.
    if (const std::size_t tiles = plan.tiles(c); tiles > 0)
      shaped_compute.launch({compute_name, {tiles, 1}, lds},
                            [&plan, c](const WorkgroupContext& wg) { plan.compute(c, wg.id); });
    shaped_comm.wait(shaped_compute.record());
    shaped_comm.launch({comm_name, {1, 1}, 0},
                       [&plan, c](const WorkgroupContext&) { plan.communicate(c); });
  }
  shaped_compute.synchronize();
  shaped_comm.synchronize();
}

}  // namespace tilecomm::detail
