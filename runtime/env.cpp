// The one place that reads TILECOMM_* environment variables.
#include "tilecomm/env.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tilecomm/error.hpp"
#include "tilecomm/runtime_config.hpp"

namespace tilecomm {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& value, const char* expected) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("environment variable {}='{}' is not {}", name, value, expected));
}

long long parse_int(const std::string& name, const std::string& v, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || x < lo || x > hi)
    bad(name, v, fmt::format("an integer in [{}, {}]", lo, hi).c_str());
  return x;
}

double parse_double(const std::string& name, const std::string& v, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (errno != 0 || end == v.c_str() || *end != '\0' || !std::isfinite(x) || x < lo || x > hi)
    bad(name, v, fmt::format("a number in [{}, {}]", lo, hi).c_str());
  return x;
}

bool parse_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  bad(name, v, "a boolean (0/1, true/false, on/off, yes/no)");
}

// Bytes with an optional K/M/G suffix (powers of 1024).
std::size_t parse_bytes(const std::string& name, const std::string& v, std::size_t max) {
  if (v.empty()) bad(name, v, "a byte count");
  std::string digits = v;
  std::size_t mult = 1;
  switch (v.back()) {
    case 'k':
    case 'K':
      mult = std::size_t{1} << 10;
      digits.pop_back();
      break;
    case 'm':
    case 'M':
      mult = std::size_t{1} << 20;
      digits.pop_back();
      break;
    case 'g':
    case 'G':
      mult = std::size_t{1} << 30;
      digits.pop_back();
      break;
    default:
      break;
  }
  // Parse the digits alone, but report the value as the user wrote it (suffix included).
  const long long limit = static_cast<long long>(max / mult);
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(digits.c_str(), &end, 10);
  if (errno != 0 || end == digits.c_str() || *end != '\0' || x < 0 || x > limit ||
      !std::isdigit(static_cast<unsigned char>(digits.front())))
    bad(name, v,
        fmt::format("a byte count in [0, {}] (K/M/G suffixes are powers of 1024)", max).c_str());
  return static_cast<std::size_t>(x) * mult;
}

}  // namespace

Env Env::parse(const Lookup& lookup) {
  Env e;
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto v = lookup(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
  };
  if (auto v = get("TILECOMM_CUS")) e.cus = int(parse_int("TILECOMM_CUS", *v, 0, 4096));
  if (auto v = get("TILECOMM_WG_SLOTS"))
    e.wg_slots = int(parse_int("TILECOMM_WG_SLOTS", *v, 1, 64));
  if (auto v = get("TILECOMM_LDS_BYTES"))
    e.lds_bytes = parse_bytes("TILECOMM_LDS_BYTES", *v, std::size_t{1} << 30);
  if (auto v = get("TILECOMM_PIN")) e.pin = parse_bool("TILECOMM_PIN", *v);
  if (auto v = get("TILECOMM_TRACE")) e.trace = *v;
  if (auto v = get("TILECOMM_SPIN_US")) e.spin_us = parse_double("TILECOMM_SPIN_US", *v, 0, 1e6);
  if (auto v = get("TILECOMM_TIMEOUT_S"))
    e.timeout_s = parse_double("TILECOMM_TIMEOUT_S", *v, 0, 1e7);
  if (auto v = get("TILECOMM_ALLREDUCE")) e.allreduce = *v;
  if (auto v = get("TILECOMM_REDUCE_SCATTER")) e.reduce_scatter = *v;
  if (auto v = get("TILECOMM_ALLGATHER")) e.allgather = *v;
  if (auto v = get("TILECOMM_ALLTOALL")) e.alltoall = *v;
  if (auto v = get("TILECOMM_BROADCAST")) e.broadcast = *v;
  if (auto v = get("TILECOMM_NODE_SIZE"))
    e.node_size = int(parse_int("TILECOMM_NODE_SIZE", *v, 0, 1 << 20));
  if (auto v = get("TILECOMM_SHM_BYTES"))
    e.shm_bytes = parse_bytes("TILECOMM_SHM_BYTES", *v, std::size_t{64} << 30);
  if (auto v = get("TILECOMM_CHECK")) e.check = parse_bool("TILECOMM_CHECK", *v);
  // The launcher's variables (Open MPI's, then MPICH/Hydra's, then PMIx's): the first one set
  // wins; a value that does not parse leaves the field at its default.
  auto launcher = [&](std::initializer_list<const char*> names, long lowest, int& field) {
    for (const char* name : names) {
      auto v = get(name);
      if (!v) continue;
      char* end = nullptr;
      const long n = std::strtol(v->c_str(), &end, 10);
      if (!v->empty() && *end == '\0' && n >= lowest && n <= (1 << 20)) field = static_cast<int>(n);
      return;
    }
  };
  launcher({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, 1, e.launcher_local_ranks);
  launcher({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}, 0, e.launcher_rank);
  launcher({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1, e.launcher_size);
  if (auto v = get("TILECOMM_ISA")) {
    if (*v != "scalar" && *v != "avx2" && *v != "avx512")
      bad("TILECOMM_ISA", *v, "one of: scalar, avx2, avx512");
    e.isa = *v;
  }
  if (auto v = get("TILECOMM_PROFILE")) e.profile = *v;
  if (auto v = get("XDG_CACHE_HOME"))
    e.cache_home = *v;
  else if (auto home = get("HOME"))
    e.cache_home = *home + "/.cache";
  return e;
}

Env Env::from_process() {
  return parse([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
}

std::vector<Env::Row> Env::describe() const {
  auto b = [](bool x) { return std::string(x ? "1" : "0"); };
  auto s = [](const std::string& x) { return x.empty() ? std::string("(auto)") : x; };
  return {
      {"TILECOMM_CUS", std::to_string(cus),
       "compute units per rank; 0 = cores in affinity mask, shared among the node's ranks"},
      {"TILECOMM_WG_SLOTS", std::to_string(wg_slots), "max resident workgroups (threads) per CU"},
      {"TILECOMM_LDS_BYTES", std::to_string(lds_bytes), "LDS capacity per CU, bytes (K/M ok)"},
      {"TILECOMM_PIN", b(pin), "pin CU threads to cores when the mask has enough cores"},
      {"TILECOMM_TRACE", trace.empty() ? "(off)" : trace,
       "write a Chrome trace to this path (%r = rank; several ranks: .rankN added)"},
      {"TILECOMM_SPIN_US", fmt::format("{}", spin_us),
       "a waiter polls (busy 2 us, then yielding) before it sleeps, us"},
      {"TILECOMM_TIMEOUT_S", fmt::format("{}", timeout_s), "deadline of every wait, s; 0 = none"},
      {"TILECOMM_ALLREDUCE", s(allreduce), "force an AllReduce algorithm"},
      {"TILECOMM_REDUCE_SCATTER", s(reduce_scatter), "force a ReduceScatter algorithm"},
      {"TILECOMM_ALLGATHER", s(allgather), "force an AllGather algorithm"},
      {"TILECOMM_ALLTOALL", s(alltoall), "force an All-to-All(v) algorithm"},
      {"TILECOMM_BROADCAST", s(broadcast), "force a Broadcast algorithm"},
      {"TILECOMM_NODE_SIZE", std::to_string(node_size), "pretend nodes of N ranks; 0 = real"},
      {"TILECOMM_SHM_BYTES", std::to_string(shm_bytes), "shared-memory segment per rank, bytes"},
      {"TILECOMM_CHECK", b(check), "fingerprint every call across ranks"},
      {"TILECOMM_ISA", s(isa), "cap the kernels' vector ISA: scalar, avx2, avx512"},
      {"TILECOMM_PROFILE", profile.empty() ? "(default)" : profile,
       "cost profile for Mode::Auto (tilecomm_calibrate); default: <cache>/tilecomm/profile-*"},
  };
}

const Env& env() {
  static const Env cached = Env::from_process();
  return cached;
}

std::string rank_trace_path(const std::string& path, int rank, int size) {
  if (path.empty()) return path;
  const std::string r = std::to_string(std::max(rank, 0));
  if (const auto at = path.find("%r"); at != std::string::npos) {
    std::string out = path;
    for (auto i = at; i != std::string::npos; i = out.find("%r", i + r.size()))
      out.replace(i, 2, r);
    return out;
  }
  if (size <= 1 || rank < 0) return path;
  // Insert before the extension of the file name (not of a directory): trace.json ->
  // trace.rank1.json, trace -> trace.rank1.
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return has_ext ? path.substr(0, dot) + ".rank" + r + path.substr(dot) : path + ".rank" + r;
}

RuntimeConfig RuntimeConfig::from_env() {
  const Env& e = env();
  RuntimeConfig c;
  c.num_cus = e.cus;
  c.wg_slots_per_cu = e.wg_slots;
  c.lds_bytes_per_cu = e.lds_bytes;
  c.pin_threads = e.pin;
  c.trace = !e.trace.empty();
  c.trace_path = rank_trace_path(e.trace, e.launcher_rank, e.launcher_size);
  c.spin_us = e.spin_us;
  c.node_ranks = e.launcher_local_ranks > 0 ? e.launcher_local_ranks : 1;
  return c;
}

}  // namespace tilecomm
