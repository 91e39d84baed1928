// libFuzzer target: argument validation of every collective (detail::validate_layout), without
// communication: synthetic buffer addresses, fuzzed counts, dtypes, ops, ranks and All-to-Allv
// layouts. Contract checked: either Error(InvalidArgument) naming the collective, or the arguments
// really are valid: dtype/op in range, every extent fits in int64, layouts inside their capacity,
// buffers non-null where bytes are accessed, and send/recv disjoint unless exactly in place.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "collectives/validate.hpp"
#include "fuzz_common.hpp"
#include "tilecomm/error.hpp"

using namespace tilecomm;
using detail::CollArgs;

namespace {

// A count: small values, powers of two near overflow, or 8 raw bytes.
std::uint64_t count(fuzz::Input& in) {
  const std::uint8_t kind = in.byte();
  if (kind < 160) return in.byte();
  if (kind < 220) return (std::uint64_t{1} << (in.byte() % 64)) + (in.byte() % 3) - 1;
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | in.byte();
  return v;
}

using u128 = unsigned __int128;
constexpr u128 kMax = static_cast<u128>(std::numeric_limits<std::int64_t>::max());

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in{data, size};
  CollArgs a;
  a.coll = static_cast<Collective>(in.byte() % 6);
  a.dtype = static_cast<DataType>(in.byte() % 7);  // 5, 6: not a DataType
  a.op = static_cast<ReduceOp>(in.byte() % 4);     // 3: not a ReduceOp
  const int nranks = 1 + in.byte() % 9;
  const int rank = in.byte() % nranks;
  a.count = count(in);
  a.root = static_cast<int>(in.byte() % (nranks + 2)) - 1;  // -1 and nranks: not a rank
  // Synthetic addresses in one arena (never dereferenced): null, or base + offset.
  const std::uintptr_t base = std::uintptr_t{1} << 40;
  auto address = [&]() -> std::uintptr_t {
    const std::uint8_t k = in.byte();
    if (k < 16) return 0;
    return base + static_cast<std::uintptr_t>(count(in) % (std::uint64_t{1} << 36));
  };
  a.send = reinterpret_cast<const void*>(address());
  a.recv = reinterpret_cast<void*>(address());
  if (in.byte() & 1) a.send = a.recv;  // exactly in place for allreduce/alltoall
  if (a.coll == Collective::AllToAllv) {
    for (VarLayout* l : {&a.send_layout, &a.recv_layout}) {
      const int entries = (in.byte() % 4 == 0) ? in.byte() % 10 : nranks;  // sometimes wrong
      for (int i = 0; i < entries; ++i) {
        l->counts.push_back(count(in));
        l->displs.push_back(count(in));
      }
      l->capacity = count(in);
    }
  }
  try {
    detail::validate_layout(a, rank, nranks);
  } catch (const Error& e) {
    fuzz::require(e.code() == ErrorCode::InvalidArgument, "error code is InvalidArgument");
    fuzz::require(e.message().rfind(std::string(to_string(a.coll)) + ": ", 0) == 0,
                  "error names the collective");
    return 0;
  }
  // Accepted: check the contract independently.
  fuzz::require(static_cast<unsigned>(a.dtype) <= static_cast<unsigned>(DataType::BFloat16),
                "dtype in range");
  fuzz::require(static_cast<unsigned>(a.op) <= static_cast<unsigned>(ReduceOp::Min), "op in range");
  const u128 elem = size_of(a.dtype);
  u128 send_bytes = 0, recv_bytes = 0;
  switch (a.coll) {
    case Collective::AllReduce:
      send_bytes = recv_bytes = a.count * elem;
      break;
    case Collective::ReduceScatter:
      recv_bytes = a.count * elem;
      send_bytes = recv_bytes * nranks;
      break;
    case Collective::AllGather:
      send_bytes = a.count * elem;
      recv_bytes = send_bytes * nranks;
      break;
    case Collective::AllToAll:
      send_bytes = recv_bytes = a.count * elem * nranks;
      break;
    case Collective::Broadcast:
      fuzz::require(a.root >= 0 && a.root < nranks, "root is a rank");
      send_bytes = recv_bytes = a.count * elem;
      break;
    case Collective::AllToAllv:
      for (const VarLayout* l : {&a.send_layout, &a.recv_layout}) {
        fuzz::require(l->counts.size() == static_cast<std::size_t>(nranks) &&
                          l->displs.size() == l->counts.size(),
                      "layout sizes");
        for (int q = 0; q < nranks; ++q)
          fuzz::require(u128(l->counts[q]) + l->displs[q] <= l->capacity, "layout inside capacity");
        fuzz::require(u128(l->capacity) * elem <= kMax, "capacity fits");
      }
      send_bytes = u128(a.send_layout.capacity) * elem;
      recv_bytes = u128(a.recv_layout.capacity) * elem;
      break;
  }
  fuzz::require(send_bytes <= kMax && recv_bytes <= kMax, "extents fit in int64");
  fuzz::require(a.send != nullptr || send_bytes == 0, "send non-null when used");
  fuzz::require(a.recv != nullptr || recv_bytes == 0, "recv non-null when used");
  const u128 s = reinterpret_cast<std::uintptr_t>(a.send),
             r = reinterpret_cast<std::uintptr_t>(a.recv);
  const bool overlap = send_bytes > 0 && recv_bytes > 0 && s < r + recv_bytes && r < s + send_bytes;
  fuzz::require(!overlap || a.in_place, "overlap only when in place");
  if (a.in_place)
    fuzz::require(a.coll != Collective::AllToAllv && send_bytes > 0,
                  "in place is a real in-place call");
  return 0;
}
