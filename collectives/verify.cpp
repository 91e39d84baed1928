// Verify mode: fingerprints exchanged point-to-point (so a timeout can name the ranks that never
// made the call), compared identically on every rank, so every rank raises the same error; and
// the registry of the kinds of call operators add.
#include "collectives/verify.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "collectives/algorithm.hpp"
#include "collectives/comm_impl.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kFingerprintTag = 1;

// ---- kinds of call --------------------------------------------------------------------------

struct CallKindInfo {
  std::string name;
  std::array<std::string, 3> shape_names;  // empty names are not printed
};

// Operators' kinds, by id. Entries are never removed, so a found entry stays valid.
struct CallKindRegistry {
  std::mutex mutex;
  std::map<CallKindId, CallKindInfo> kinds;
};

CallKindRegistry& registry() {
  static CallKindRegistry r;
  return r;
}

bool is_collective(CallKindId k) {
  return k <= static_cast<CallKindId>(Collective::Broadcast);
}
bool has_op(CallKindId k) {
  return k == static_cast<CallKindId>(Collective::AllReduce) ||
         k == static_cast<CallKindId>(Collective::ReduceScatter);
}

// The collectives' kinds, then the registered ones; unknown ids (an operator this process never
// ran) get a generic name.
CallKindInfo kind_info(CallKindId k) {
  if (is_collective(k)) {
    static const char* const kShape[] = {"count", "recv_count", "send_count", "count", "", "count"};
    return {std::string(to_string(static_cast<Collective>(k))),
            {kShape[k], k == static_cast<CallKindId>(Collective::Broadcast) ? "root" : "", ""}};
  }
  CallKindRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  if (auto it = r.kinds.find(k); it != r.kinds.end()) return it->second;
  return {fmt::format("operator #{}", k), {"shape0", "shape1", "shape2"}};
}

// 32-bit FNV-1a: the same in every process.
std::uint32_t name_hash(std::string_view name) {
  std::uint32_t h = 2166136261u;
  for (char ch : name) {
    h ^= static_cast<unsigned char>(ch);
    h *= 16777619u;
  }
  return h;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// The term of "src sends `count` elements to dst": summed with + on the sender and - on the
// receiver, the terms cancel over all ranks exactly when every pair agrees (up to hash collisions).
std::uint64_t pair_term(int src, int dst, std::size_t count) {
  return mix(mix((static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst)) ^
             count);
}

// What differs between two fingerprints ("count", "operation", ...); empty when they agree.
std::string difference(const CallFingerprint& a, const CallFingerprint& b) {
  if (a.kind != b.kind) return "operation";
  std::vector<std::string> what;
  if (a.seq != b.seq) what.emplace_back("call number");
  if (a.dtype != b.dtype) what.emplace_back("dtype");
  if (a.op != b.op) what.emplace_back("op");
  for (int i = 0; i < 3; ++i)
    if (a.shape[i] != b.shape[i]) {
      const std::string name = kind_info(a.kind).shape_names[i];
      what.push_back(name.empty() ? "shape" : name);
    }
  if (std::memcmp(a.algo, b.algo, sizeof a.algo) != 0)
    what.emplace_back(is_collective(a.kind) ? "algorithm" : "mode");
  if (a.order != b.order) what.emplace_back("reduce order");
  return fmt::format("{}", fmt::join(what, ", "));
}

// Drops the requests still pending after a failed exchange: the communicator is out of step now,
// and no late fingerprint may land in memory that is gone. `receives` come first in `reqs`.
void drop_pending(std::vector<MPI_Request>& reqs, std::size_t receives) {
  for (std::size_t i = 0; i < reqs.size(); ++i)
    if (reqs[i] != MPI_REQUEST_NULL) {
      if (i < receives) MPI_Cancel(&reqs[i]);
      MPI_Request_free(&reqs[i]);
    }
}

// Sends `mine` to every peer and receives theirs, with the communicator's deadline. On timeout
// names the ranks whose fingerprints did not arrive, on this rank.
std::vector<CallFingerprint> exchange(CommImpl& comm, const CallFingerprint& mine) {
  const Topology& topo = comm.topo;
  std::vector<CallFingerprint> all(topo.size);
  all[topo.rank] = mine;
  if (topo.size == 1) return all;
  // The send buffer outlives this call: a send still pending after a timeout may read it.
  std::byte* sendbuf = comm.verifier.send_buffer();
  std::memcpy(sendbuf, &mine, sizeof mine);
  std::vector<MPI_Request> reqs;  // receives first, in peer order, then sends
  std::vector<int> peer_of;
  for (int p = 0; p < topo.size; ++p)
    if (p != topo.rank) {
      reqs.push_back(MPI_REQUEST_NULL);
      peer_of.push_back(p);
      mpi_check(MPI_Irecv(&all[p], sizeof(CallFingerprint), MPI_BYTE, p, kFingerprintTag,
                          comm.verifier.mpi(), &reqs.back()),
                "MPI_Irecv(verify mode)");
    }
  const std::size_t receives = reqs.size();
  for (int p : peer_of) {
    reqs.push_back(MPI_REQUEST_NULL);
    mpi_check(MPI_Isend(sendbuf, sizeof(CallFingerprint), MPI_BYTE, p, kFingerprintTag,
                        comm.verifier.mpi(), &reqs.back()),
              "MPI_Isend(verify mode)");
  }
  std::vector<int> idx(reqs.size());
  auto done = [&] {
    int n = 0;
    mpi_check(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, idx.data(),
                           MPI_STATUSES_IGNORE),
              "MPI_Testsome(verify mode)");
    return n == MPI_UNDEFINED || std::all_of(reqs.begin(), reqs.end(),
                                             [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
  };
  try {
    wait_until(done, comm.timeout_s, [&] {
      std::vector<int> missing;
      for (std::size_t i = 0; i < receives; ++i)
        if (reqs[i] != MPI_REQUEST_NULL) missing.push_back(peer_of[i]);
      return fmt::format(
          "call #{} ({}): rank {} waited for rank{} {} to make this call (a rank that exited, "
          "skipped this call, or is stuck in an earlier one)",
          mine.seq, describe(mine), topo.rank, missing.size() == 1 ? "" : "s",
          fmt::join(missing, ", "));
    });
  } catch (...) {
    drop_pending(reqs, receives);
    throw;
  }
  return all;
}

// All-to-Allv: every rank's send and recv counts, to name a pair that disagrees.
[[noreturn]] void report_alltoallv_pair(CommImpl& comm, const CallFingerprint& mine,
                                        const CollArgs& a) {
  const int p = comm.topo.size;
  std::vector<unsigned long long> local(2 * p), all(2 * static_cast<std::size_t>(p) * p);
  for (int q = 0; q < p; ++q) {
    local[q] = a.send_layout.counts[q];
    local[p + q] = a.recv_layout.counts[q];
  }
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(local.data(), 2 * p, MPI_UNSIGNED_LONG_LONG, all.data(), 2 * p,
                           MPI_UNSIGNED_LONG_LONG, comm.verifier.mpi(), &req),
            "MPI_Iallgather(verify mode)");
  comm.wait_all(&req, 1, "verify mode: All-to-Allv counts");
  for (int src = 0; src < p; ++src)
    for (int dst = 0; dst < p; ++dst) {
      const auto sent = all[2 * std::size_t(src) * p + dst];
      const auto expected = all[2 * std::size_t(dst) * p + p + src];
      if (sent != expected)
        throw Error(
            ErrorCode::Mismatch,
            fmt::format("call #{} ({}): rank {} sends {} elements to rank {}, which expects "
                        "{} from it (send_layout.counts[{}] on rank {} vs "
                        "recv_layout.counts[{}] on rank {})",
                        mine.seq, describe(mine), src, sent, dst, expected, dst, src, src, dst));
    }
  throw Error(
      ErrorCode::Internal,
      fmt::format("call #{}: All-to-Allv count hashes differ but every pair agrees", mine.seq));
}

}  // namespace

CallKindId register_call_kind(std::string_view name, std::array<const char*, 3> shape_names) {
  constexpr std::uint32_t kOperatorIds = 65536 - kFirstOperatorKind;
  const auto id = static_cast<CallKindId>(kFirstOperatorKind + name_hash(name) % kOperatorIds);
  CallKindInfo info{std::string(name), {}};
  for (int i = 0; i < 3; ++i)
    info.shape_names[i] = shape_names[i] ? shape_names[i] : "";
  CallKindRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  auto [it, added] = r.kinds.emplace(id, info);
  if (!added && (it->second.name != info.name || it->second.shape_names != info.shape_names))
    throw Error(ErrorCode::Internal,
                fmt::format("verify mode: call kind '{}' (shape {}) clashes with '{}' (shape {}) "
                            "registered before: rename one",
                            name, fmt::join(info.shape_names, "/"), it->second.name,
                            fmt::join(it->second.shape_names, "/")));
  return id;
}

std::string describe(const CallFingerprint& fp) {
  const CallKindInfo info = kind_info(fp.kind);
  std::string s = info.name;
  if (is_collective(fp.kind)) {
    s += fmt::format(" {}", to_string(static_cast<DataType>(fp.dtype)));
    if (has_op(fp.kind)) s += fmt::format(" {}", to_string(static_cast<ReduceOp>(fp.op)));
  }
  for (int i = 0; i < 3; ++i)
    if (!info.shape_names[i].empty()) s += fmt::format(" {}={}", info.shape_names[i], fp.shape[i]);
  const std::string_view algo(fp.algo, strnlen(fp.algo, sizeof fp.algo));
  s += fmt::format(" {}={}", is_collective(fp.kind) ? "algo" : "mode", algo);
  if (fp.order == static_cast<std::uint8_t>(ReduceOrder::Canonical)) s += " order=canonical";
  return s;
}

CallFingerprint fingerprint_of(const CollArgs& a, std::string_view requested, int rank, int size,
                               ReduceOrder order) {
  CallFingerprint fp;
  fp.kind = static_cast<CallKindId>(a.coll);
  fp.dtype = static_cast<std::uint8_t>(a.dtype);
  fp.op = has_op(fp.kind) ? static_cast<std::uint8_t>(a.op) : 0;
  if (a.coll != Collective::AllToAllv) {
    fp.shape[0] = a.count;
    if (a.coll == Collective::Broadcast) fp.shape[1] = static_cast<std::uint64_t>(a.root);
  } else if (a.send_layout.counts.size() == static_cast<std::size_t>(size) &&
             a.recv_layout.counts.size() == static_cast<std::size_t>(size)) {
    for (int q = 0; q < size; ++q)
      fp.balance +=
          pair_term(rank, q, a.send_layout.counts[q]) - pair_term(q, rank, a.recv_layout.counts[q]);
  }
  if (requested.empty()) requested = algorithm_override(a.coll);
  if (requested.empty()) requested = "auto";
  std::memcpy(fp.algo, requested.data(), std::min(requested.size(), sizeof fp.algo - 1));
  fp.order = static_cast<std::uint8_t>(order);
  return fp;
}

Verifier::Verifier(MPI_Comm world, bool requested) {
  int wanted = requested ? 1 : 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &wanted, 1, MPI_INT, MPI_MAX, world), "MPI_Allreduce");
  if (wanted == 0) return;
  mpi_check(MPI_Comm_dup(world, &mpi_), "MPI_Comm_dup(verify mode)");
  MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN);
}

Verifier::~Verifier() {
  free_comm(mpi_, retired_);
}

void verify_call(CommImpl& comm, CallFingerprint fp, const CollArgs* args) {
  if (!comm.verifier.enabled()) return;
  fp.seq = comm.verifier.next_call();
  const std::vector<CallFingerprint> all = exchange(comm, fp);

  // 1. The call itself: the first rank that differs from rank 0.
  for (int r = 1; r < comm.topo.size; ++r) {
    const std::string diff = difference(all[0], all[r]);
    if (diff.empty()) continue;
    std::string hint = diff == "operation"
                           ? " -- different operations: a rank skipped or added a call before "
                             "this one, or they call in a different order"
                           : " -- they differ in " + diff;
    throw Error(ErrorCode::Mismatch, fmt::format("call #{}: rank 0: {}; rank {}: {}{}", fp.seq,
                                                 describe(all[0]), r, describe(all[r]), hint));
  }
  // 2. All-to-Allv: each rank's send counts must be what its peers expect to receive.
  if (fp.kind == static_cast<CallKindId>(Collective::AllToAllv) && args != nullptr) {
    std::uint64_t sum = 0;
    for (const CallFingerprint& f : all)
      sum += f.balance;
    if (sum != 0) report_alltoallv_pair(comm, fp, *args);
  }
}

void verify_op_call(CommImpl& comm, CallKindId kind, std::array<std::uint64_t, 3> shape,
                    std::string_view mode) {
  if (!comm.verifier.enabled()) return;
  CallFingerprint fp;
  fp.kind = kind;
  for (int i = 0; i < 3; ++i)
    fp.shape[i] = shape[i];
  std::memcpy(fp.algo, mode.data(), std::min(mode.size(), sizeof fp.algo - 1));
  verify_call(comm, fp);
}

}  // namespace tilecomm::detail
