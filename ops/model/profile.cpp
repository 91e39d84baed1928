#include "ops/model/profile.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

#ifndef TILECOMM_VERSION_STRING
#error "TILECOMM_VERSION_STRING must be defined by the build (ops/CMakeLists.txt)"
#endif

namespace tilecomm::model {
namespace {
using nlohmann::json;

json fit_json(const Fit& f) {
  json j = {{"c", f.c}, {"rms_s", f.rms}, {"max_rel", f.max_rel}, {"points", f.points}};
  if (!f.table.empty()) {
    json& t = j["table"] = json::array();
    for (const Sample& s : f.table)
      t.push_back({s.x1, s.x2, s.t});
  }
  return j;
}
Fit fit_from(const json& j) {
  Fit f;
  f.c = j.at("c").get<std::array<double, 3>>();
  f.rms = j.at("rms_s").get<double>();
  f.max_rel = j.at("max_rel").get<double>();
  f.points = j.at("points").get<int>();
  if (j.contains("table"))  // [[x1, x2, t], ...]; older profiles have none
    for (const json& s : j.at("table")) {
      const auto v = s.get<std::array<double, 3>>();
      f.table.push_back({v[0], v[1], v[2]});
    }
  return f;
}
json path_json(const PathCost& p) {
  return {{"measured", p.measured},
          {"time", fit_json(p.time)},
          {"cpu_send", fit_json(p.cpu_send)},
          {"cpu_recv", fit_json(p.cpu_recv)},
          {"bulk_beta", p.bulk_beta}};
}
PathCost path_from(const json& j) {
  PathCost p;
  p.measured = j.at("measured").get<bool>();
  p.time = fit_from(j.at("time"));
  p.cpu_send = fit_from(j.at("cpu_send"));
  p.cpu_recv = fit_from(j.at("cpu_recv"));
  p.bulk_beta = j.value("bulk_beta", 0.0);  // older profiles have none
  return p;
}
}  // namespace

const char* version() {
  return TILECOMM_VERSION_STRING;
}

std::string to_json_text(const Profile& p) {
  json j = {{"format", "tilecomm-profile-1"},
            {"host", p.host},
            {"version", p.version},
            {"cus", p.cus},
            {"ranks", p.ranks},
            {"nodes", p.nodes},
            {"cache_bytes", p.cache_bytes},
            {"l2_bytes", p.l2_bytes},
            {"compute",
             {{"gemv", fit_json(p.gemv)},
              {"gemv_warm", fit_json(p.gemv_warm)},
              {"embedding", fit_json(p.embedding)},
              {"embedding_warm", fit_json(p.embedding_warm)},
              {"gemm", fit_json(p.gemm)},
              {"reduce", fit_json(p.reduce)},
              {"reduce_hot", fit_json(p.reduce_hot)}}},
            {"paths",
             {{"shm", path_json(p.shm)},
              {"mpi", path_json(p.mpi)},
              {"link_bytes_per_s", p.link_bytes_per_s}}},
            {"overheads",
             {{"proxy_s", p.proxy_s},
              {"flag_s", p.flag_s},
              {"launch_s", p.launch_s},
              {"launch_grid_s", p.launch_grid_s},
              {"barrier_s", p.barrier_s}}}};
  return j.dump(2) + "\n";
}

Profile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("profile '{}': cannot be read (run tilecomm_calibrate to write one)", path));
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json j = json::parse(text.str());
    if (j.at("format").get<std::string>() != "tilecomm-profile-1")
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("profile '{}': format '{}' is not tilecomm-profile-1", path,
                              j.at("format").get<std::string>()));
    Profile p;
    p.host = j.at("host").get<std::string>();
    p.version = j.at("version").get<std::string>();
    p.cus = j.at("cus").get<int>();
    p.ranks = j.at("ranks").get<int>();
    p.nodes = j.at("nodes").get<int>();
    p.cache_bytes = j.value("cache_bytes", 0.0);
    p.l2_bytes = j.value("l2_bytes", 0.0);  // older: unknown
    const json& c = j.at("compute");
    p.gemv = fit_from(c.at("gemv"));
    if (c.contains("gemv_warm")) p.gemv_warm = fit_from(c.at("gemv_warm"));  // older: none
    p.embedding = fit_from(c.at("embedding"));
    if (c.contains("embedding_warm")) p.embedding_warm = fit_from(c.at("embedding_warm"));
    p.gemm = fit_from(c.at("gemm"));
    p.reduce = fit_from(c.at("reduce"));
    if (c.contains("reduce_hot")) p.reduce_hot = fit_from(c.at("reduce_hot"));  // older: none
    p.shm = path_from(j.at("paths").at("shm"));
    p.mpi = path_from(j.at("paths").at("mpi"));
    p.link_bytes_per_s = j.at("paths").value("link_bytes_per_s", 0.0);  // older: not measured
    const json& o = j.at("overheads");
    p.proxy_s = o.at("proxy_s").get<double>();
    p.flag_s = o.at("flag_s").get<double>();
    p.launch_s = o.at("launch_s").get<double>();
    p.launch_grid_s = o.value("launch_grid_s", 0.0);  // older: not measured
    p.barrier_s = o.at("barrier_s").get<double>();
    return p;
  } catch (const json::exception& e) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("profile '{}': not a tilecomm profile ({})", path, e.what()));
  }
}

void save_profile(const Profile& p, const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream out(path);
  out << to_json_text(p);
  out.close();
  if (!out)
    throw Error(ErrorCode::InvalidUsage, fmt::format("profile '{}': cannot be written", path));
}

std::string default_profile_path(const Env& e) {
  const std::string& cache = e.cache_home;
  if (cache.empty()) return {};
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return fmt::format("{}/tilecomm/profile-{}-{}.json", cache, host[0] ? host : "unknown",
                     version());
}

bool resolve_profile(const std::string& option, Profile& out, const Env& e) {
  if (option == "none") return false;
  const std::string& explicit_path = !option.empty() ? option : e.profile;
  if (!explicit_path.empty()) {
    out = load_profile(explicit_path);  // named explicitly: it must be there and parse
    return true;
  }
  const std::string path = default_profile_path(e);
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return false;
  try {
    out = load_profile(path);
    return true;
  } catch (const Error& e) {
    fmt::print(stderr, "tilecomm: warning: {}; Mode::Auto measures instead\n", e.what());
    return false;
  }
}

}  // namespace tilecomm::model
