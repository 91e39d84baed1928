// Steps over double-buffered shared halves, and the reduce-scatter / all-gather phases.
#include "collectives/shm_phases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "collectives/reduce.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/env.hpp"

namespace tilecomm::detail {

namespace {
constexpr std::size_t kLine = 64;
}

void copy_out(void* dst, const void* src, std::size_t bytes, bool streaming) {
#if defined(__x86_64__)
  if (streaming && bytes >= 256) {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
    std::memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    const std::size_t body = bytes / 64 * 64;
    for (std::size_t i = 0; i < body; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    std::memcpy(d + body, s + body, bytes - body);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void store_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

std::string shm_single_node(const CommImpl& comm, const CollArgs&) {
  if (comm.topo.num_nodes != 1)
    return fmt::format(
        "shared memory needs every rank on one node (the communicator spans {} nodes)",
        comm.topo.num_nodes);
  return shm_fits(comm.segment);
}

std::string shm_fits(const SharedSegment& segment) {
  // The largest node decides, so that every rank gives the same answer on uneven nodes.
  const std::size_t most = static_cast<std::size_t>(segment.topology().largest_node_size());
  const std::size_t need = 2 * (kLLBytes + kLine * (most + 1));
  if (segment.data_bytes() < need)
    return fmt::format("shm_bytes = {} is too small for {} ranks on a node (needs >= {})",
                       segment.data_bytes(), most, need);
  return {};
}

namespace {
// Online CPUs, read once (get_nprocs reads /sys).
int online_cpus() {
  static const int n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}
}  // namespace

ShmSteps::ShmSteps(SharedSegment& segment)
    : segment_(segment),
      topo_(segment.topology()),
      spin_us_(topo_.local_size > online_cpus() ? std::min(env().spin_us, kOversubscribedSpinUs)
                                                : env().spin_us),
      half_(segment.data_bytes() / 2 / kLine * kLine),
      // Only this rank writes its step flag, so its last published step is simply read back.
      step_(segment.flag(topo_.local_rank, kShmStepFlag).load(std::memory_order_relaxed)) {}

void ShmSteps::begin() {
  ++step_;
}

void ShmSteps::exchange(const char* what) {
  segment_.post(topo_.local_rank, kShmStepFlag, step_);
  for (int l = 0; l < topo_.local_size; ++l)
    if (l != topo_.local_rank) {
      auto f = segment_.flag(l, kShmStepFlag);
      wait_for([&] { return f.load(std::memory_order_acquire) >= step_; },
               [&] {
                 return fmt::format(
                     "{}: rank {} waited for rank {} (step flag = {}, expected >= {})", what,
                     topo_.rank, topo_.local_to_world[l], f.load(), step_);
               });
    }
}

void ShmSteps::ll_write(const void* src, std::size_t bytes, std::size_t first_line) {
  std::byte* line = base(topo_.local_rank, step_) + first_line * kLine;
  const auto* s = static_cast<const std::byte*>(src);
  for (std::size_t off = 0; off < bytes; off += kLLPayload, line += kLine) {
    if (bytes - off >= kLLPayload) {
      std::memcpy(line, s + off, kLLPayload);  // constant size: inlined
    } else {
      std::memcpy(line, s + off, bytes - off);
    }
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(line + kLLPayload))
        .store(step_, std::memory_order_release);
  }
}

void ShmSteps::ll_publish() const {
  segment_.post(topo_.local_rank, kShmStepFlag, step_);
}

void ShmSteps::ll_read(int l, void* dst, std::size_t bytes, const char* what,
                       std::size_t first_line) const {
  std::byte* line = base(l, step_) + first_line * kLine;
  auto* d = static_cast<std::byte*>(dst);
  for (std::size_t off = 0; off < bytes; off += kLLPayload, line += kLine) {
    std::atomic_ref<std::uint64_t> tag(*reinterpret_cast<std::uint64_t*>(line + kLLPayload));
    if (tag.load(std::memory_order_acquire) < step_)
      wait_for([&] { return tag.load(std::memory_order_acquire) >= step_; },
               [&] {
                 return fmt::format(
                     "{}: rank {} waited for rank {} (LL line {} = {}, expected >= {})", what,
                     topo_.rank, topo_.local_to_world[l], off / kLLPayload, tag.load(), step_);
               });
    if (bytes - off >= kLLPayload) {
      std::memcpy(d + off, line, kLLPayload);
    } else {
      std::memcpy(d + off, line, bytes - off);
    }
  }
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
              ReduceOp op, const char* what, const void* own) {
  steps.exchange(what);
  if (count == 0) return;
  const Topology& topo = steps.topology();
  constexpr int kOnStack = 64;
  const void* srcs[kOnStack];  // local ranks, in order
  std::vector<const void*> many;
  const void** s = srcs;
  if (topo.local_size > kOnStack) {
    many.resize(topo.local_size);
    s = many.data();
  }
  for (int l = 0; l < topo.local_size; ++l)
    s[l] = steps.peer(l) + off;
  if (own) s[topo.local_rank] = own;
  reduce_n(dst, s, topo.local_size, count, dtype, op);
}

}  // namespace tilecomm::detail
