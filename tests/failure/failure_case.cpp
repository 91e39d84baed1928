// One failure scenario under mpiexec, for tests/failure/run_failure_case.sh to judge.
//
//   failure_case --op allreduce|gemv|embedding|gemm --fault never|exit|abort [--absent R]
//
// Every rank makes one good call of the operation (so connections exist), then rank R (default:
// the last) misbehaves before the second call: `never` skips it and waits in MPI_Barrier on
// MPI_COMM_WORLD (not tilecomm's communicator) until the others are done; `exit` calls _exit(0);
// `abort` calls std::abort(). Every other rank makes the call and prints one line
//   RESULT rank=<r> code=<OK|Timeout|...> elapsed=<seconds> msg=<what()>
// then joins the world barrier. The Communicator is leaked on purpose: after a timeout its shared
// flags and MPI requests are out of step, and destroying it is collective (docs/failure.md).
// The operation, algorithm and deadline come from the environment (TILECOMM_ALLREDUCE,
// TILECOMM_NODE_SIZE, TILECOMM_TIMEOUT_S, TILECOMM_CHECK).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tilecomm/tilecomm.hpp"

using namespace tilecomm;

namespace {

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

RuntimeConfig small_device() {
  RuntimeConfig c = RuntimeConfig::from_env();
  c.num_cus = 2;
  c.wg_slots_per_cu = 2;
  return c;
}

// Runs `fn` once more after the failure and prints "AFTER rank=<r> what=<what> code=<c> ...".
void after(int rank, const char* what, const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string code = "OK", msg;
  try {
    fn();
  } catch (const Error& e) {
    code = std::string(to_string(e.code()));
    msg = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("AFTER rank=%d what=%s code=%s elapsed=%.2f msg=%s\n", rank, what, code.c_str(), s,
              msg.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string op = arg(argc, argv, "--op", "allreduce");
  const std::string fault = arg(argc, argv, "--fault", "never");
  const int absent = std::stoi(arg(argc, argv, "--absent", std::to_string(size - 1).c_str()));

  auto* comm = new Communicator(MPI_COMM_WORLD);  // leaked: see the file comment
  auto* dev = new Device(small_device());
  std::function<void()> call;

  // AllReduce of 4096 floats (the algorithm comes from TILECOMM_ALLREDUCE).
  std::vector<float> send(4096, 1.0f), recv(4096);
  // GemvAllReduce, fused, m = 256, k_local = 64.
  const std::size_t m = 256, k = 64;
  std::vector<float> w(m * k, 1.0f), x(k, 1.0f), y(m);
  GemvAllReduce* gemv = nullptr;
  // EmbeddingAllToAll, fused: one table of 16 rows x 8 per rank, a global batch of 4 bags.
  const std::size_t dim = 8, batch = 4;
  std::vector<float> table(16 * dim, 1.0f);
  std::vector<std::int64_t> idx = {0, 1, 2, 3}, off = {0, 1, 2, 3, 4};
  EmbeddingAllToAll* emb = nullptr;
  std::vector<float> out;
  // GemmAllToAll, fused: one 4x4 expert per rank, every rank routes one row to every expert.
  const std::size_t gk = 4, gn = 4;
  std::vector<float> gw(gk * gn, 1.0f), gx(size * gk, 1.0f), gy(size * gn);
  std::vector<std::size_t> gcounts(size, 1);
  GemmAllToAll* gemm = nullptr;

  if (op == "allreduce") {
    call = [&] {
      allreduce(*comm, send.data(), recv.data(), send.size(), DataType::Float32, ReduceOp::Sum);
    };
  } else if (op == "gemv") {
    gemv = new GemvAllReduce(*comm, *dev, m, k);
    call = [&] { gemv->run(w.data(), x.data(), y.data(), Mode::Fused); };
  } else if (op == "embedding") {
    emb = new EmbeddingAllToAll(*comm, *dev, {16}, dim, batch, Pooling::Sum);
    out.resize(emb->local_batch() * emb->num_tables() * dim);
    call = [&] {
      const float* tables[] = {table.data()};
      EmbeddingBags bags[] = {{idx, off, {}}};
      emb->run(tables, bags, out.data(), Mode::Fused);
    };
  } else if (op == "gemm") {
    gemm = new GemmAllToAll(*comm, *dev, 1, gk, gn, size, size);
    call = [&] {
      const float* weights[] = {gw.data()};
      gemm->run(weights, gx.data(), gcounts, gcounts, gy.data(), Mode::Fused);
    };
  } else {
    std::fprintf(stderr, "failure_case: unknown --op %s\n", op.c_str());
    return 2;
  }

  call();  // every rank: the good call
  std::fflush(stdout);

  if (rank == absent) {
    if (fault == "exit") _exit(0);
    if (fault == "abort") std::abort();
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    std::string code = "OK", msg;
    try {
      call();
    } catch (const Error& e) {
      code = std::string(to_string(e.code()));
      msg = e.what();
    } catch (const std::exception& e) {
      code = "std::exception";
      msg = e.what();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("RESULT rank=%d code=%s elapsed=%.2f msg=%s\n", rank, code.c_str(), s, msg.c_str());
    std::fflush(stdout);
    if (code == "Timeout") {
      // After a failed call, the same call, a new operator on the communicator and a collective
      // must all be refused at once, saying why (never a hang or a crash).
      std::vector<float> buf(4, 1.0f);
      after(rank, "same-call", call);
      after(rank, "new-operator", [&] { GemvAllReduce again(*comm, *dev, 256, 64); });
      after(rank, "collective", [&] {
        allreduce(*comm, buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum);
      });
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Pending requests on the leaked communicator may keep MPI_Finalize waiting: leave directly.
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 0);
  return 0;
}
