// Env::parse: the one reader of TILECOMM_* variables.
#include <gtest/gtest.h>

#include <map>

#include "helpers.hpp"

namespace tilecomm {
namespace {

Env parse(std::map<std::string, std::string> vars) {
  return Env::parse([vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(Env, UnsetAndEmptyKeepDefaults) {
  const Env def;
  for (const Env& e : {parse({}), parse({{"TILECOMM_CUS", ""},
                                         {"TILECOMM_LDS_BYTES", ""},
                                         {"TILECOMM_PIN", ""},
                                         {"TILECOMM_SPIN_US", ""},
                                         {"TILECOMM_TIMEOUT_S", ""},
                                         {"TILECOMM_SHM_BYTES", ""}})}) {
    EXPECT_EQ(e.cus, def.cus);
    EXPECT_EQ(e.wg_slots, 2);
    EXPECT_EQ(e.lds_bytes, std::size_t{64} << 10);
    EXPECT_TRUE(e.pin);
    EXPECT_EQ(e.spin_us, 50.0);
    EXPECT_EQ(e.timeout_s, 300.0);
    EXPECT_EQ(e.shm_bytes, std::size_t{8} << 20);
    EXPECT_TRUE(e.trace.empty());
  }
}

TEST(Env, ParsesValidValues) {
  const Env e = parse({{"TILECOMM_CUS", "4"},
                       {"TILECOMM_WG_SLOTS", "3"},
                       {"TILECOMM_LDS_BYTES", "32768"},
                       {"TILECOMM_PIN", "off"},
                       {"TILECOMM_TRACE", "/tmp/t.json"},
                       {"TILECOMM_SPIN_US", "12.5"},
                       {"TILECOMM_TIMEOUT_S", "0"},
                       {"TILECOMM_ALLREDUCE", "ring"},
                       {"TILECOMM_NODE_SIZE", "2"},
                       {"TILECOMM_CHECK", "yes"}});
  EXPECT_EQ(e.cus, 4);
  EXPECT_EQ(e.wg_slots, 3);
  EXPECT_EQ(e.lds_bytes, 32768u);
  EXPECT_FALSE(e.pin);
  EXPECT_EQ(e.trace, "/tmp/t.json");
  EXPECT_EQ(e.spin_us, 12.5);
  EXPECT_EQ(e.timeout_s, 0.0);
  EXPECT_EQ(e.allreduce, "ring");
  EXPECT_EQ(e.node_size, 2);
  EXPECT_TRUE(e.check);
}

TEST(Env, ByteSuffixes) {
  EXPECT_EQ(parse({{"TILECOMM_LDS_BYTES", "48K"}}).lds_bytes, std::size_t{48} << 10);
  EXPECT_EQ(parse({{"TILECOMM_LDS_BYTES", "48k"}}).lds_bytes, std::size_t{48} << 10);
  EXPECT_EQ(parse({{"TILECOMM_LDS_BYTES", "2M"}}).lds_bytes, std::size_t{2} << 20);
  EXPECT_EQ(parse({{"TILECOMM_SHM_BYTES", "1G"}}).shm_bytes, std::size_t{1} << 30);
  EXPECT_EQ(parse({{"TILECOMM_SHM_BYTES", "16m"}}).shm_bytes, std::size_t{16} << 20);
}

void expect_bad(const std::string& name, const std::string& value) {
  SCOPED_TRACE(name + "=" + value);
  try {
    parse({{name, value}});
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find(name), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("'" + value + "'"), std::string::npos) << e.what();
  }
}

TEST(Env, BadValuesNameTheVariableAndTheValue) {
  expect_bad("TILECOMM_CUS", "abc");
  expect_bad("TILECOMM_CUS", "-1");
  expect_bad("TILECOMM_CUS", "4x");
  expect_bad("TILECOMM_WG_SLOTS", "0");
  expect_bad("TILECOMM_PIN", "maybe");
  expect_bad("TILECOMM_SPIN_US", "nan");
  expect_bad("TILECOMM_SPIN_US", "-1");
  expect_bad("TILECOMM_TIMEOUT_S", "soon");
  expect_bad("TILECOMM_NODE_SIZE", "1e3");
  expect_bad("TILECOMM_CHECK", "2");
  expect_bad("TILECOMM_ISA", "sse2");
  // The message quotes the value as given, suffix included.
  expect_bad("TILECOMM_LDS_BYTES", "1.5M");
  expect_bad("TILECOMM_LDS_BYTES", "2G");  // above the 1 GiB limit
  expect_bad("TILECOMM_LDS_BYTES", "K");
  expect_bad("TILECOMM_LDS_BYTES", "-4K");
  expect_bad("TILECOMM_SHM_BYTES", "12T");
}

TEST(Env, DescribeListsEveryVariable) {
  const Env e = parse({{"TILECOMM_CUS", "7"}});
  const auto rows = e.describe();
  EXPECT_EQ(rows.size(), 17u);
  bool found = false;
  for (const auto& r : rows) {
    EXPECT_EQ(r.name.rfind("TILECOMM_", 0), 0u);
    EXPECT_FALSE(r.doc.empty());
    if (r.name == "TILECOMM_CUS") found = r.value == "7";
  }
  EXPECT_TRUE(found);
}

// TILECOMM_PROFILE is a path, taken as given; the cache directory comes from XDG_CACHE_HOME, else
// $HOME/.cache, else nothing.
TEST(Env, ProfileAndCacheHome) {
  EXPECT_EQ(parse({}).profile, "");
  EXPECT_EQ(parse({{"TILECOMM_PROFILE", "/tmp/p.json"}}).profile, "/tmp/p.json");
  EXPECT_EQ(parse({}).cache_home, "");
  EXPECT_EQ(parse({{"HOME", "/home/u"}}).cache_home, "/home/u/.cache");
  EXPECT_EQ(parse({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/c"}}).cache_home, "/c");
}

// The launcher's local rank count is read but never an error: it is not our variable.
TEST(Env, LauncherLocalRanks) {
  EXPECT_EQ(parse({}).launcher_local_ranks, 0);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}).launcher_local_ranks, 4);
  EXPECT_EQ(parse({{"MPI_LOCALNRANKS", "3"}}).launcher_local_ranks, 3);
  EXPECT_EQ(
      parse({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MPI_LOCALNRANKS", "5"}}).launcher_local_ranks,
      2);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_LOCAL_SIZE", "two"}}).launcher_local_ranks, 0);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_LOCAL_SIZE", "-1"}}).launcher_local_ranks, 0);
}

TEST(Env, LauncherRankAndSize) {
  EXPECT_EQ(parse({}).launcher_rank, -1);
  EXPECT_EQ(parse({}).launcher_size, 0);
  const Env ompi = parse({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(ompi.launcher_rank, 3);
  EXPECT_EQ(ompi.launcher_size, 4);
  const Env hydra = parse({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(hydra.launcher_rank, 0);
  EXPECT_EQ(hydra.launcher_size, 2);
  EXPECT_EQ(parse({{"PMIX_RANK", "5"}}).launcher_rank, 5);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_RANK", "x"}}).launcher_rank, -1);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_RANK", ""}}).launcher_rank, -1);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_SIZE", "0"}}).launcher_size, 0);
}

// Several ranks never write one trace file (they used to, each overwriting the others').
TEST(Env, TracePathPerRank) {
  EXPECT_EQ(rank_trace_path("", 1, 2), "");
  EXPECT_EQ(rank_trace_path("t.json", -1, 0), "t.json");  // no launcher
  EXPECT_EQ(rank_trace_path("t.json", 0, 1), "t.json");   // one rank
  EXPECT_EQ(rank_trace_path("t.json", 1, 2), "t.rank1.json");
  EXPECT_EQ(rank_trace_path("/tmp/a.b/trace", 3, 4), "/tmp/a.b/trace.rank3");
  EXPECT_EQ(rank_trace_path("/tmp/.trace", 3, 4), "/tmp/.trace.rank3");
  EXPECT_EQ(rank_trace_path("out/%r/t%r.json", 2, 4), "out/2/t2.json");
  EXPECT_EQ(rank_trace_path("t%r.json", -1, 0), "t0.json");
  EXPECT_EQ(rank_trace_path("t%r.json", 10, 11), "t10.json");
}

TEST(Env, RuntimeConfigDefaultsMatchEnvDefaults) {
  const Env e;
  const RuntimeConfig c;
  EXPECT_EQ(c.num_cus, e.cus);
  EXPECT_EQ(c.wg_slots_per_cu, e.wg_slots);
  EXPECT_EQ(c.lds_bytes_per_cu, e.lds_bytes);
  EXPECT_EQ(c.pin_threads, e.pin);
  EXPECT_EQ(c.spin_us, e.spin_us);
}

}  // namespace
}  // namespace tilecomm
