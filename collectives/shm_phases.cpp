// Steps over double-buffered shared halves, and the reduce-scatter / all-gather phases.
#include "collectives/shm_phases.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "collectives/reduce.hpp"

namespace tilecomm::detail {

namespace {
constexpr std::size_t kLine = 64;
}

std::string shm_single_node(const CommImpl& comm, const CollArgs&) {
  if (comm.num_nodes != 1)
    return fmt::format(
        "shared memory needs every rank on one node (the communicator spans {} nodes)",
        comm.num_nodes);
  return shm_fits(comm);
}

std::string shm_fits(const CommImpl& comm) {
  const std::size_t need = 2 * kLine * static_cast<std::size_t>(comm.local_size + 1);
  if (comm.shm_bytes < need)
    return fmt::format("shm_bytes = {} is too small for {} local ranks (needs >= {})",
                       comm.shm_bytes, comm.local_size, need);
  return {};
}

ShmSteps::ShmSteps(CommImpl& comm)
    : comm_(comm),
      half_(comm.shm_bytes / 2 / kLine * kLine),
      // Only this rank writes its step flag, so its last published step is simply read back.
      step_(comm.flag(comm.local_rank, kShmStepFlag).load(std::memory_order_relaxed)) {}

void ShmSteps::begin() {
  ++step_;
}

void ShmSteps::exchange(const char* what) {
  comm_.post(comm_.local_rank, kShmStepFlag, step_);
  for (int l = 0; l < comm_.local_size; ++l)
    if (l != comm_.local_rank) comm_.wait_flag(l, kShmStepFlag, step_, what);
}

Slices::Slices(std::size_t n_, int parts, std::size_t elem) : n(n_) {
  const std::size_t line = std::max<std::size_t>(1, kLine / elem);
  const std::size_t p = static_cast<std::size_t>(parts);
  per = ((n + p - 1) / p + line - 1) / line * line;
}

std::size_t Slices::begin(int j) const {
  return std::min(n, per * static_cast<std::size_t>(j));
}

std::size_t stream_chunk_elems(const ShmSteps& steps, std::size_t elem, std::size_t target_bytes,
                               int parts) {
  const std::size_t unit = kLine * static_cast<std::size_t>(parts);
  const std::size_t bytes = std::min(target_bytes, steps.half_bytes());
  return std::max<std::size_t>(1, bytes / unit) * unit / elem;
}

void rs_phase(ShmSteps& steps, std::size_t off, std::size_t count, void* dst, DataType dtype,
              ReduceOp op, const char* what) {
  steps.exchange(what);
  if (count == 0) return;
  const CommImpl& c = steps.comm();
  const void* srcs[CommImpl::kFlags];  // local ranks, in order
  std::vector<const void*> many;
  const void** s = srcs;
  if (c.local_size > CommImpl::kFlags) {
    many.resize(c.local_size);
    s = many.data();
  }
  for (int l = 0; l < c.local_size; ++l)
    s[l] = steps.peer(l) + off;
  reduce_n(dst, s, c.local_size, count, dtype, op);
}

}  // namespace tilecomm::detail
