// AllReduce two-shot = ReduceScatter then AllGather, chunk by chunk through the shared halves.
// For each chunk (cache-sized, see kStreamChunkBytes) split into p slices:
//   1. reduce-scatter: every rank stages the chunk in its half; rank j reduces slice j of every
//      local rank, in rank order, straight into its half of the next step;
//   2. all-gather: every rank copies every reduced slice into its output.
// Two synchronisations per chunk whatever p is; each rank reduces only n / p.
#include <algorithm>
#include <cstring>

#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  if (comm.topo.local_size == 1) {
    if (!a.in_place) std::memcpy(a.recv, a.send, a.bytes());
    return;
  }
  ShmSteps steps(comm.segment);
  const int p = comm.topo.local_size, me = comm.topo.local_rank;
  const std::size_t elem = a.elem();
  const std::size_t chunk = stream_chunk_elems(steps, elem, kStreamChunkBytes, p);
  const bool streaming = a.bytes() >= kNonTemporalBytes;
  const auto* send = static_cast<const std::byte*>(a.send);
  auto* recv = static_cast<std::byte*>(a.recv);
  for (std::size_t done = 0; done < a.count; done += chunk) {
    const std::size_t n = std::min(chunk, a.count - done);
    const Slices slices(n, p, elem);
    // Reduce-scatter: my slice of the reduced chunk lands where the all-gather step reads it.
    steps.begin();
    // Stage what the others reduce; my own slice is read from send directly.
    const std::byte* in = send + done * elem;
    const std::size_t lo = slices.begin(me) * elem, hi = slices.begin(me + 1) * elem;
    std::memcpy(steps.mine(), in, lo);
    std::memcpy(steps.mine() + hi, in + hi, n * elem - hi);
    rs_phase(steps, lo, slices.size(me), steps.next_mine() + lo, a.dtype, a.op,
             "allreduce(two_shot) reduce-scatter", in + lo);
    // All-gather.
    steps.begin();
    ag_phase(
        steps, p,
        [&](int j, const std::byte* half) {
          copy_out(recv + (done + slices.begin(j)) * elem, half + slices.begin(j) * elem,
                   slices.size(j) * elem, streaming);
        },
        "allreduce(two_shot) all-gather");
  }
  if (streaming) store_fence();
}

}  // namespace

extern const Algorithm allreduce_two_shot{"two_shot", Collective::AllReduce, shm_single_node, run,
                                          true};

}  // namespace tilecomm::detail
