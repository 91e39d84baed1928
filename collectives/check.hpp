#pragma once
// Cross-rank call checking (TILECOMM_CHECK=1 or CommConfig::check = 1): before a collective or an
// operator call runs, every rank sends a 64-byte fingerprint of the call (operation, dtype, op,
// counts/shape, algorithm or mode as requested, call number) to every other rank on a private
// duplicated communicator, with the communicator's deadline. On any difference every rank raises
// the same Error(Mismatch) naming the first differing rank next to rank 0. A rank that never
// makes the call is named in an Error(Timeout) on every rank that waited. Calls are checked after
// local validation: a call a rank rejects itself (bad argument, unknown or declining algorithm)
// raises there before any communication and does not count as a call.
//
// Off (the default) the hooks cost one branch. On, a call costs one point-to-point exchange of
// 64 bytes with each peer (see docs/failure.md for the measured overhead).

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "collectives/comm_impl.hpp"

namespace tilecomm::detail {

struct CollArgs;

/// What is being called. Collectives keep their Collective value; operators follow.
enum class CallKind : std::uint8_t {
  AllReduce = 0,
  ReduceScatter,
  AllGather,
  AllToAll,
  AllToAllv,
  GemvAllReduce = 16,
  EmbeddingAllToAll,
  GemmAllToAll,
};

/// One call, in 64 bytes. Pointers are not part of it (they differ legitimately across ranks).
struct CallFingerprint {
  std::uint64_t seq = 0;        ///< call number on the communicator, from 1 (set by check_call)
  std::uint64_t shape[3] = {};  ///< counts / shape, must be equal on every rank (names: per kind)
  std::uint64_t balance = 0;    ///< All-to-Allv: sums to 0 over ranks when counts pair up
  CallKind kind = CallKind::AllReduce;
  std::uint8_t dtype = 0, op = 0;
  std::uint8_t reserved = 0;
  char algo[20] = {};  ///< algorithm (collectives) or mode (operators) as requested
};
static_assert(sizeof(CallFingerprint) == 64, "the fingerprint is one cache line");

/// "allreduce float32 sum count=1000 algo=auto" (no call number).
std::string describe(const CallFingerprint& fp);

/// The fingerprint of a collective call: `requested` is options.algorithm, else the
/// TILECOMM_<COLLECTIVE> override, else "auto". All-to-Allv fills `balance` from its layouts.
CallFingerprint fingerprint_of(const CollArgs& args, std::string_view requested, int rank,
                               int size);

/// The check itself (no-op when comm.check is off). Numbers the call, exchanges `fp` with every
/// rank, then raises, on every rank alike:
///  - Error(Mismatch) for the first rank whose fingerprint differs from rank 0's;
///  - Error(Mismatch) naming a sender/receiver pair whose All-to-Allv counts disagree (`args`);
///  - Error(Timeout) naming the ranks whose fingerprints did not arrive within comm.timeout_s.
void check_call(CommImpl& comm, CallFingerprint fp, const CollArgs* args = nullptr);

/// The hook of an operator's run(): checks kind, shape and mode across ranks (no-op when off).
void check_op_call(CommImpl& comm, CallKind kind, std::initializer_list<std::uint64_t> shape,
                   std::string_view mode);

}  // namespace tilecomm::detail
