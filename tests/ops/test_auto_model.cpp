// Mode::Auto with a cost profile (docs/model.md): hand-made profiles, written here, that make the
// model pick sequential or fused by more than its margin (4x); Auto settles on the first call with
// no trial calls, on the same mode on every rank, also when the ranks' profiles differ; a mode
// predicted best by less than the margin (shaped: overlap gains under 2x) is measured, not
// trusted; a close call measures the plausible modes only; a rank without a profile makes every
// rank measure; a named profile that is missing or corrupt is an Error naming the file.
#include <filesystem>
#include <fstream>
#include <string>

#include "ops/model/predict.hpp"
#include "ops/model/profile.hpp"
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

using model::Profile;

// A directory shared by the job's ranks (rank 0's pid), removed by rank 0 at the end.
class ProfileDir {
 public:
  ProfileDir() {
    int pid = ::getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    dir_ = (std::filesystem::temp_directory_path() / ("tilecomm_auto_model_" + std::to_string(pid)))
               .string();
    std::filesystem::create_directories(dir_);
  }
  ~ProfileDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir_);
  }
  // This rank's file `name`.
  std::string write(const Profile& p, const std::string& name) const {
    const std::string path = dir_ + "/" + name + ".rank" + std::to_string(world_rank()) + ".json";
    model::save_profile(p, path);
    return path;
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// Every figure zero but one second per GEMV tile: the cases below add what decides them.
Profile base() {
  Profile p;
  p.gemv.c = {1, 0, 0};
  p.shm.measured = p.mpi.measured = true;
  return p;
}
// One launch costs half a tile; flags, messages' CPU and the proxy a tile each: chunking and
// per-tile messages only add (2 tiles, p >= 2: sequential 1.5, fused 2.5+, shaped 3.5), but by
// less than the model's 4x margin.
Profile sequential_ahead() {
  Profile p = base();
  p.launch_s = 0.5;
  p.flag_s = p.proxy_s = 1;
  p.mpi.cpu_send.c = p.mpi.cpu_recv.c = {1, 0};
  return p;
}
// By more than 4x, with tiles of 128 rows (8 tiles) and 8 chunks: a launch costs 2 tiles, a flag
// and the proxy 20 each (p >= 2: sequential 6, shaped 26 = 8 launches + its compute on one CU of
// two, fused 26 = a launch, 4 tiles, 20 of proxy).
Profile sequential_wins() {
  Profile p = base();
  p.launch_s = 2;
  p.flag_s = p.proxy_s = 20;
  return p;
}
// Messages' latency 10 tiles: the collective (2 (p - 1) latencies) dwarfs fused's one tail.
Profile fused_wins() {
  Profile p = base();
  p.shm.time.c = p.mpi.time.c = {10, 0};
  return p;
}
// A bandwidth-bound collective as long as half the compute (8 tiles on 2 CUs: 4 s; AllReduce of
// the 4 KiB result: 4 s), overlapped by 4 chunks; fused's flags and proxy cost 10 tiles each.
Profile shaped_wins(int ranks) {
  Profile p = base();
  const double share = (ranks - 1.0) / ranks * 4096;  // bytes per rank per step
  p.shm.time.c = p.mpi.time.c = {0, 2.0 / share};
  p.flag_s = p.proxy_s = 10;
  return p;
}

RuntimeConfig two_cus() {
  RuntimeConfig c = RuntimeConfig::from_env();
  c.num_cus = 2;
  c.wg_slots_per_cu = 2;
  return c;
}

struct Gemv {
  static constexpr std::size_t m = 1024, k = 8;
  Gemv(Communicator& comm, Device& dev, const OpOptions& o) : op(comm, dev, m, k, o) {
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = small_int(i * 7 + comm.rank());
    for (std::size_t i = 0; i < k; ++i)
      x[i] = small_int(i + 31 * comm.rank());
    op.run(w.data(), x.data(), ref.data(), Mode::Sequential);  // explicit: not counted
  }
  // One Auto call, checked against sequential's result.
  void auto_call() {
    std::fill(y.begin(), y.end(), -1.0f);
    op.run(w.data(), x.data(), y.data(), Mode::Auto);
    EXPECT_EQ(y, ref);
  }
  GemvAllReduce op;
  std::vector<float> w = std::vector<float>(m * k), x = std::vector<float>(k),
                     ref = std::vector<float>(m), y = std::vector<float>(m);
};

void expect_same_everywhere(Mode mine) {
  const int me = static_cast<int>(mine);
  std::vector<int> all(world_size());
  MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < world_size(); ++r)
    EXPECT_EQ(all[r], me) << "rank " << r << " settled on another mode";
}

// Settled on the first Auto call (no trial calls) on `want`, on every rank; later calls keep it.
void expect_settles_at_once(const Profile& p, std::size_t tile, Mode want, const char* name,
                            int chunks = 4) {
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  OpOptions o;
  o.tile = tile;
  o.shaped.chunks = chunks;
  o.profile = dir.write(p, name);
  Gemv g(comm, dev, o);
  EXPECT_FALSE(g.op.auto_choice()) << "before the first Auto call";
  g.auto_call();
  ASSERT_TRUE(g.op.auto_choice()) << name << ": not settled by the first call";
  EXPECT_EQ(*g.op.auto_choice(), want) << name;
  expect_same_everywhere(*g.op.auto_choice());
  for (int call = 0; call < 3; ++call) {
    g.auto_call();
    EXPECT_EQ(*g.op.auto_choice(), want);
  }
}

// With one rank fused is sequential's work (nothing to send): a tie, so sequential needs peers.
TEST(AutoModel, SequentialSettlesAtOnce) {
  if (world_size() < 2) GTEST_SKIP() << "one rank: fused ties sequential";
  expect_settles_at_once(sequential_wins(), 128, Mode::Sequential, "sequential", 8);
}

// Across nodes the model charges fused_wins()'s fused one message latency where sequential's
// AllReduce pays 2 (p - 1) of them: with 3 ranks never more than 4x apart, the margin, so Auto
// measures there (ShapedIsMeasuredNotTrusted covers that path). On one node fused sends nothing
// through MPI.
bool fused_can_win_by_the_margin() {
  Communicator comm(MPI_COMM_WORLD);
  return comm.num_nodes() == 1 || 2 * (comm.size() - 1) > 1 + model::kModelMargin;
}

// With one rank there is no collective to hide: fused and shaped cannot win.
TEST(AutoModel, FusedSettlesAtOnce) {
  if (world_size() < 2) GTEST_SKIP() << "one rank: nothing to overlap";
  if (!fused_can_win_by_the_margin()) GTEST_SKIP() << "3 ranks across nodes: fused under 4x ahead";
  expect_settles_at_once(fused_wins(), 512, Mode::Fused, "fused");
}

// The model picks shaped, but by less than its 4x margin (overlap gains under 2x over
// sequential): Auto measures on its first calls instead of settling, then settles alike on every
// rank (auto_rounds = 1: a pass of 3 candidates x 2 calls, + 2 more passes if not clear).
TEST(AutoModel, ShapedIsMeasuredNotTrusted) {
  if (world_size() < 2) GTEST_SKIP() << "one rank: nothing to overlap";
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  OpOptions o;
  o.tile = 128;
  o.auto_rounds = 1;
  o.auto_min_trial_ms = 0;  // the schedule counted below: no short-trial rounds
  o.profile = dir.write(shaped_wins(world_size()), "shaped");
  Gemv g(comm, dev, o);
  g.auto_call();
  EXPECT_FALSE(g.op.auto_choice()) << "settled at once on a prediction under the margin";
  for (int call = 1; call < 18 && !g.op.auto_choice(); ++call)
    g.auto_call();
  ASSERT_TRUE(g.op.auto_choice()) << "not settled after 3 passes of 3 candidates x 2 calls";
  expect_same_everywhere(*g.op.auto_choice());
}

// Rank 0's profile alone picks fused; the others' alone predict sequential best. The slowest
// rank's prediction of each mode decides: fused (1 s against 21 and 41), on every rank, at once.
TEST(AutoModel, RanksWithDifferentProfilesAgree) {
  if (world_size() < 2) GTEST_SKIP() << "one rank: nothing to agree on";
  if (!fused_can_win_by_the_margin()) GTEST_SKIP() << "3 ranks across nodes: fused under 4x ahead";
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  OpOptions o;
  o.tile = 512;
  o.profile = dir.write(comm.rank() == 0 ? fused_wins() : sequential_ahead(), "mixed");
  Gemv g(comm, dev, o);
  g.auto_call();
  ASSERT_TRUE(g.op.auto_choice());
  EXPECT_EQ(*g.op.auto_choice(), Mode::Fused);
  expect_same_everywhere(*g.op.auto_choice());
}

// A profile also cuts GEMV's one-shot blocks across nodes for the path it measured (off_node_path):
// here 100 Gbit/s on rank 0 (one block per WG slot: 256-row tiles) and 1 MB/s elsewhere (about 20
// blocks: 64-row tiles). The ranks must still cut one tiling: fused (and every mode, without Auto)
// matches sequential on every rank.
TEST(AutoModel, RanksWithDifferentPathsCutOneTiling) {
  if (world_size() < 2) GTEST_SKIP() << "one rank: nothing to agree on";
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  Profile p = base();
  p.link_bytes_per_s = comm.rank() == 0 ? 12.5e9 : 1e6;
  p.mpi.cpu_send.c = {8.1e-6, 0, 0};
  p.mpi.cpu_recv.c = {0.5e-6, 0, 0};
  OpOptions o;
  o.profile = dir.write(p, "paths");
  Gemv g(comm, dev, o);
  for (Mode mode : {Mode::Fused, Mode::Shaped}) {
    std::fill(g.y.begin(), g.y.end(), -1.0f);
    g.op.run(g.w.data(), g.x.data(), g.y.data(), mode);
    EXPECT_EQ(g.y, g.ref) << to_string(mode);
  }
}

// Sequential 1.5 s, shaped 3.5 s (within 4x), fused 21.5 s (its flags and proxy cost 20 s):
// only sequential and shaped are measured: a pass of a lead-in and auto_rounds = 1 measured call
// each (and one or two more passes when the two are not clear apart).
TEST(AutoModel, ACloseCallMeasuresThePlausibleModesOnly) {
  if (world_size() < 2) GTEST_SKIP() << "one rank: fused is sequential's work, nothing to flag";
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  Profile p = base();
  p.launch_s = 0.5;
  p.flag_s = p.proxy_s = 20;
  OpOptions o;
  o.tile = 512;
  o.auto_rounds = 1;
  o.auto_min_trial_ms = 0;  // the schedule counted below: no short-trial rounds
  o.profile = dir.write(p, "close");
  Gemv g(comm, dev, o);
  for (int call = 0; call < 12 && !g.op.auto_choice(); ++call) {
    EXPECT_FALSE(call < 4 && g.op.auto_choice().has_value()) << "before call " << call;
    g.auto_call();
  }
  ASSERT_TRUE(g.op.auto_choice())
      << "two candidates x 2 calls a pass: settled after 4, 8 or 12 calls";
  EXPECT_NE(*g.op.auto_choice(), Mode::Fused);
  expect_same_everywhere(*g.op.auto_choice());
}

// One rank without a profile ("none"): every rank measures all three modes.
TEST(AutoModel, ARankWithoutAProfileMakesAllMeasure) {
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  OpOptions o;
  o.tile = 512;
  o.auto_rounds = 1;
  o.auto_min_trial_ms = 0;  // the schedule counted below: no short-trial rounds
  o.profile = comm.rank() == world_size() - 1 ? "none" : dir.write(sequential_wins(), "some");
  Gemv g(comm, dev, o);
  for (int call = 0; call < 18 && !g.op.auto_choice(); ++call) {
    EXPECT_FALSE(call < 6 && g.op.auto_choice().has_value()) << "before call " << call;
    g.auto_call();
  }
  ASSERT_TRUE(g.op.auto_choice()) << "three candidates x 2 calls a pass: settled after 6, 12 or 18";
  expect_same_everywhere(*g.op.auto_choice());
}

// A named profile that is missing or corrupt: Error(InvalidArgument) naming the file, from the
// constructor, before any communication (every rank names the same bad file here).
TEST(AutoModel, MissingOrCorruptNamedProfileIsAnError) {
  ProfileDir dir;
  Communicator comm(MPI_COMM_WORLD);
  Device dev(two_cus());
  const std::string corrupt = dir.path("corrupt.rank" + std::to_string(comm.rank()) + ".json");
  std::ofstream(corrupt) << "{\"format\": \"tilecomm-profile-1\"";
  for (const std::string& path : {dir.path("missing.json"), corrupt}) {
    OpOptions o;
    o.profile = path;
    try {
      GemvAllReduce op(comm, dev, 64, 4, o);
      ADD_FAILURE() << path << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
    }
  }
  // Nothing was communicated: the communicator still works.
  GemvAllReduce ok(comm, dev, 64, 4);
}

}  // namespace
}  // namespace tilecomm::test
