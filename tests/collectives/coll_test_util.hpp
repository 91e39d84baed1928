#pragma once
// Helpers shared by the multi-rank collectives tests: the process-wide Communicator, exact inputs,
// references computed by MPI itself on MPI_COMM_WORLD, exact (0 ULP) comparison, the grid's
// command-line options, and calling a collective that may decline.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/visit_dtype.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/communicator.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/types.hpp"

namespace tct {

using tilecomm::bfloat16;
using tilecomm::Collective;
using tilecomm::DataType;
using tilecomm::ReduceOp;

inline constexpr DataType kDtypes[] = {DataType::Float32, DataType::Float64, DataType::Int32,
                                       DataType::Int64, DataType::BFloat16};
inline constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// The Communicator every test shares (built on first use from MPI_COMM_WORLD and the process
/// environment; destroyed by a gtest environment before MPI_Finalize).
tilecomm::Communicator& comm();

/// Command-line options of the test binary, read from gtest's copy of argv:
///   --coll allreduce|reduce_scatter|allgather|alltoall|all   (alltoall includes alltoallv)
///   --algo NAME|auto|all   NAME must be registered; when TILECOMM_<COLL> is set it must equal NAME
///                          and the calls go through the environment, else through the options
///   --counts full|small    small takes 50003 elements instead of 2^20+5
///   --expect "allreduce:mpi,ring/alltoall:mpi"   (for the algorithm-list check)
struct Options {
  std::string coll = "all";
  std::string algo = "all";
  std::string counts = "full";
  std::string expect;
};
const Options& options();

/// The environment variable that forces an algorithm of `c` (AllToAllv shares All-to-All's).
const char* env_var_of(Collective c);
/// Its value, or "" when unset.
std::string env_forced(Collective c);
/// "allreduce" -> Collective::AllReduce; throws on an unknown name.
Collective collective_from(const std::string& name);
/// "auto" plus every registered algorithm of `c`.
std::vector<std::string> auto_and_names(Collective c);

/// Calls `call(options)` with options.algorithm = algo ("" or "auto": the default path).
/// Returns nullopt when it ran, or the reason when a forced algorithm declined (NotSupported).
/// Checks that a reason is non-empty and that the default path never declines.
template <class Call>
std::optional<std::string> try_call(const std::string& algo, bool forced, Call&& call) {
  tilecomm::CollectiveOptions o;
  if (algo != "auto") o.algorithm = algo;
  try {
    call(o);
  } catch (const tilecomm::Error& e) {
    if (e.code() != tilecomm::ErrorCode::NotSupported) throw;
    EXPECT_TRUE(forced) << "the default path declined: " << e.what();
    const std::string& m = e.message();
    const std::string tail = ": ";
    EXPECT_FALSE(m.empty() || (m.size() >= 2 && m.compare(m.size() - 2, 2, tail) == 0))
        << "decline without a reason: '" << m << "'";
    return m;
  }
  return std::nullopt;
}

/// True on every rank when `v` is true on every rank; fails the test when ranks disagree.
bool all_agree(bool v, const char* what);

// ------------------------------------------------------------------------------- element types

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  if constexpr (std::is_same_v<T, std::int32_t>) return MPI_INT32_T;
  if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  if constexpr (std::is_same_v<T, bfloat16>) return MPI_UINT16_T;
}

inline MPI_Op mpi_op(ReduceOp op) {
  return op == ReduceOp::Sum ? MPI_SUM : op == ReduceOp::Max ? MPI_MAX : MPI_MIN;
}

/// Calls f(T{}) with the C++ type of `t` (the library's one dtype switch).
using tilecomm::detail::visit_dtype;

/// The exact input of element i on rank r: a small integer in [-8, 8], so sums over up to 16
/// ranks are exact in every type (bfloat16 included: |sum| <= 128 fits 8 mantissa bits).
inline int small_value(std::size_t i, int r) {
  return static_cast<int>((i * 7 + static_cast<std::size_t>(r) * 3) % 17) - 8;
}

/// `v` in type T, spread over the type's width where that stays exact: int64 uses bits above 32
/// and float64 bits below float32's precision, so a narrowing algorithm is caught.
template <class T>
T typed_value(int v) {
  if constexpr (std::is_same_v<T, bfloat16>) return bfloat16(static_cast<float>(v));
  if constexpr (std::is_same_v<T, std::int64_t>)
    return static_cast<std::int64_t>(v) * ((std::int64_t{1} << 33) + 1);
  if constexpr (std::is_same_v<T, double>) return static_cast<double>(v) * (1.0 + 0x1p-30);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>)
    return static_cast<T>(v);
}

template <class T>
void fill_exact(T* p, std::size_t n, int rank, std::size_t first = 0) {
  for (std::size_t i = 0; i < n; ++i)
    p[i] = typed_value<T>(small_value(first + i, rank));
}

/// Elements of `got` that differ bitwise from `want`.
inline long count_wrong(const void* got, const void* want, std::size_t n, std::size_t elem) {
  if (n == 0) return 0;
  if (std::memcmp(got, want, n * elem) == 0) return 0;
  long wrong = 0;
  auto* a = static_cast<const unsigned char*>(got);
  auto* b = static_cast<const unsigned char*>(want);
  for (std::size_t i = 0; i < n; ++i)
    wrong += std::memcmp(a + i * elem, b + i * elem, elem) != 0;
  return wrong;
}

/// AllReduce reference by MPI_Allreduce on MPI_COMM_WORLD (bfloat16: in float, rounded once).
template <class T>
void reference_allreduce(const T* send, T* ref, std::size_t n, ReduceOp op) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    std::vector<float> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i)
      in[i] = static_cast<float>(send[i]);
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, mpi_op(op),
                  MPI_COMM_WORLD);
    for (std::size_t i = 0; i < n; ++i)
      ref[i] = bfloat16(out[i]);
  } else {
    MPI_Allreduce(send, ref, static_cast<int>(n), mpi_type<T>(), mpi_op(op), MPI_COMM_WORLD);
  }
}

/// ReduceScatter reference: the AllReduce of the whole send buffer, block `rank` of it.
template <class T>
void reference_reduce_scatter(const T* send, T* ref, std::size_t n, ReduceOp op) {
  const int p = world_size(), r = world_rank();
  std::vector<T> all(n * p);
  reference_allreduce(send, all.data(), n * p, op);
  if (n > 0) std::memcpy(ref, all.data() + n * r, n * sizeof(T));
}

/// A buffer with 64 guard bytes on each side, so writes past the end are caught.
class GuardedBuffer {
 public:
  static constexpr std::size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xA5;
  explicit GuardedBuffer(std::size_t bytes, unsigned char fill = 0xCD)
      : bytes_(bytes), mem_(bytes + 2 * kGuard, std::byte{kPattern}) {
    // GCC 12 reads the memset's size as possibly 2^64 - 128 on some inlined paths (a false
    // -Wstringop-overflow: mem_ holds bytes + 2 * kGuard).
#if defined(__GNUC__) && !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
    std::memset(data(), fill, bytes);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  }
  std::byte* data() {
    return mem_.data() + kGuard;
  }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data());
  }
  std::size_t bytes() const {
    return bytes_;
  }
  /// True when both guards still hold the pattern.
  bool guards_intact() const {
    for (std::size_t i = 0; i < kGuard; ++i)
      if (mem_[i] != std::byte{kPattern} || mem_[kGuard + bytes_ + i] != std::byte{kPattern})
        return false;
    return true;
  }

 private:
  std::size_t bytes_;
  std::vector<std::byte> mem_;
};

/// FNV-1a over bytes.
inline std::uint64_t hash_bytes(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/// Element counts per rank for All-to-Allv from rank `from` to rank `to`: uneven, some zero.
inline std::size_t vcount(int from, int to, std::size_t n) {
  return static_cast<std::size_t>((from + 2 * to) % 3) * n / 2 +
         static_cast<std::size_t>((from + to) % 2);
}

}  // namespace tct
