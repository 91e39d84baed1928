// libFuzzer target: GemmAllToAll::run routing checks (recv/send count spans, sizes, capacities) on
// a single-rank communicator. Contract checked: bad routing raises Error(InvalidArgument) or
// Error(Mismatch) naming GemmAllToAll; accepted routing gives exactly x_g W_g for every row.
#include <map>
#include <memory>
#include <vector>

#include "fuzz_common.hpp"

using namespace tilecomm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in{data, size};
  constexpr std::size_t k = 2, n = 3, max_rows = 8;
  const std::size_t experts = 1 + in.byte() % 2;
  static std::map<std::size_t, std::unique_ptr<GemmAllToAll>> ops;
  auto& op = ops[experts];
  if (!op)
    op = std::make_unique<GemmAllToAll>(fuzz::self_comm(), fuzz::small_device(), experts, k, n,
                                        max_rows, max_rows);
  std::vector<std::vector<float>> w(experts, std::vector<float>(k * n));
  std::vector<const float*> wp;
  for (std::size_t e = 0; e < experts; ++e) {
    for (std::size_t i = 0; i < k * n; ++i)
      w[e][i] = fuzz::small_int(e * 100 + i);
    wp.push_back(w[e].data());
  }
  // Counts: usually the right span sizes (experts x 1 rank; experts global), sometimes not.
  const std::size_t nrecv = in.byte() % 8 == 0 ? in.byte() % 4 : experts;
  const std::size_t nsend = in.byte() % 8 == 0 ? in.byte() % 4 : experts;
  std::vector<std::size_t> recv(nrecv), send(nsend);
  for (auto& c : recv)
    c = static_cast<std::size_t>(in.value());
  for (std::size_t g = 0; g < nsend; ++g)
    send[g] = (in.byte() % 4 != 0 && g < nrecv) ? recv[g] : static_cast<std::size_t>(in.value());
  std::vector<float> x(max_rows * k), y(max_rows * n + 1, -7.0f);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = fuzz::small_int(i + 7);
  const Mode mode = static_cast<Mode>(in.byte() % 3);
  try {
    op->run(wp, x.data(), recv, send, y.data(), mode);
  } catch (const Error& e) {
    fuzz::require(e.code() == ErrorCode::InvalidArgument || e.code() == ErrorCode::Mismatch,
                  "error code is InvalidArgument or Mismatch");
    fuzz::require(e.message().find("GemmAllToAll") != std::string::npos,
                  "error names the operator");
    return 0;
  }
  // Accepted: spans the right size, counts paired and within capacity, results exact.
  fuzz::require(nrecv == experts && nsend == experts, "span sizes");
  std::size_t rows = 0;
  for (std::size_t g = 0; g < experts; ++g) {
    fuzz::require(send[g] == recv[g], "counts pair up");
    rows += recv[g];
  }
  fuzz::require(rows <= max_rows, "rows within capacity");
  std::size_t row = 0;
  for (std::size_t g = 0; g < experts; ++g)
    for (std::size_t i = 0; i < recv[g]; ++i, ++row)
      for (std::size_t j = 0; j < n; ++j) {
        float ref = 0;
        for (std::size_t kk = 0; kk < k; ++kk)
          ref += x[row * k + kk] * w[g][kk * n + j];
        fuzz::require(y[row * n + j] == ref, "result equals the reference");
      }
  fuzz::require(y[rows * n] == -7.0f || rows == max_rows, "nothing written past the routed rows");
  return 0;
}
