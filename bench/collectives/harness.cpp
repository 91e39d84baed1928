// The shared benchmark driver (see harness.hpp): sizes, interleaved timing, exact checks, the
// nccl-tests table and the JSON rows.
#include "harness.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/visit_dtype.hpp"
#include "tilecomm/communicator.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::bench {
namespace {

struct Settings {
  std::uint64_t min_bytes = 8, max_bytes = 16 << 20;
  double factor = 2.0;
  int iters = 20, warmup = 5, check = 1;
  std::string dtype = "float32", op = "sum", json;
  std::vector<std::string> algo{"all"};
};

DataType parse_dtype(const std::string& s) {
  static const std::map<std::string, DataType> names = {
      {"float32", DataType::Float32},   {"float", DataType::Float32},  {"f32", DataType::Float32},
      {"float64", DataType::Float64},   {"double", DataType::Float64}, {"f64", DataType::Float64},
      {"int32", DataType::Int32},       {"int", DataType::Int32},      {"int64", DataType::Int64},
      {"bfloat16", DataType::BFloat16}, {"bf16", DataType::BFloat16}};
  auto it = names.find(s);
  if (it == names.end())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("-d {}: not a dtype (float32, float64, int32, int64, bfloat16)", s));
  return it->second;
}

ReduceOp parse_op(const std::string& s) {
  if (s == "sum") return ReduceOp::Sum;
  if (s == "max") return ReduceOp::Max;
  if (s == "min") return ReduceOp::Min;
  throw Error(ErrorCode::InvalidArgument, fmt::format("-o {}: not an op (sum, max, min)", s));
}

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter;
}
// Blocks of `count` elements per rank on the send (resp. receive) side.
bool blocked_send(Collective c) {
  return c == Collective::ReduceScatter || c == Collective::AllToAll;
}
bool blocked_recv(Collective c) {
  return c == Collective::AllGather || c == Collective::AllToAll;
}

// ---------------------------------------------------------------- exact inputs and the check

// Element i of rank r's send buffer: a small integer, so every reduction is exact in any order.
int small_value(std::size_t i, int r) {
  return static_cast<int>((i * 7 + static_cast<std::size_t>(r) * 3) % 17) - 8;
}

template <class T>
T typed(double v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(static_cast<float>(v));
  else
    return static_cast<T>(v);
}
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

template <class T>
void fill(void* buf, std::size_t n, int r) {
  T* p = static_cast<T*>(buf);
  for (std::size_t i = 0; i < n; ++i)
    p[i] = typed<T>(small_value(i, r));
}

// Elements of `recv` that differ bitwise from what `coll` must produce on rank r of p, with
// `count` the call's count argument.
template <class T>
long count_wrong(Collective coll, ReduceOp op, const void* recv, std::size_t count, int p, int r) {
  const T* got = static_cast<const T*>(recv);
  const std::size_t m = blocked_recv(coll) ? count * p : count;
  long wrong = 0;
  for (std::size_t i = 0; i < m; ++i) {
    T want{};
    if (reduces(coll)) {
      const std::size_t at = coll == Collective::AllReduce ? i : r * count + i;
      Acc<T> acc = static_cast<Acc<T>>(small_value(at, 0));
      for (int q = 1; q < p; ++q) {
        const Acc<T> v = static_cast<Acc<T>>(small_value(at, q));
        acc = op == ReduceOp::Sum   ? acc + v
              : op == ReduceOp::Max ? std::max(acc, v)
                                    : std::min(acc, v);
      }
      want = typed<T>(static_cast<double>(acc));
    } else {
      const int from = static_cast<int>(i / count);
      const std::size_t at = coll == Collective::AllGather ? i % count : r * count + i % count;
      want = typed<T>(small_value(at, from));
    }
    wrong += std::memcmp(&got[i], &want, sizeof(T)) != 0;
  }
  return wrong;
}

using detail::visit_dtype;

// ---------------------------------------------------------------- one call

void call(Communicator& c, Collective coll, const std::string& algo, const void* send, void* recv,
          std::size_t count, DataType dt, ReduceOp op) {
  CollectiveOptions o;
  if (algo != "auto") o.algorithm = algo;
  switch (coll) {
    case Collective::AllReduce:
      return allreduce(c, send, recv, count, dt, op, o);
    case Collective::ReduceScatter:
      return reduce_scatter(c, send, recv, count, dt, op, o);
    case Collective::AllGather:
      return allgather(c, send, recv, count, dt, o);
    case Collective::AllToAll:
      return alltoall(c, send, recv, count, dt, o);
    case Collective::AllToAllv:
    case Collective::Broadcast:
      break;
  }
  throw Error(ErrorCode::InvalidUsage,
              fmt::format("the benchmark has no {} mode", tilecomm::to_string(coll)));
}

struct Stats {
  double median = 0, min = 0, max = 0;
};

// Per-iteration maxima over ranks (collective), then median/min/max.
Stats reduce_times(std::vector<double>& t) {
  std::vector<double> mx(t.size());
  MPI_Allreduce(t.data(), mx.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  std::sort(mx.begin(), mx.end());
  Stats s;
  const std::size_t n = mx.size();
  s.median = n % 2 ? mx[n / 2] : 0.5 * (mx[n / 2 - 1] + mx[n / 2]);
  s.min = mx.front();
  s.max = mx.back();
  return s;
}

struct Row {
  std::size_t bytes = 0, count = 0;
  std::string algo;
  std::optional<std::string> declined;
  Stats t;
  long wrong = -1;  // -1: not checked
  double speedup = 0;
};

double bus_factor(Collective c, int p) {
  if (p == 1) return 0.0;
  return c == Collective::AllReduce ? 2.0 * (p - 1) / p : static_cast<double>(p - 1) / p;
}

// Runs every algorithm at one size, interleaved; returns one row per algorithm.
std::vector<Row> measure(Communicator& comm, Collective coll, const Settings& s,
                         const std::vector<std::string>& algos, std::size_t count, DataType dt,
                         ReduceOp op, void* send, void* recv) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t elem = size_of(dt);
  const std::size_t total = (blocked_send(coll) || blocked_recv(coll)) ? count * p : count;
  std::vector<Row> rows(algos.size());
  for (std::size_t a = 0; a < algos.size(); ++a) {
    rows[a].bytes = total * elem;
    rows[a].count = total;
    rows[a].algo = algos[a];
    try {  // the first warm-up call; declining is decided before any communication
      call(comm, coll, algos[a], send, recv, count, dt, op);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::NotSupported) throw;
      rows[a].declined = e.message();
    }
  }
  std::vector<std::vector<double>> times(algos.size());
  using clock = std::chrono::steady_clock;
  for (int it = 0; it < s.warmup + s.iters; ++it)
    for (std::size_t a = 0; a < algos.size(); ++a) {
      if (rows[a].declined) continue;
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = clock::now();
      call(comm, coll, algos[a], send, recv, count, dt, op);
      const auto t1 = clock::now();
      if (it >= s.warmup)
        times[a].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  for (std::size_t a = 0; a < algos.size(); ++a) {
    if (rows[a].declined) continue;
    rows[a].t = reduce_times(times[a]);
    if (s.check) {
      std::memset(recv, 0xFF, (blocked_recv(coll) ? count * p : count) * elem);
      call(comm, coll, algos[a], send, recv, count, dt, op);
      long w = visit_dtype(
          dt, [&](auto t) { return count_wrong<decltype(t)>(coll, op, recv, count, p, r); });
      MPI_Allreduce(&w, &rows[a].wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
  }
  const Row* mpi = nullptr;
  for (const Row& row : rows)
    if (row.algo == "mpi" && !row.declined) mpi = &row;
  for (Row& row : rows)
    if (mpi && !row.declined && row.t.median > 0) row.speedup = mpi->t.median / row.t.median;
  return rows;
}

// The call's count argument for an nccl-tests size (at least one element per rank).
std::size_t count_for(Collective coll, std::size_t bytes, std::size_t elem, int p) {
  std::size_t n = bytes / elem;
  if (blocked_send(coll) || blocked_recv(coll)) n /= static_cast<std::size_t>(p);
  return std::max<std::size_t>(n, 1);
}

int run(int argc, char** argv, Collective coll, int rank) {
  Settings s;
  const std::string name = std::string(to_string(coll)) + "_perf";
  CLI::App app{"tilecomm " + name + ": nccl-tests-style sweep over sizes and algorithms"};
  app.add_option("-b,--minbytes", s.min_bytes, "minimum size in bytes (K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", s.max_bytes, "maximum size in bytes (K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", s.factor, "multiply the size by this each step")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("-n,--iters", s.iters, "timed iterations per size")->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup_iters", s.warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-c,--check", s.check, "check every element (0/1); exit 1 on a wrong one")
      ->check(CLI::Range(0, 1));
  app.add_option("-d,--datatype", s.dtype, "float32, float64, int32, int64, bfloat16");
  app.add_option("-o,--op", s.op, "sum, max, min (reducing collectives)");
  app.add_option("--algo", s.algo,
                 "algorithm names, comma-separated (auto: the default table), or all")
      ->delimiter(',');
  app.add_option("--json", s.json, "write one JSON object per row to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) return app.exit(e);
    return e.get_exit_code();
  }
  const DataType dt = parse_dtype(s.dtype);
  const ReduceOp op = parse_op(s.op);
  if (s.min_bytes == 0 || s.max_bytes < s.min_bytes)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("-b {} -e {}: need 0 < min <= max", s.min_bytes, s.max_bytes));

  Communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  std::vector<std::string> algos;
  const std::vector<std::string> names = algorithm_names(coll);
  if (s.algo == std::vector<std::string>{"all"}) {
    algos = names;
    algos.push_back("auto");
  } else {
    algos.push_back("mpi");  // the baseline, first
    for (const std::string& a : s.algo) {
      if (a != "auto" && std::find(names.begin(), names.end(), a) == names.end())
        throw Error(
            ErrorCode::InvalidArgument,
            fmt::format("--algo {}: '{}' is not one of the {} algorithms; valid: all auto {}",
                        fmt::join(s.algo, ","), a, to_string(coll), fmt::join(names, " ")));
      if (std::find(algos.begin(), algos.end(), a) == algos.end()) algos.push_back(a);
    }
  }

  const std::size_t elem = size_of(dt);
  const std::size_t max_count = count_for(coll, s.max_bytes, elem, p);
  const std::size_t send_elems = blocked_send(coll) ? max_count * p : max_count;
  const std::size_t recv_elems = blocked_recv(coll) ? max_count * p : max_count;
  std::vector<std::byte> send(send_elems * elem), recv(recv_elems * elem);
  visit_dtype(dt, [&](auto t) { fill<decltype(t)>(send.data(), send_elems, comm.rank()); });

  const char* redop = reduces(coll) ? s.op.c_str() : "none";
  if (rank == 0) {
    fmt::print(
        "# tilecomm {}: {} ranks on {} node(s), dtype {}, op {}, iters {}, warmup {}, "
        "check {}\n",
        name, p, comm.num_nodes(), to_string(dt), redop, s.iters, s.warmup, s.check);
    fmt::print(
        "# time = median over iterations of the slowest rank; min/max beside it; busbw "
        "factor {:.3f}\n#\n",
        bus_factor(coll, p));
    fmt::print("{:>12} {:>12} {:>9} {:>6} {:>20} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7} {:>8}\n",
               "# size", "count", "type", "redop", "algo", "time(us)", "min(us)", "max(us)",
               "algbw", "busbw", "#wrong", "speedup");
    fmt::print("{:>12} {:>12} {:>9} {:>6} {:>20} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7} {:>8}\n",
               "# (B)", "(elements)", "", "", "", "", "", "", "(GB/s)", "(GB/s)", "", "vs mpi");
    std::fflush(stdout);
  }
  nlohmann::json out = nlohmann::json::array();
  long total_wrong = 0;
  std::size_t last_count = 0;
  for (double bytes = static_cast<double>(s.min_bytes); bytes <= static_cast<double>(s.max_bytes);
       bytes *= s.factor) {
    const std::size_t count = count_for(coll, static_cast<std::size_t>(bytes), elem, p);
    if (count == last_count) continue;  // several small sizes round to the same count
    last_count = count;
    for (const Row& row : measure(comm, coll, s, algos, count, dt, op, send.data(), recv.data())) {
      if (rank != 0) continue;
      if (row.declined) {
        fmt::print("{:>12} {:>12} {:>9} {:>6} {:>20}   declined: {}\n", row.bytes, row.count,
                   to_string(dt), redop, row.algo, *row.declined);
        continue;
      }
      const double algbw = row.bytes / (row.t.median * 1e3);  // B/us = MB/s; /1e3 -> GB/s
      const double busbw = algbw * bus_factor(coll, p);
      total_wrong += std::max(0L, row.wrong);
      fmt::print(
          "{:>12} {:>12} {:>9} {:>6} {:>20} {:>10.2f} {:>10.2f} {:>10.2f} {:>9.3f} {:>9.3f} "
          "{:>7} {:>8}\n",
          row.bytes, row.count, to_string(dt), redop, row.algo, row.t.median, row.t.min, row.t.max,
          algbw, busbw, row.wrong < 0 ? "N/A" : std::to_string(row.wrong),
          row.speedup > 0 ? fmt::format("{:.2f}", row.speedup) : "n/a");
      out.push_back({{"collective", to_string(coll)},
                     {"nranks", p},
                     {"nodes", comm.num_nodes()},
                     {"ranks_per_node", comm.local_size()},
                     {"bytes", row.bytes},
                     {"count", row.count},
                     {"dtype", to_string(dt)},
                     {"op", redop},
                     {"algo", row.algo},
                     {"time_us", row.t.median},
                     {"min_us", row.t.min},
                     {"max_us", row.t.max},
                     {"algbw_gbs", algbw},
                     {"busbw_gbs", busbw},
                     {"wrong", row.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.wrong)},
                     {"speedup_vs_mpi",
                      row.speedup > 0 ? nlohmann::json(row.speedup) : nlohmann::json(nullptr)},
                     {"iters", s.iters}});
    }
    if (rank == 0) std::fflush(stdout);
  }
  MPI_Bcast(&total_wrong, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    fmt::print("# {} wrong element(s)\n", total_wrong);
    if (!s.json.empty()) {
      std::ofstream f(s.json);
      f << out.dump(1) << "\n";
      if (!f) throw Error(ErrorCode::SystemError, fmt::format("--json {}: cannot write", s.json));
    }
  }
  return total_wrong > 0 ? 1 : 0;
}

}  // namespace

int run_perf(int argc, char** argv, Collective coll) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    rc = run(argc, argv, coll, rank);
  } catch (const std::exception& e) {
    fmt::print(stderr, "[rank {}] {}\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}

}  // namespace tilecomm::bench
