// The shared Communicator, the grid's options and small helpers (see coll_test_util.hpp).
#include "coll_test_util.hpp"

#include <cstdlib>
#include <stdexcept>

namespace tct {
namespace {

std::unique_ptr<tilecomm::Communicator>& comm_slot() {
  static std::unique_ptr<tilecomm::Communicator> c;
  return c;
}

// Destroys the shared Communicator after the last test, before the main calls MPI_Finalize.
class CommEnvironment : public testing::Environment {
 public:
  void TearDown() override { comm_slot().reset(); }
};
[[maybe_unused]] testing::Environment* const kEnv =
    testing::AddGlobalTestEnvironment(new CommEnvironment);

Options parse_options() {
  Options o;
  // gtest keeps the full argv (its own flags are removed only from the caller's copy).
  const std::vector<std::string> args = testing::internal::GetArgvs();
  for (std::size_t i = 1; i + 1 < args.size(); ++i) {
    if (args[i] == "--coll")
      o.coll = args[++i];
    else if (args[i] == "--algo")
      o.algo = args[++i];
    else if (args[i] == "--counts")
      o.counts = args[++i];
    else if (args[i] == "--expect")
      o.expect = args[++i];
  }
  return o;
}

}  // namespace

tilecomm::Communicator& comm() {
  auto& c = comm_slot();
  if (!c) c = std::make_unique<tilecomm::Communicator>(MPI_COMM_WORLD);
  return *c;
}

const Options& options() {
  static const Options o = parse_options();
  return o;
}

const char* env_var_of(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "TILECOMM_ALLREDUCE";
    case Collective::ReduceScatter:
      return "TILECOMM_REDUCE_SCATTER";
    case Collective::AllGather:
      return "TILECOMM_ALLGATHER";
    case Collective::AllToAll:
    case Collective::AllToAllv:
      return "TILECOMM_ALLTOALL";
    case Collective::Broadcast:
      return "TILECOMM_BROADCAST";
  }
  return "?";
}

std::string env_forced(Collective c) {
  const char* v = std::getenv(env_var_of(c));
  return v ? std::string(v) : std::string();
}

Collective collective_from(const std::string& name) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::AllToAll, Collective::AllToAllv, Collective::Broadcast})
    if (tilecomm::to_string(c) == name) return c;
  throw std::invalid_argument("unknown collective '" + name + "'");
}

std::vector<std::string> auto_and_names(Collective c) {
  std::vector<std::string> v{"auto"};
  for (auto& n : tilecomm::algorithm_names(c))
    v.push_back(n);
  return v;
}

bool all_agree(bool v, const char* what) {
  int mine = v ? 1 : 0, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks disagree on " << what;
  return lo == 1;
}

}  // namespace tct
