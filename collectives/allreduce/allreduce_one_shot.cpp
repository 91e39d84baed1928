// AllReduce one-shot: every rank stages its input in its shared half, and every rank reduces all
// local ranks' copies, in rank order, into its own output. One synchronisation per chunk; each
// rank reads (p - 1) * n remote bytes, so this is the small-message path. Chunks alternate between
// the two halves of the segment (ShmSteps), so no rank waits for readers before writing again.
// Messages up to kLLMaxBytes go through the LL lines: one cache-line transfer per line read.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/reduce.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

/// Largest chunk staged per step (a whole half at most).
constexpr std::size_t kOneShotChunkBytes = std::size_t{1} << 20;

/// One LL step: publish the input in my LL lines, copy every peer's out (each line as it lands),
/// reduce in rank order.
void run_ll(ShmSteps& steps, const CollArgs& a) {
  const Topology& topo = steps.topology();
  const std::size_t bytes = a.bytes();
  thread_local std::vector<std::byte> scratch;
  scratch.resize(topo.local_size * kLLMaxBytes);
  thread_local std::vector<const void*> srcs;
  srcs.resize(topo.local_size);
  steps.begin();
  steps.ll_write(a.send, bytes);
  steps.ll_publish();
  for (int l = 0; l < topo.local_size; ++l) {
    std::byte* into = scratch.data() + l * kLLMaxBytes;
    if (l != topo.local_rank) {
      steps.ll_read(l, into, bytes, "allreduce(one_shot)");
    } else if (a.in_place) {  // reduce_n's dst may alias only its first source
      std::memcpy(into, a.send, bytes);
    } else {
      into = static_cast<std::byte*>(const_cast<void*>(a.send));
    }
    srcs[l] = into;
  }
  reduce_n(a.recv, srcs.data(), topo.local_size, a.count, a.dtype, a.op);
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  if (comm.topo.local_size == 1) {
    if (!a.in_place) std::memcpy(a.recv, a.send, a.bytes());
    return;
  }
  ShmSteps steps(comm.segment);
  if (a.bytes() <= kLLMaxBytes) return run_ll(steps, a);
  const std::size_t elem = a.elem();
  const std::size_t chunk = stream_chunk_elems(steps, elem, kOneShotChunkBytes, 1);
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  for (std::size_t done = 0; done < a.count; done += chunk) {
    const std::size_t n = std::min(chunk, a.count - done);
    steps.begin();
    std::memcpy(steps.mine(), send + done * elem, n * elem);
    rs_phase(steps, 0, n, recv + done * elem, a.dtype, a.op, "allreduce(one_shot)");
  }
}

}  // namespace

extern const Algorithm allreduce_one_shot{"one_shot", Collective::AllReduce, shm_single_node, run,
                                          true};

}  // namespace tilecomm::detail
