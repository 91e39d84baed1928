#pragma once
// Verify mode (CommConfig::check = 1 or TILECOMM_CHECK=1): before a collective or an operator
// call runs, every rank sends a 64-byte fingerprint of the call (operation, dtype, op,
// counts/shape, algorithm or mode as requested, call number) to every other rank on a private
// duplicated communicator, with the communicator's deadline. On any difference every rank raises
// the same Error(Mismatch) naming the first differing rank next to rank 0. A rank that never
// makes the call is named in an Error(Timeout) on every rank that waited. Calls are verified after
// local validation: a call a rank rejects itself (bad argument, unknown or declining algorithm)
// raises there before any communication and does not count as a call.
//
// Off (the default) the hooks cost one branch. On, a call costs one point-to-point exchange of
// 64 bytes with each peer (see docs/failure.md for the measured overhead).

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tilecomm/collectives.hpp"

namespace tilecomm::detail {

struct CollArgs;
struct CommImpl;

/// What is being called: a collective (its Collective value) or an operator (an id from
/// register_call_kind, at least kFirstOperatorKind).
using CallKindId = std::uint16_t;
inline constexpr CallKindId kFirstOperatorKind = 16;

/// Registers an operator's kind for verify mode: `name` names it in messages ("GemvAllReduce"),
/// `shape_names` the up to three shape values its fingerprint carries (null or "" when unused).
/// Thread-safe and idempotent per name. The id is derived from the name alone, so it is the same
/// in every process whatever order the operators first run in; two names that map to the same id
/// (or one name registered with different shape names) raise Error(Internal).
CallKindId register_call_kind(std::string_view name, std::array<const char*, 3> shape_names);

/// One call, in 64 bytes. Pointers are not part of it (they differ legitimately across ranks).
struct CallFingerprint {
  std::uint64_t seq = 0;        ///< call number on the communicator, from 1 (set by verify_call)
  std::uint64_t shape[3] = {};  ///< counts / shape, must be equal on every rank (names: per kind)
  std::uint64_t balance = 0;    ///< All-to-Allv: sums to 0 over ranks when counts pair up
  CallKindId kind = 0;
  std::uint8_t dtype = 0, op = 0;
  std::uint8_t order = 0;  ///< ReduceOrder of a collective (ranks asking for different orders
                           ///< may choose different algorithms)
  char algo[19] = {};      ///< algorithm (collectives) or mode (operators) as requested
};
static_assert(sizeof(CallFingerprint) == 64, "the fingerprint is one cache line");

/// "allreduce float32 sum count=1000 algo=auto" (no call number).
std::string describe(const CallFingerprint& fp);

/// The fingerprint of a collective call: `requested` is options.algorithm, else the
/// TILECOMM_<COLLECTIVE> override, else "auto". All-to-Allv fills `balance` from its layouts.
CallFingerprint fingerprint_of(const CollArgs& args, std::string_view requested, int rank, int size,
                               ReduceOrder order = ReduceOrder::Any);

/// Verify-mode state of a communicator.
class Verifier {
 public:
  /// Collective over `world`: verify mode is on for every rank when any rank `requested` it (a
  /// rank that skipped the exchange would hang); then duplicates `world` for the fingerprints.
  Verifier(MPI_Comm world, bool requested);
  /// Frees the duplicate, unless retire() was called (free_comm()).
  ~Verifier();
  Verifier(const Verifier&) = delete;
  Verifier& operator=(const Verifier&) = delete;

  bool enabled() const { return mpi_ != MPI_COMM_NULL; }
  /// Private duplicate of the communicator carrying only fingerprints (MPI_COMM_NULL when off).
  MPI_Comm mpi() const { return mpi_; }
  /// Numbers a call: 1, 2, ... (the same on every rank while they agree; calling thread only).
  std::uint64_t next_call() { return ++calls_; }
  /// Send buffer of the last fingerprint: 64 bytes that outlive a timed-out exchange.
  std::byte* send_buffer() { return send_buffer_; }
  /// The communicator failed: fingerprints may still be in flight, so the duplicate is never freed.
  void retire() { retired_ = true; }

 private:
  MPI_Comm mpi_ = MPI_COMM_NULL;
  std::uint64_t calls_ = 0;
  bool retired_ = false;
  alignas(64) std::byte send_buffer_[sizeof(CallFingerprint)] = {};
};

/// The verification itself (no-op when verify mode is off). Numbers the call, exchanges `fp` with
/// every rank, then raises, on every rank alike:
///  - Error(Mismatch) for the first rank whose fingerprint differs from rank 0's;
///  - Error(Mismatch) naming a sender/receiver pair whose All-to-Allv counts disagree (`args`);
///  - Error(Timeout) naming the ranks whose fingerprints did not arrive within comm.timeout_s.
void verify_call(CommImpl& comm, CallFingerprint fp, const CollArgs* args = nullptr);

/// The hook of an operator's run(): verifies kind, shape and mode across ranks (no-op when off).
void verify_op_call(CommImpl& comm, CallKindId kind, std::array<std::uint64_t, 3> shape,
                    std::string_view mode);

}  // namespace tilecomm::detail
