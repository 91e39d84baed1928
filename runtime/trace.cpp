#include "tilecomm/trace.hpp"

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tilecomm/error.hpp"

namespace tilecomm {

void Tracer::set_process(int pid, std::string name) {
  std::lock_guard lock(mu_);
  pid_ = pid;
  process_name_ = std::move(name);
}

double Tracer::now_us() {
  auto t = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration<double, std::micro>(t).count();
}

void Tracer::record(TraceEvent event) {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  events_.push_back(std::move(event));
}

void Tracer::mark(std::string_view name, std::string_view category, int lane, std::int64_t tile,
                  std::int64_t peer, std::int64_t bytes) {
  if (!enabled_) return;
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.phase = 'i';
  e.ts_us = now_us();
  e.lane = lane;
  e.tile = tile;
  e.peer = peer;
  e.bytes = bytes;
  record(std::move(e));
}

std::vector<TraceEvent> Tracer::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

void Tracer::clear() {
  std::lock_guard lock(mu_);
  events_.clear();
}

std::string Tracer::to_chrome_json() const {
  using nlohmann::json;
  std::lock_guard lock(mu_);
  json list = json::array();
  list.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"args", {{"name", process_name_}}}});
  for (const TraceEvent& e : events_) {
    json j = {{"name", e.name}, {"cat", e.category}, {"ph", std::string(1, e.phase)},
              {"ts", e.ts_us},  {"pid", pid_},       {"tid", e.lane}};
    if (e.phase == 'X') j["dur"] = e.dur_us;
    if (e.phase == 'i') j["s"] = "t";
    json args = json::object();
    if (e.cu >= 0) args["cu"] = e.cu;
    if (e.wg >= 0) args["wg"] = e.wg;
    if (e.stream >= 0) args["stream"] = e.stream;
    if (e.tile >= 0) args["tile"] = e.tile;
    if (e.peer >= 0) args["peer"] = e.peer;
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    j["args"] = std::move(args);
    list.push_back(std::move(j));
  }
  return json{{"traceEvents", std::move(list)}, {"displayTimeUnit", "ns"}}.dump();
}

void Tracer::write_chrome_json(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw Error(ErrorCode::SystemError, "cannot open trace file '" + path + "'");
  out << to_chrome_json() << '\n';
  if (!out) throw Error(ErrorCode::SystemError, "cannot write trace file '" + path + "'");
}

}  // namespace tilecomm
