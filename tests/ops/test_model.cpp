// The performance model (ops/model/): the fits, the formulas on hand-computed cases, Auto's use
// of the predictions, the profile file and how it is found (the tiles it plans:
// test_model_tiles.cpp). No MPI, no device.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "ops/common/auto_mode.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/model/fit.hpp"
#include "ops/model/predict.hpp"
#include "ops/model/profile.hpp"
#include "ops/model/sim.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::model {
namespace {

Env env_of(std::map<std::string, std::string> vars) {
  return Env::parse([vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string temp_dir(const char* name) {
  const auto d = std::filesystem::temp_directory_path() /
                 (std::string("tilecomm_model_") + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(ModelFit, RecoversExactCoefficients) {
  // t = 2 + 3 x1 + 0.5 x2 exactly, on a design that varies both features.
  std::vector<double> x1, x2, t;
  for (double a : {1.0, 4.0, 16.0})
    for (double b : {10.0, 1000.0, 1e6}) {
      x1.push_back(a);
      x2.push_back(a * b);
      t.push_back(2 + 3 * a + 0.5 * a * b);
    }
  const Fit f = least_squares(x1, x2, t, 3);
  EXPECT_NEAR(f.c[0], 2, 1e-6);
  EXPECT_NEAR(f.c[1], 3, 1e-6);
  EXPECT_NEAR(f.c[2], 0.5, 1e-9);
  EXPECT_LT(f.max_rel, 1e-9);
  EXPECT_EQ(f.points, 9);
  // Two unknowns: t = alpha + beta bytes, with one point off by 10 % (a residual to report).
  const std::vector<double> bytes = {8, 1024, 65536, 1 << 20}, none(4, 0.0);
  std::vector<double> lat;
  for (double b : bytes)
    lat.push_back(1e-6 + 1e-10 * b);
  const Fit g = least_squares(bytes, none, lat, 2);
  EXPECT_NEAR(g.c[0], 1e-6, 1e-12);
  EXPECT_NEAR(g.c[1], 1e-10, 1e-16);
  EXPECT_EQ(g.c[2], 0);
  lat[2] *= 1.1;
  EXPECT_GT(least_squares(bytes, none, lat, 2).max_rel, 0.01);
}

TEST(ModelFit, TooFewPointsOrNoVariationIsAnError) {
  const std::vector<double> one = {1}, t = {1};
  EXPECT_THROW(least_squares(one, one, t, 2), Error);
  const std::vector<double> same = {2, 2, 2}, t3 = {1, 2, 3};
  EXPECT_THROW(least_squares(same, same, t3, 3), Error);  // rank-deficient: dgels refuses
}

// A compute fit reads its measured points, not the line, once it has them (issue 15: the
// operator's GEMV kernel's cost per multiply-add is not linear in K; the line put GEMV
// M = 262144, K = 16 at half its time).
TEST(ModelFit, TableReadsTheMeasuredPointsNotTheLine) {
  Fit f;
  f.c = {1, 1, 1};  // a line far from the points: must not be read once there is a table
  // Two tiles of 16 multiply-adds per row: 16 rows at 2 ns per multiply-add, 1024 rows at 1 ns.
  f.table = {{16, 16 * 16, 16 * 16 * 2e-9}, {1024, 1024 * 16, 1024 * 16 * 1e-9}};
  EXPECT_DOUBLE_EQ(f.at(16, 16 * 16), 16 * 16 * 2e-9);        // a point itself
  EXPECT_DOUBLE_EQ(f.at(1024, 1024 * 16), 1024 * 16 * 1e-9);  // the other
  // Between them, along their own work per row: linear in log2 rows (4 .. 10).
  EXPECT_DOUBLE_EQ(f.at(128, 128 * 16), 128 * 16 * 1.5e-9);               // log2 7: halfway
  EXPECT_DOUBLE_EQ(f.at(64, 64 * 16), 64 * 16 * (2.0 - 2.0 / 6) * 1e-9);  // log2 6: a third
  // Beyond the sweep: the nearest point's cost per unit.
  EXPECT_DOUBLE_EQ(f.at(1 << 20, (1 << 20) * 16.0), (1 << 20) * 16.0 * 1e-9);
  EXPECT_DOUBLE_EQ(f.at(4, 4 * 16), 4 * 16 * 2e-9);
  // A one-feature use (x2 = 0), or no table: the line.
  EXPECT_DOUBLE_EQ(f.at(2), 3);
  f.table.clear();
  EXPECT_DOUBLE_EQ(f.at(16, 16 * 16), 1 + 16 + 256);
}

// A tile whose work per row the sweep measured reads those points alone; other tiles weigh the
// four nearest by 1 / distance^2 in (log2 rows, log2 work per row). Before, every tile was read
// the second way, and a tile between two measured sizes mixed in the points of the other work
// per row: pooling tiles of 2048 lookups of dim 64 read the dim 16 points' dearer cost per
// unit, 8-10 % above the dim 64 ones around them (the one-node embedding batch 4096 compute
// predicted at 1.19x its measured time, 1.09x after).
TEST(ModelFit, ATileReadsThePointsOfItsOwnWorkPerRow) {
  Fit f;
  // Work per row 16 at 16 and 1024 rows (2 and 1 ns per unit), and 4 at 256 rows (8 ns).
  f.table = {{16, 16 * 16, 16 * 16 * 2e-9},
             {1024, 1024 * 16, 1024 * 16 * 1e-9},
             {256, 256 * 4, 256 * 4 * 8e-9}};
  EXPECT_DOUBLE_EQ(f.at(128, 128 * 16), 128 * 16 * 1.5e-9);  // the 4-per-row point unread
  // Work per row 8 (log2 3) was not measured: the three points at distances^2 (log2 rows 7):
  // 9 + 1, 9 + 1 and 1 + 1.
  const double w16 = 1.0 / 10, w4 = 1.0 / 2;
  EXPECT_DOUBLE_EQ(f.at(128, 128 * 8),
                   128 * 8 * (w16 * 2 + w16 * 1 + w4 * 8) / (2 * w16 + w4) * 1e-9);
  // Two shapes of one work per row at the same rows (GEMM K x N 64 x 256 and 256 x 64): their mean.
  f.table.push_back({16, 16 * 16, 16 * 16 * 4e-9});
  EXPECT_DOUBLE_EQ(f.at(16, 16 * 16), 16 * 16 * 3e-9);
}

// A path's per-byte cost is the dearer of the ping-pong's and the cold bulk copy's.
TEST(ModelFit, BulkCopyBoundsAPathsPerByteCost) {
  PathCost pc;
  pc.time.c = {1e-6, 0.02e-9};
  EXPECT_DOUBLE_EQ(pc.beta(), 0.02e-9);
  pc.bulk_beta = 0.15e-9;
  EXPECT_DOUBLE_EQ(pc.beta(), 0.15e-9);
  EXPECT_DOUBLE_EQ(pc.alpha(), 1e-6);
}

// A profile with round numbers for hand computation.
Profile round_profile() {
  Profile p;
  p.gemv.c = {0, 0, 1e-9};  // 1 ns per multiply-add
  p.shm.measured = true;
  p.shm.time.c = {1e-6, 1e-9};        // 1 us + 1 ns/B
  p.shm.cpu_send.c = {0.2e-6, 1e-9};  // the copy and the flag
  p.flag_s = 0.5e-6;
  p.mpi.measured = true;
  p.mpi.time.c = {10e-6, 2e-9};
  p.mpi.cpu_send.c = {3e-6, 0};
  p.mpi.cpu_recv.c = {2e-6, 0};
  p.proxy_s = 30e-6;
  return p;
}

TEST(ModelPredict, GemvOnOneNodeByHand) {
  const Profile p = round_profile();
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 1024;
  s.k = 1000;
  s.tile = 256;  // 4 tiles of 256 us
  const Layout l{2, 1, 1, 1};
  const Prediction r = predict(p, s, l, OpOptions{});
  EXPECT_EQ(r.tiles, 4u);
  EXPECT_NEAR(r.tile, 256e-6, 1e-12);
  EXPECT_NEAR(r.compute, 1024e-6, 1e-12);
  // AllReduce of 4096 B at p = 2: 2 messages x 1 us + 2 x 2048 B x 1 ns.
  EXPECT_NEAR(r.collective, 6.096e-6, 1e-12);
  EXPECT_NEAR(r.sequential, 1030.096e-6, 1e-12);
  // Shaped, 4 chunks: chunk compute 256 us, chunk collective 2 x 1 us + 2 x 512 B x 1 ns; the
  // pipeline 256 + 3 x 256 + 3.024 us is under the CPU bound 1024 + 4 x 1.024 us.
  EXPECT_NEAR(r.shaped, 1028.096e-6, 1e-12);
  // Fused, one-shot (4 KiB): 4 blocks to the one peer, each a 1024 B copy and a flag (0.2 us +
  // 1 ns/B of CPU) on the cores (more than the first tile + the link); then the last block's flag
  // latency and copy.
  EXPECT_NEAR(r.fused, (1024 + 4 * (0.2 + 1.024) + 0.5 + 1.024) * 1e-6, 1e-12);
}

TEST(ModelPredict, GemvAcrossTwoNodesByHand) {
  const Profile p = round_profile();
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 1024;
  s.k = 1000;
  s.tile = 256;
  const Prediction r = predict(p, s, Layout{2, 2, 1, 1}, OpOptions{});
  EXPECT_NEAR(r.collective, (2 * 10 + 2 * 2048 * 2e-3) * 1e-6, 1e-12);
  // 4 messages off node: 5 us of CPU each; the link's 4 x 1024 B x 2 ns after the first tile
  // hides under compute; the tail: latency + proxy + the last 1024 B.
  EXPECT_NEAR(r.fused, (1024 + 4 * 5 + 10 + 30 + 1024 * 2e-3) * 1e-6, 1e-12);
  // A link slower than the cores: the first tile, then the link, then the tail.
  Profile slow = p;
  slow.mpi.time.c[1] = 1e-6;  // 1 us/B: 4 x 1024 B = 4096 us
  const Prediction q = predict(slow, s, Layout{2, 2, 1, 1}, OpOptions{});
  EXPECT_NEAR(q.fused, (256 + 4096 + 10 + 30 + 1024) * 1e-6, 1e-9);
}

// GemmAllToAll sends another node tiles of gemm_alltoall_off_rows (48 rows at N = 256, 48 KiB),
// not the node's 32-row tiles: 96 rows, K = 1, N = 256 at 2 nodes x 1 rank, 1 CU. Three 32-row
// tiles of 8.192 us (1 ns per multiply-add); half the rows go to the other node, as one 48-row
// message (not 1.5 of 32 KiB): the link's 49152 B x 2 ns = 98.304 us after the first tile, then
// the tail (latency + proxy + the last 49152 B). With an explicit OpOptions::tile of 32 every path
// takes 32 rows: 1.5 messages of 32 KiB.
TEST(ModelPredict, GemmAllToAllOffNodeMessagesTakeTheOperatorsOffNodeRows) {
  Profile p = round_profile();
  p.gemm.c = {0, 0, 1e-9};
  ASSERT_EQ(detail::gemm_alltoall_off_rows(256), 48u);
  EXPECT_EQ(detail::gemm_alltoall_off_rows(1024), 48u);  // min(N, 256) columns per tile
  EXPECT_EQ(detail::gemm_alltoall_off_rows(64), 192u);
  OpShape s;
  s.op = OpKind::GemmAllToAll;
  s.m = 96;
  s.k = 1;
  s.n = 256;
  s.tile = 32;  // the node's rows, as the operator tells the model
  const Prediction r = predict(p, s, Layout{2, 2, 1, 1}, OpOptions{});
  EXPECT_EQ(r.tiles, 3u);
  EXPECT_NEAR(r.fused, (8.192 + 98.304 + 10 + 30 + 98.304) * 1e-6, 1e-12);
  OpOptions o;
  o.tile = 32;
  const Prediction q = predict(p, s, Layout{2, 2, 1, 1}, o);
  EXPECT_NEAR(q.fused, (8.192 + 1.5 * 32768 * 2e-3 + 10 + 30 + 32768 * 2e-3) * 1e-6, 1e-12);
}

// Many cores do not receive faster: one proxy takes every off-node message, one at a time. 64
// one-shot blocks of 16 rows (64 B) to the other node on 8 cores: the cores' share of all the CPU
// is (64 x 0.016 + 64 x (3 + 2)) / 8 = 40.128 us, the link 64 x 64 B x 2 ns after the first tile,
// the proxy's receives 64 x 2 us = 128 us; then the tail (latency + proxy + 64 B).
TEST(ModelPredict, FusedAcrossNodesWaitsForTheProxysReceives) {
  const Profile p = round_profile();
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 1024;
  s.k = 1;
  s.tile = 16;
  const Prediction r = predict(p, s, Layout{2, 2, 8, 1}, OpOptions{});
  EXPECT_EQ(r.tiles, 64u);
  EXPECT_NEAR(r.fused, (128 + 10 + 30 + 64 * 2e-3) * 1e-6, 1e-12);
}

TEST(ModelPredict, OneRankHasNoCollective) {
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 64;
  s.k = 10;
  s.tile = 64;
  const Prediction r = predict(round_profile(), s, Layout{1, 1, 1, 1}, OpOptions{});
  EXPECT_EQ(r.collective, 0);
  EXPECT_NEAR(r.sequential, 640e-9, 1e-15);
  EXPECT_NEAR(r.fused, 640e-9, 1e-15);  // nothing to send: the same as sequential
}

// kModelMargin = 3: a mode is trusted, or ruled out, only 4x apart.
TEST(ModelChoice, ClearWinnerSettlesElseThePlausibleCandidates) {
  auto c = choose_from_model({10, 41, 50});
  ASSERT_TRUE(c.settle);
  EXPECT_EQ(*c.settle, Mode::Sequential);
  c = choose_from_model({50, 41, 10});
  ASSERT_TRUE(c.settle);
  EXPECT_EQ(*c.settle, Mode::Fused);
  c = choose_from_model({10, 39, 41});  // shaped within 4x of sequential
  EXPECT_FALSE(c.settle);
  EXPECT_EQ(c.candidates, (std::vector<Mode>{Mode::Sequential, Mode::Shaped}));
  c = choose_from_model({32, 50, 10});  // 3.2x, settled under the old 3x: now both measured
  EXPECT_FALSE(c.settle);
  EXPECT_EQ(c.candidates, (std::vector<Mode>{Mode::Sequential, Mode::Fused}));
  c = choose_from_model({40, 41, 10});  // exactly 4x: not clear, both measured
  EXPECT_FALSE(c.settle);
  EXPECT_EQ(c.candidates, (std::vector<Mode>{Mode::Sequential, Mode::Fused}));
  c = choose_from_model({10, 12, 15});  // a close call: everything measured
  EXPECT_EQ(c.candidates, (std::vector<Mode>{Mode::Sequential, Mode::Shaped, Mode::Fused}));
}

// Auto over a subset of candidates: the same schedule over two modes, then the choice among them
// (sequential not measured: the lower median wins).
TEST(ModelChoice, AutoScheduleOverCandidates) {
  detail::AutoMode a(2);
  a.set_candidates({Mode::Shaped, Mode::Fused});
  const Mode H = Mode::Shaped, F = Mode::Fused;
  const Mode order[] = {H, H, H, F, F, F};  // per candidate a lead-in and 2 timed calls
  for (int call = 0; call < 6; ++call) {
    EXPECT_EQ(a.next(), order[call]) << "call " << call;
    EXPECT_EQ(a.record(a.next() == F ? 2.0 : 3.0), call == 5) << "call " << call;
  }
  EXPECT_EQ(a.sample_modes(), (std::vector<Mode>{H, H, F, F}));
  EXPECT_EQ(detail::choose_auto_mode(a.samples(), a.sample_modes()), Mode::Fused);
  detail::AutoMode one(3);
  one.set_candidates({Mode::Shaped});
  ASSERT_TRUE(one.choice());
  EXPECT_EQ(*one.choice(), Mode::Shaped);
}

TEST(ModelShape, ParsesAndRefuses) {
  const OpShape s = parse_shape(parse_op("gemv_allreduce"), "M=4096,K=1024,n=2");
  EXPECT_EQ(s.m, 4096u);
  EXPECT_EQ(s.k, 1024u);
  EXPECT_EQ(s.n, 2u);
  const OpShape e = parse_shape(OpKind::EmbeddingAllToAll, "batch=512,dim=64,tables=4,pool=20");
  EXPECT_EQ(e.m, 512u);
  EXPECT_EQ(e.n, 64u);
  EXPECT_EQ(e.tables, 4u);
  EXPECT_EQ(e.pool, 20u);
  auto refused = [](const char* op, const char* text, const char* needle) {
    try {
      parse_shape(parse_op(op), text);
      ADD_FAILURE() << text << ": no error";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  refused("gemv_allreduce", "M=4096,Q=3", "key 'q'");
  refused("gemv_allreduce", "M=40x", "m=40x");
  refused("gemv_allreduce", "M=4096", "needs m, k and n");
  refused("gemv", "M=1", "op 'gemv'");
}

TEST(ModelProfile, RoundTripsThroughJson) {
  const std::string dir = temp_dir("roundtrip");
  Profile p = round_profile();
  p.host = "h";
  p.version = version();
  p.gemv.rms = 1e-7;
  p.gemv.points = 12;
  p.gemv.table = {{16, 256, 1e-6}, {1024, 16384, 2e-5}};
  p.gemv_warm.table = {{16, 256, 5e-7}};
  p.embedding_warm.table = {{8, 512, 4e-7}};
  p.reduce_hot.c = {0, 1e-11, 0};
  p.reduce_hot.points = 4;
  p.cache_bytes = 32 << 20;
  p.l2_bytes = 1 << 20;
  p.shm.bulk_beta = 0.15e-9;
  p.link_bytes_per_s = 0.95e9 / 8;
  save_profile(p, dir + "/sub/p.json");  // creates the directory
  const Profile q = load_profile(dir + "/sub/p.json");
  EXPECT_EQ(to_json_text(q), to_json_text(p));
  EXPECT_EQ(q.mpi.time.c[1], 2e-9);
  ASSERT_EQ(q.gemv.table.size(), 2u);
  EXPECT_EQ(q.gemv.table[1].t, 2e-5);
  EXPECT_EQ(q.shm.bulk_beta, 0.15e-9);
  EXPECT_EQ(q.gemv_warm.table.size(), 1u);
  EXPECT_EQ(q.embedding_warm.table.size(), 1u);
  EXPECT_EQ(q.reduce_hot.points, 4);
  EXPECT_EQ(q.cache_bytes, 32 << 20);
  EXPECT_EQ(q.l2_bytes, 1 << 20);
  EXPECT_EQ(q.link_bytes_per_s, 0.95e9 / 8);
  // The simulator's default link is the measured one (else the MPI path's 1 / beta).
  EXPECT_EQ(SimCosts::from(q).net.link_bytes_per_s, 0.95e9 / 8);
  // A profile from before the tables and the bulk copy still loads: the line, the ping-pong.
  nlohmann::json old = nlohmann::json::parse(to_json_text(p));
  old["compute"]["gemv"].erase("table");
  old["paths"]["shm"].erase("bulk_beta");
  old["compute"].erase("gemv_warm");
  old["compute"].erase("embedding_warm");
  old["compute"].erase("reduce_hot");
  old.erase("cache_bytes");
  old.erase("l2_bytes");
  old["paths"].erase("link_bytes_per_s");
  std::ofstream(dir + "/old.json") << old.dump();
  const Profile o = load_profile(dir + "/old.json");
  EXPECT_TRUE(o.gemv.table.empty());
  EXPECT_EQ(o.shm.bulk_beta, 0);
  EXPECT_TRUE(o.gemv_warm.table.empty());
  EXPECT_TRUE(o.embedding_warm.table.empty());
  EXPECT_EQ(o.reduce_hot.points, 0);
  EXPECT_EQ(o.cache_bytes, 0);
  EXPECT_EQ(o.l2_bytes, 0);
  EXPECT_EQ(o.link_bytes_per_s, 0);
  EXPECT_EQ(SimCosts::from(o).net.link_bytes_per_s, 1 / o.mpi.beta());
  std::filesystem::remove_all(dir);
}

// Damaged files of every kind are an Error naming the file, never a crash or a half-read profile.
TEST(ModelProfile, DamagedFilesAreErrorsNamingTheFile) {
  const std::string dir = temp_dir("damaged");
  const nlohmann::json good = nlohmann::json::parse(to_json_text(round_profile()));
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return j.dump();
  };
  const std::vector<std::string> texts = {
      "",
      "[]",
      "null",
      good.dump().substr(0, good.dump().size() / 2),                        // truncated
      with([](nlohmann::json& j) { j["format"] = "tilecomm-profile-0"; }),  // foreign
      with([](nlohmann::json& j) { j["overheads"].erase("proxy_s"); }),     // a field missing
      with([](nlohmann::json& j) { j["cus"] = "one"; }),                    // a wrong type
      with([](nlohmann::json& j) {
        j["compute"]["gemv"]["c"] = {1.0, 2.0};
      }),  // too short
      with([](nlohmann::json& j) { j["paths"]["mpi"]["time"] = nullptr; }),
      with([](nlohmann::json& j) {
        j["compute"]["gemm"]["table"] = {{1.0, 2.0}};
      }),  // short
      with([](nlohmann::json& j) { j["compute"]["gemm"]["table"] = "points"; }),
      with([](nlohmann::json& j) { j["paths"]["shm"]["bulk_beta"] = "fast"; }),
  };
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string path = dir + "/damaged" + std::to_string(i) + ".json";
    std::ofstream(path) << texts[i];
    try {
      load_profile(path);
      ADD_FAILURE() << "text " << i << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << i;
      EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

// An explicitly named profile (option or TILECOMM_PROFILE) must exist and parse: an Error naming
// the file. The default path: absent = silently none; corrupt = a warning and none.
TEST(ModelProfile, ExplicitMissingOrCorruptIsAnErrorDefaultFallsBack) {
  const std::string dir = temp_dir("resolve");
  const std::string corrupt = dir + "/corrupt.json", missing = dir + "/missing.json";
  std::ofstream(corrupt) << "{\"format\": \"tilecomm-profile-1\", \"host\": ";
  Profile out;
  const Env none = env_of({{"XDG_CACHE_HOME", dir}});
  for (const std::string& path : {corrupt, missing}) {
    for (const bool by_env : {false, true}) {
      try {
        if (by_env)
          resolve_profile("", out, env_of({{"TILECOMM_PROFILE", path}, {"XDG_CACHE_HOME", dir}}));
        else
          resolve_profile(path, out, none);
        ADD_FAILURE() << path << ": no error";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
      }
    }
  }
  std::ofstream(dir + "/foreign.json") << "{\"format\": \"other\"}";
  EXPECT_THROW(resolve_profile(dir + "/foreign.json", out, none), Error);
  // The default path (<XDG_CACHE_HOME>/tilecomm/profile-<host>-<version>.json) is absent.
  EXPECT_EQ(default_profile_path(none).rfind(dir + "/tilecomm/profile-", 0), 0u);
  EXPECT_FALSE(resolve_profile("", out, none));
  EXPECT_EQ(default_profile_path(env_of({})), "");
  EXPECT_FALSE(resolve_profile("", out, env_of({})));
  // "none" ignores even an explicit TILECOMM_PROFILE.
  EXPECT_FALSE(resolve_profile("none", out, env_of({{"TILECOMM_PROFILE", missing}})));
  // Present and valid at the default path: used. Corrupt there: a warning, none.
  save_profile(round_profile(), default_profile_path(none));
  EXPECT_TRUE(resolve_profile("", out, none));
  EXPECT_EQ(out.flag_s, 0.5e-6);
  std::ofstream(default_profile_path(none)) << "not json";
  EXPECT_FALSE(resolve_profile("", out, none));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tilecomm::model
