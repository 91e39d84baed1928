// Cross-rank call checking: fingerprints exchanged point-to-point (so a timeout can name the ranks
// that never made the call), compared identically on every rank, so every rank raises the same
// error.
#include "collectives/check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "collectives/algorithm.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::detail {
namespace {

constexpr int kFingerprintTag = 1;

std::string_view kind_name(CallKind k) {
  switch (k) {
    case CallKind::AllReduce:
    case CallKind::ReduceScatter:
    case CallKind::AllGather:
    case CallKind::AllToAll:
    case CallKind::AllToAllv:
      return to_string(static_cast<Collective>(k));
    case CallKind::GemvAllReduce:
      return "GemvAllReduce";
    case CallKind::EmbeddingAllToAll:
      return "EmbeddingAllToAll";
    case CallKind::GemmAllToAll:
      return "GemmAllToAll";
  }
  return "?";
}

// Names of the shape fields of each kind; empty names are not printed.
std::array<const char*, 3> shape_names(CallKind k) {
  switch (k) {
    case CallKind::AllReduce:
      return {"count", "", ""};
    case CallKind::ReduceScatter:
      return {"recv_count", "", ""};
    case CallKind::AllGather:
      return {"send_count", "", ""};
    case CallKind::AllToAll:
      return {"count", "", ""};
    case CallKind::AllToAllv:
      return {"", "", ""};
    case CallKind::GemvAllReduce:
      return {"m", "tile_rows", ""};
    case CallKind::EmbeddingAllToAll:
      return {"dim", "global_batch", "tables"};
    case CallKind::GemmAllToAll:
      return {"k", "n", "experts"};
  }
  return {"shape0", "shape1", "shape2"};
}

bool is_collective(CallKind k) {
  return static_cast<int>(k) <= static_cast<int>(CallKind::AllToAllv);
}
bool has_op(CallKind k) {
  return k == CallKind::AllReduce || k == CallKind::ReduceScatter;
}

const std::string& env_override(Collective c) {
  const Env& e = env();
  switch (c) {
    case Collective::AllReduce:
      return e.allreduce;
    case Collective::ReduceScatter:
      return e.reduce_scatter;
    case Collective::AllGather:
      return e.allgather;
    default:
      return e.alltoall;
  }
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
  const auto names = shape_names(a.kind);
  for (int i = 0; i < 3; ++i)
    if (a.shape[i] != b.shape[i]) what.emplace_back(*names[i] ? names[i] : "shape");
  if (std::memcmp(a.algo, b.algo, sizeof a.algo) != 0)
    what.emplace_back(is_collective(a.kind) ? "algorithm" : "mode");
  return fmt::format("{}", fmt::join(what, ", "));
}

// Sends `mine` to every peer and receives theirs, with the communicator's deadline. On timeout
// names the ranks whose fingerprints did not arrive, on this rank.
std::vector<CallFingerprint> exchange(CommImpl& c, const CallFingerprint& mine) {
  std::vector<CallFingerprint> all(c.size);
  all[c.rank] = mine;
  if (c.size == 1) return all;
  // The send buffer outlives this call: a send still pending after a timeout may read it.
  std::memcpy(c.check_sendbuf, &mine, sizeof mine);
  std::vector<MPI_Request> reqs;  // receives first, in peer order, then sends
  std::vector<int> peer_of;
  for (int p = 0; p < c.size; ++p)
    if (p != c.rank) {
      reqs.push_back(MPI_REQUEST_NULL);
      peer_of.push_back(p);
      mpi_check(MPI_Irecv(&all[p], sizeof(CallFingerprint), MPI_BYTE, p, kFingerprintTag,
                          c.check_comm, &reqs.back()),
                "MPI_Irecv(call check)");
    }
  const std::size_t nrecv = reqs.size();
  for (int p : peer_of) {
    reqs.push_back(MPI_REQUEST_NULL);
    mpi_check(MPI_Isend(&c.check_sendbuf, sizeof(CallFingerprint), MPI_BYTE, p, kFingerprintTag,
                        c.check_comm, &reqs.back()),
              "MPI_Isend(call check)");
  }
  std::vector<int> idx(reqs.size());
  auto done = [&] {
    int n = 0;
    mpi_check(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, idx.data(),
                           MPI_STATUSES_IGNORE),
              "MPI_Testsome(call check)");
    return n == MPI_UNDEFINED || std::all_of(reqs.begin(), reqs.end(),
                                             [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
  };
  try {
    wait_until(done, c.timeout_s, [&] {
      std::vector<int> missing;
      for (std::size_t i = 0; i < nrecv; ++i)
        if (reqs[i] != MPI_REQUEST_NULL) missing.push_back(peer_of[i]);
      return fmt::format(
          "call #{} ({}): rank {} waited for rank{} {} to make this call (a rank that exited, "
          "skipped this call, or is stuck in an earlier one)",
          mine.seq, describe(mine), c.rank, missing.size() == 1 ? "" : "s",
          fmt::join(missing, ", "));
    });
  } catch (...) {
    // The communicator is out of step now; drop the receives so no late fingerprint lands here.
    for (std::size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i] != MPI_REQUEST_NULL) {
        if (i < nrecv) MPI_Cancel(&reqs[i]);
        MPI_Request_free(&reqs[i]);
      }
    throw;
  }
  return all;
}

// All-to-Allv: every rank's send and recv counts, to name a pair that disagrees.
[[noreturn]] void report_alltoallv_pair(CommImpl& c, const CallFingerprint& mine,
                                        const CollArgs& a) {
  const int p = c.size;
  std::vector<unsigned long long> local(2 * p), all(2 * static_cast<std::size_t>(p) * p);
  for (int q = 0; q < p; ++q) {
    local[q] = a.send_layout.counts[q];
    local[p + q] = a.recv_layout.counts[q];
  }
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(local.data(), 2 * p, MPI_UNSIGNED_LONG_LONG, all.data(), 2 * p,
                           MPI_UNSIGNED_LONG_LONG, c.check_comm, &req),
            "MPI_Iallgather(call check)");
  c.wait_all(&req, 1, "call check: All-to-Allv counts");
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

std::string describe(const CallFingerprint& fp) {
  std::string s(kind_name(fp.kind));
  if (is_collective(fp.kind)) {
    s += fmt::format(" {}", to_string(static_cast<DataType>(fp.dtype)));
    if (has_op(fp.kind)) s += fmt::format(" {}", to_string(static_cast<ReduceOp>(fp.op)));
  }
  const auto names = shape_names(fp.kind);
  for (int i = 0; i < 3; ++i)
    if (*names[i]) s += fmt::format(" {}={}", names[i], fp.shape[i]);
  const std::string_view algo(fp.algo, strnlen(fp.algo, sizeof fp.algo));
  s += fmt::format(" {}={}", is_collective(fp.kind) ? "algo" : "mode", algo);
  return s;
}

CallFingerprint fingerprint_of(const CollArgs& a, std::string_view requested, int rank, int size) {
  CallFingerprint fp;
  fp.kind = static_cast<CallKind>(a.coll);
  fp.dtype = static_cast<std::uint8_t>(a.dtype);
  fp.op = has_op(fp.kind) ? static_cast<std::uint8_t>(a.op) : 0;
  if (a.coll != Collective::AllToAllv) {
    fp.shape[0] = a.count;
  } else if (a.send_layout.counts.size() == static_cast<std::size_t>(size) &&
             a.recv_layout.counts.size() == static_cast<std::size_t>(size)) {
    for (int q = 0; q < size; ++q)
      fp.balance +=
          pair_term(rank, q, a.send_layout.counts[q]) - pair_term(q, rank, a.recv_layout.counts[q]);
  }
  if (requested.empty()) requested = env_override(a.coll);
  if (requested.empty()) requested = "auto";
  std::memcpy(fp.algo, requested.data(), std::min(requested.size(), sizeof fp.algo - 1));
  return fp;
}

void check_call(CommImpl& c, CallFingerprint fp, const CollArgs* args) {
  if (!c.check) return;
  fp.seq = ++c.check_seq;
  const std::vector<CallFingerprint> all = exchange(c, fp);

  // 1. The call itself: the first rank that differs from rank 0.
  for (int r = 1; r < c.size; ++r) {
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
  if (fp.kind == CallKind::AllToAllv && args != nullptr) {
    std::uint64_t sum = 0;
    for (const CallFingerprint& f : all)
      sum += f.balance;
    if (sum != 0) report_alltoallv_pair(c, fp, *args);
  }
}

void check_op_call(CommImpl& c, CallKind kind, std::initializer_list<std::uint64_t> shape,
                   std::string_view mode) {
  if (!c.check) return;
  CallFingerprint fp;
  fp.kind = kind;
  std::size_t i = 0;
  for (std::uint64_t v : shape)
    if (i < 3) fp.shape[i++] = v;
  std::memcpy(fp.algo, mode.data(), std::min(mode.size(), sizeof fp.algo - 1));
  check_call(c, fp);
}

}  // namespace tilecomm::detail
