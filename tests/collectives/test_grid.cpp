// The correctness grid: algorithm x dtype x op x in-place/out-of-place x count, for AllReduce,
// ReduceScatter, AllGather, All-to-All, All-to-Allv and Broadcast (every root), each result
// compared bitwise (0 ULP) with MPI's own on MPI_COMM_WORLD. Inputs are small integers, so every
// sum is exact in any order.
//
// Run by ctest once per collective x algorithm x rank count, the algorithm forced through
// TILECOMM_<COLL> (see CMakeLists.txt), and with `--algo all` for the pretend-node runs.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "coll_test_util.hpp"

namespace tct {
namespace {

struct Case {
  Collective coll = Collective::AllReduce;
  std::string algo;     // what to pass as options.algorithm ("auto": nothing)
  bool forced = false;  // a named algorithm (through the options or the environment)
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  bool in_place = false;
  std::size_t count = 0;
};

std::string describe(const Case& c, const std::string& shown_algo) {
  std::ostringstream s;
  s << tilecomm::to_string(c.coll) << " algo=" << shown_algo
    << " dtype=" << tilecomm::to_string(c.dtype) << " op=" << tilecomm::to_string(c.op)
    << (c.in_place ? " in-place" : " out-of-place") << " count=" << c.count
    << " np=" << world_size();
  return s.str();
}

struct Outcome {
  std::optional<std::string> declined;
  long wrong = 0;         // result elements that differ from MPI's
  long send_changed = 0;  // out-of-place: input elements the call modified
  bool guards_ok = true;  // nothing written outside the buffers
};

template <class T>
Outcome run_allreduce(const Case& c) {
  const int r = world_rank();
  const std::size_t n = c.count;
  GuardedBuffer sb(n * sizeof(T)), rb(n * sizeof(T));
  T* send = sb.as<T>();
  fill_exact(send, n, r);
  std::vector<T> ref(n);
  reference_allreduce(send, ref.data(), n, c.op);
  T* recv = c.in_place ? send : rb.as<T>();
  Outcome out;
  out.declined = try_call(c.algo, c.forced, [&](const tilecomm::CollectiveOptions& o) {
    tilecomm::allreduce(comm(), n ? send : nullptr, n ? recv : nullptr, n, c.dtype, c.op, o);
  });
  if (out.declined) return out;
  out.wrong = count_wrong(recv, ref.data(), n, sizeof(T));
  if (!c.in_place) {
    std::vector<T> orig(n);
    fill_exact(orig.data(), n, r);
    out.send_changed = count_wrong(send, orig.data(), n, sizeof(T));
  }
  out.guards_ok = sb.guards_intact() && rb.guards_intact();
  return out;
}

template <class T>
Outcome run_reduce_scatter(const Case& c) {
  const int p = world_size(), r = world_rank();
  const std::size_t n = c.count;
  GuardedBuffer sb(p * n * sizeof(T)), rb(n * sizeof(T));
  T* send = sb.as<T>();
  fill_exact(send, p * n, r);
  std::vector<T> ref(n);
  reference_reduce_scatter(send, ref.data(), n, c.op);
  T* recv = c.in_place ? send + r * n : rb.as<T>();
  Outcome out;
  out.declined = try_call(c.algo, c.forced, [&](const tilecomm::CollectiveOptions& o) {
    tilecomm::reduce_scatter(comm(), n ? send : nullptr, n ? recv : nullptr, n, c.dtype, c.op, o);
  });
  if (out.declined) return out;
  out.wrong = count_wrong(recv, ref.data(), n, sizeof(T));
  if (!c.in_place) {
    std::vector<T> orig(p * n);
    fill_exact(orig.data(), p * n, r);
    out.send_changed = count_wrong(send, orig.data(), p * n, sizeof(T));
  }
  out.guards_ok = sb.guards_intact() && rb.guards_intact();
  return out;
}

template <class T>
Outcome run_allgather(const Case& c) {
  const int p = world_size(), r = world_rank();
  const std::size_t n = c.count;
  GuardedBuffer sb(n * sizeof(T)), rb(p * n * sizeof(T));
  fill_exact(sb.as<T>(), n, r);
  std::vector<T> ref(p * n);
  MPI_Allgather(sb.data(), static_cast<int>(n), mpi_type<T>(), ref.data(), static_cast<int>(n),
                mpi_type<T>(), MPI_COMM_WORLD);
  T* recv = rb.as<T>();
  T* send = sb.as<T>();
  if (c.in_place) {
    send = recv + r * n;
    fill_exact(send, n, r);
  }
  Outcome out;
  out.declined = try_call(c.algo, c.forced, [&](const tilecomm::CollectiveOptions& o) {
    tilecomm::allgather(comm(), n ? send : nullptr, n ? recv : nullptr, n, c.dtype, o);
  });
  if (out.declined) return out;
  out.wrong = count_wrong(recv, ref.data(), p * n, sizeof(T));
  if (!c.in_place) {
    std::vector<T> orig(n);
    fill_exact(orig.data(), n, r);
    out.send_changed = count_wrong(send, orig.data(), n, sizeof(T));
  }
  out.guards_ok = sb.guards_intact() && rb.guards_intact();
  return out;
}

template <class T>
Outcome run_alltoall(const Case& c) {
  const int p = world_size(), r = world_rank();
  const std::size_t n = c.count;
  GuardedBuffer sb(p * n * sizeof(T)), rb(p * n * sizeof(T));
  T* send = sb.as<T>();
  fill_exact(send, p * n, r);
  std::vector<T> ref(p * n);
  MPI_Alltoall(send, static_cast<int>(n), mpi_type<T>(), ref.data(), static_cast<int>(n),
               mpi_type<T>(), MPI_COMM_WORLD);
  T* recv = c.in_place ? send : rb.as<T>();
  Outcome out;
  out.declined = try_call(c.algo, c.forced, [&](const tilecomm::CollectiveOptions& o) {
    tilecomm::alltoall(comm(), n ? send : nullptr, n ? recv : nullptr, n, c.dtype, o);
  });
  if (out.declined) return out;
  out.wrong = count_wrong(recv, ref.data(), p * n, sizeof(T));
  if (!c.in_place) {
    std::vector<T> orig(p * n);
    fill_exact(orig.data(), p * n, r);
    out.send_changed = count_wrong(send, orig.data(), p * n, sizeof(T));
  }
  out.guards_ok = sb.guards_intact() && rb.guards_intact();
  return out;
}

// Uneven counts (some zero), blocks in reverse peer order on the send side and gaps between
// blocks on both sides; the gaps must come back untouched.
template <class T>
Outcome run_alltoallv(const Case& c) {
  const int p = world_size(), r = world_rank();
  const std::size_t n = c.count;
  tilecomm::VarLayout sl, rl;
  sl.counts.resize(p), sl.displs.resize(p), rl.counts.resize(p), rl.displs.resize(p);
  std::size_t pos = 1;
  for (int q = p - 1; q >= 0; --q) {
    sl.counts[q] = vcount(r, q, n);
    sl.displs[q] = pos;
    pos += sl.counts[q] + 1 + q % 2;
  }
  sl.capacity = pos + 2;
  pos = 0;
  for (int q = 0; q < p; ++q) {
    rl.counts[q] = vcount(q, r, n);
    rl.displs[q] = pos;
    pos += rl.counts[q] + q % 2;
  }
  rl.capacity = pos + 1;
  GuardedBuffer sb(sl.capacity * sizeof(T)), rb(rl.capacity * sizeof(T));
  fill_exact(sb.as<T>(), sl.capacity, r);
  GuardedBuffer want(rl.capacity * sizeof(T));  // same fill as rb: gaps compare equal
  auto ints = [](const std::vector<std::size_t>& v) {
    return std::vector<int>(v.begin(), v.end());
  };
  std::vector<int> sc = ints(sl.counts), sd = ints(sl.displs), rc = ints(rl.counts),
                   rd = ints(rl.displs);
  MPI_Alltoallv(sb.data(), sc.data(), sd.data(), mpi_type<T>(), want.data(), rc.data(), rd.data(),
                mpi_type<T>(), MPI_COMM_WORLD);
  Outcome out;
  out.declined = try_call(c.algo, c.forced, [&](const tilecomm::CollectiveOptions& o) {
    tilecomm::alltoallv(comm(), sb.data(), sl, rb.data(), rl, c.dtype, o);
  });
  if (out.declined) return out;
  out.wrong = count_wrong(rb.data(), want.data(), rl.capacity, sizeof(T));
  std::vector<T> orig(sl.capacity);
  fill_exact(orig.data(), sl.capacity, r);
  out.send_changed = count_wrong(sb.data(), orig.data(), sl.capacity, sizeof(T));
  out.guards_ok = sb.guards_intact() && rb.guards_intact();
  return out;
}

// Broadcast is in place only; every rank takes a turn as the root, non-roots start from their own
// data (which must be overwritten), and the guards must stay intact.
template <class T>
Outcome run_broadcast(const Case& c) {
  const int p = world_size(), r = world_rank();
  const std::size_t n = c.count;
  Outcome out;
  for (int root = 0; root < p; ++root) {
    GuardedBuffer b(n * sizeof(T));
    fill_exact(b.as<T>(), n, r, 17 * root);
    std::vector<T> ref(n);
    fill_exact(ref.data(), n, root, 17 * root);
    MPI_Bcast(ref.data(), static_cast<int>(n), mpi_type<T>(), root, MPI_COMM_WORLD);
    out.declined = try_call(c.algo, c.forced, [&](const tilecomm::CollectiveOptions& o) {
      tilecomm::broadcast(comm(), n ? b.data() : nullptr, n, c.dtype, root, o);
    });
    if (out.declined) return out;
    out.wrong += count_wrong(b.data(), ref.data(), n, sizeof(T));
    out.guards_ok = out.guards_ok && b.guards_intact();
  }
  return out;
}

Outcome run_case(const Case& c) {
  return visit_dtype(c.dtype, [&](auto t) {
    using T = decltype(t);
    switch (c.coll) {
      case Collective::AllReduce:
        return run_allreduce<T>(c);
      case Collective::ReduceScatter:
        return run_reduce_scatter<T>(c);
      case Collective::AllGather:
        return run_allgather<T>(c);
      case Collective::AllToAll:
        return run_alltoall<T>(c);
      case Collective::AllToAllv:
        return run_alltoallv<T>(c);
      case Collective::Broadcast:
        return run_broadcast<T>(c);
    }
    return Outcome{};
  });
}

std::vector<std::size_t> grid_counts() {
  const std::size_t p = static_cast<std::size_t>(world_size());
  std::vector<std::size_t> v = {0, 1, 7, p - 1, 1000 * p + 3};
  // Small: still past one 512 KiB shared-memory step of the All-to-All at np 4 (128 KiB a peer),
  // with a remainder, for 4- and 8-byte elements.
  v.push_back(options().counts == "small" ? 50003 : (std::size_t{1} << 20) + 5);
  std::vector<std::size_t> out;
  for (std::size_t c : v)
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter;
}

// Every case of one collective with one algorithm. `algo` is what selects it ("auto" when the
// environment forces it), `shown` its name for messages.
void run_matrix(Collective coll, const std::string& algo, const std::string& shown, bool forced) {
  int cases = 0, declined = 0;
  std::string a_reason;
  for (DataType dt : kDtypes)
    for (ReduceOp op : kOps) {
      if (!reduces(coll) && op != ReduceOp::Sum) continue;
      for (bool in_place : {false, true}) {
        if (coll == Collective::AllToAllv && in_place) continue;
        if (coll == Collective::Broadcast && !in_place) continue;  // one buffer: always in place
        for (std::size_t count : grid_counts()) {
          Case c{coll, algo, forced, dt, op, in_place, count};
          const std::string what = describe(c, shown);
          SCOPED_TRACE(what);
          const Outcome o = run_case(c);
          ++cases;
          if (!all_agree(o.declined.has_value(), ("whether to decline: " + what).c_str())) {
            EXPECT_EQ(o.wrong, 0) << "wrong elements: " << what;
            EXPECT_EQ(o.send_changed, 0) << "the send buffer changed: " << what;
            EXPECT_TRUE(o.guards_ok) << "wrote outside the buffers: " << what;
          } else {
            ++declined;
            if (a_reason.empty()) a_reason = *o.declined;
          }
        }
      }
    }
  if (world_rank() == 0)
    std::printf("[grid] %-14s %-20s np=%d: %d cases, %d declined%s%s\n",
                std::string(tilecomm::to_string(coll)).c_str(), shown.c_str(), world_size(), cases,
                declined, declined ? " (e.g. " : "", declined ? (a_reason + ")").c_str() : "");
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    s += (s.empty() ? "" : ", ") + x;
  return s;
}

// One collective under the grid's options (see coll_test_util.hpp).
void run_collective(Collective coll) {
  const Options& opt = options();
  const std::string env = env_forced(coll);
  const std::vector<std::string> known = auto_and_names(coll);
  if (opt.algo == "all") {
    ASSERT_TRUE(env.empty()) << "--algo all with " << env_var_of(coll) << "=" << env;
    for (const std::string& a : known)
      run_matrix(coll, a, a, a != "auto");
    return;
  }
  if (std::find(known.begin(), known.end(), opt.algo) == known.end()) {
    // All-to-Allv shares TILECOMM_ALLTOALL but may have fewer algorithms.
    if (coll == Collective::AllToAllv) {
      if (world_rank() == 0)
        std::printf("[grid] alltoallv has no algorithm '%s' (has: %s): skipped\n", opt.algo.c_str(),
                    join(known).c_str());
      return;
    }
    FAIL() << "'" << opt.algo << "' is not a registered " << tilecomm::to_string(coll)
           << " algorithm; registered: " << join(known)
           << ". Keep TILECOMM_TEST_ALGORITHMS in tests/collectives/CMakeLists.txt in sync.";
  }
  const bool via_env = !env.empty();
  if (via_env) {
    ASSERT_EQ(env, opt.algo) << env_var_of(coll) << " disagrees with --algo";
  }
  run_matrix(coll, via_env ? "auto" : opt.algo, opt.algo + (via_env ? " (env)" : ""),
             opt.algo != "auto");
}

TEST(Grid, Correctness) {
  const std::string which = options().coll;
  std::vector<Collective> colls;
  if (which == "all")
    colls = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
             Collective::AllToAll,  Collective::AllToAllv,     Collective::Broadcast};
  else
    colls = {collective_from(which)};
  if (which == "alltoall") colls.push_back(Collective::AllToAllv);
  for (Collective c : colls) {
    run_collective(c);
    if (HasFatalFailure()) return;
  }
}

// The CMake list of algorithm names (TILECOMM_TEST_ALGORITHMS) equals what the library registers.
TEST(AlgoList, MatchesRegistry) {
  const std::string& expect = options().expect;
  if (expect.empty()) GTEST_SKIP() << "no --expect given";
  std::istringstream groups(expect);
  std::string group;
  std::vector<std::string> seen;
  while (std::getline(groups, group, '/')) {
    const auto colon = group.find(':');
    ASSERT_NE(colon, std::string::npos) << "bad --expect group '" << group << "'";
    const std::string coll = group.substr(0, colon);
    std::vector<std::string> listed;
    std::istringstream names(group.substr(colon + 1));
    for (std::string n; std::getline(names, n, ',');)
      if (!n.empty()) listed.push_back(n);
    std::vector<std::string> registered = tilecomm::algorithm_names(collective_from(coll));
    std::sort(listed.begin(), listed.end());
    std::sort(registered.begin(), registered.end());
    EXPECT_EQ(listed, registered)
        << coll << ": TILECOMM_TEST_ALGORITHMS in tests/collectives/CMakeLists.txt lists ["
        << join(listed) << "] but the library registers [" << join(registered) << "]";
    seen.push_back(coll);
  }
  for (const char* c :
       {"allreduce", "reduce_scatter", "allgather", "alltoall", "alltoallv", "broadcast"})
    EXPECT_NE(std::find(seen.begin(), seen.end(), c), seen.end())
        << c << " is missing from TILECOMM_TEST_ALGORITHMS";
}

}  // namespace
}  // namespace tct
