#pragma once
// The MoE reference shared by the GemmAllToAll tests and the soak test (no GoogleTest here):
// expert layout, per-rank weights, one call's inputs and its exact expected output.
#include <cstddef>
#include <vector>

namespace tilecomm::test {

/// An MoE layout for GemmAllToAll tests: rank r holds experts_of(r) experts, numbered globally in
/// rank order. `first[r]` is rank r's first global expert, `first[p]` the job's expert count.
struct MoeExperts {
  std::vector<std::size_t> first;
  template <class ExpertsOf>
  MoeExperts(int p, ExpertsOf experts_of) : first(p + 1, 0) {
    for (int r = 0; r < p; ++r)
      first[r + 1] = first[r] + experts_of(r);
  }
  std::size_t total() const { return first.back(); }
  std::size_t local(int r) const { return first[r + 1] - first[r]; }

  /// Rank `me`'s expert weights, W(g, i, j) for global expert g, as [K x N] row-major each.
  template <class Wf>
  std::vector<std::vector<float>> weights(int me, std::size_t k, std::size_t n, Wf W) const {
    std::vector<std::vector<float>> w(local(me), std::vector<float>(k * n));
    for (std::size_t e = 0; e < w.size(); ++e)
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < n; ++j)
          w[e][i * n + j] = W(first[me] + e, i, j);
    return w;
  }
};

/// One GemmAllToAll call seen from rank `me`: cnt(s, g) rows go from source s to global expert g,
/// token row i of that pair holds X(s, g, i, kk). `x`/`recv` are what this rank's experts receive
/// (grouped by local expert, then source), `send` what it routes out, `ref` its expected output:
/// the plain-loop product with W(g, kk, j), exact for small-integer inputs. `tokens`: the rows
/// this rank routes out, grouped by global expert (run_layer's input; row i gives ref's row i).
struct MoeCall {
  std::vector<std::size_t> recv, send;
  std::vector<float> x, ref, tokens;
};
template <class Cnt, class Xf, class Wf>
MoeCall make_moe_call(const MoeExperts& ex, int p, int me, std::size_t k, std::size_t n, Cnt cnt,
                      Xf X, Wf W) {
  MoeCall c;
  c.recv.resize(ex.local(me) * p);
  c.send.resize(ex.total());
  for (std::size_t e = 0; e < ex.local(me); ++e)
    for (int s = 0; s < p; ++s) {
      const std::size_t g = ex.first[me] + e;
      c.recv[e * p + s] = cnt(s, g);
      for (std::size_t i = 0; i < cnt(s, g); ++i)
        for (std::size_t kk = 0; kk < k; ++kk)
          c.x.push_back(X(s, g, i, kk));
    }
  for (std::size_t g = 0; g < ex.total(); ++g) {
    c.send[g] = cnt(me, g);
    for (std::size_t i = 0; i < c.send[g]; ++i)
      for (std::size_t kk = 0; kk < k; ++kk)
        c.tokens.push_back(X(me, g, i, kk));
    for (std::size_t i = 0; i < c.send[g]; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::size_t kk = 0; kk < k; ++kk)
          acc += X(me, g, i, kk) * W(g, kk, j);
        c.ref.push_back(acc);
      }
  }
  return c;
}

inline std::vector<const float*> pointers(const std::vector<std::vector<float>>& w) {
  std::vector<const float*> p;
  for (const auto& v : w)
    p.push_back(v.data());
  return p;
}

}  // namespace tilecomm::test
