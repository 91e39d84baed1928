// The Tracer: one complete event per WG, user marks, Chrome JSON export, disabled = nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using test::config;

TEST(Trace, OneCompleteEventPerWorkgroupWithArgs) {
  RuntimeConfig c = config(2, 2);
  c.trace = true;
  Device d(c);
  Stream s = d.create_stream(Stream::kHigh);
  constexpr std::size_t kWgs = 20;
  std::mutex mu;
  std::map<std::int64_t, std::pair<int, int>> placed;  // wg -> (cu, lane)
  s.launch({"traced", {kWgs, 1}, 0}, [&](const WorkgroupContext& wg) {
    {
      std::lock_guard lock(mu);
      placed[std::int64_t(wg.id)] = {wg.cu, wg.cu * 2 + wg.slot};
    }
    if (wg.id % 5 == 0) wg.mark("tile sent", std::int64_t(wg.id), 1, 4096);
  });
  s.synchronize();

  std::size_t complete = 0, marks = 0;
  std::set<std::int64_t> wgs;
  for (const TraceEvent& e : d.tracer().events()) {
    if (e.phase == 'X') {
      ++complete;
      EXPECT_EQ(e.name, "traced");
      EXPECT_EQ(e.category, "wg");
      EXPECT_EQ(e.stream, s.id());
      EXPECT_GE(e.dur_us, 0.0);
      EXPECT_TRUE(wgs.insert(e.wg).second) << "WG " << e.wg << " recorded twice";
      EXPECT_EQ(e.cu, placed.at(e.wg).first);
      EXPECT_EQ(e.lane, placed.at(e.wg).second);
    } else {
      ASSERT_EQ(e.phase, 'i');
      ++marks;
      EXPECT_EQ(e.name, "tile sent");
      EXPECT_EQ(e.tile % 5, 0);
      EXPECT_EQ(e.lane, placed.at(e.tile).second);  // the mark sits on its WG's lane
      EXPECT_EQ(e.peer, 1);
      EXPECT_EQ(e.bytes, 4096);
    }
  }
  EXPECT_EQ(complete, kWgs);
  EXPECT_EQ(wgs.size(), kWgs);
  EXPECT_EQ(marks, kWgs / 5);
}

TEST(Trace, ChromeJsonParsesWithOneEventPerWorkgroupAndEachMark) {
  RuntimeConfig c = config(1, 2);
  c.trace = true;
  Device d(c);
  d.tracer().set_process(3, "rank 3");
  d.default_stream().launch({"k", {6, 1}, 0}, [](const WorkgroupContext& wg) {
    wg.mark("start", std::int64_t(wg.id));
    wg.mark("end");
  });
  d.synchronize();
  const auto j = nlohmann::json::parse(d.tracer().to_chrome_json());
  ASSERT_TRUE(j.contains("traceEvents"));
  std::size_t x = 0, i = 0, meta = 0;
  std::set<std::int64_t> wgs;
  for (const auto& e : j["traceEvents"]) {
    EXPECT_EQ(e["pid"], 3);
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++x;
      EXPECT_EQ(e["name"], "k");
      EXPECT_TRUE(e.contains("dur"));
      EXPECT_TRUE(e["args"].contains("cu"));
      EXPECT_EQ(e["args"]["stream"], 0);
      wgs.insert(e["args"]["wg"].get<std::int64_t>());
    } else if (ph == "i") {
      ++i;
    } else if (ph == "M") {
      ++meta;
      EXPECT_EQ(e["args"]["name"], "rank 3");
    }
  }
  EXPECT_EQ(x, 6u);
  EXPECT_EQ(wgs.size(), 6u);
  EXPECT_EQ(i, 12u);
  EXPECT_EQ(meta, 1u);

  d.tracer().clear();
  EXPECT_TRUE(d.tracer().events().empty());
}

TEST(Trace, WritesToTheConfiguredPathOnDestruction) {
  const std::string path = ::testing::TempDir() + "tilecomm_trace_test.json";
  std::remove(path.c_str());
  {
    RuntimeConfig c = config(1, 1);
    c.trace = true;
    c.trace_path = path;
    Device d(c);
    d.default_stream().launch({"k", {3, 1}, 0}, [](const WorkgroupContext&) {});
  }
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    text.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["traceEvents"].size(), 4u);  // metadata + 3 WGs
}

TEST(Trace, DisabledTracerRecordsNothing) {
  Device d(config(1, 2));
  ASSERT_FALSE(d.tracer().enabled());
  d.default_stream().launch({"k", {8, 1}, 0}, [](const WorkgroupContext& wg) { wg.mark("m", 1); });
  d.synchronize();
  EXPECT_TRUE(d.tracer().events().empty());
  Tracer t;
  t.mark("m", "c", 0);
  t.record(TraceEvent{});
  EXPECT_TRUE(t.events().empty());
}

TEST(Trace, UnwritablePathIsASystemErrorNamingIt) {
  Tracer t(true);
  try {
    t.write_chrome_json("/nonexistent-dir/trace.json");
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::SystemError);
    EXPECT_NE(e.message().find("/nonexistent-dir/trace.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace tilecomm
