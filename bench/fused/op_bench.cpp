// The operators as OpBench: deterministic small-integer inputs (so every mode must agree
// bitwise with sequential), built once per shape.
#include "op_bench.hpp"

#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "tilecomm/bench_hooks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace tilecomm::bench {
namespace {

// Elements that differ bitwise (the output of a mode against sequential's).
long long count_different(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size())  // no reference recorded (record_reference()): nothing matches
    return static_cast<long long>(std::max(a.size(), b.size()));
  long long wrong = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    wrong += a[i] != b[i];
  return wrong;
}

// Operator instances of one OpBench (variants): index 0 built with the bench, the others added
// with other options over the same inputs.
template <class Op>
class Variants {
 public:
  using Make = std::function<std::unique_ptr<Op>(const OpOptions&)>;
  Variants(Make make, const OpOptions& first) : make_(std::move(make)) { add(first); }
  std::size_t add(const OpOptions& options) {
    ops_.push_back(make_(options));
    return ops_.size() - 1;
  }
  void drop(std::size_t v) { at(v).reset(); }
  Op& operator[](std::size_t v) {
    auto& op = at(v);
    if (!op) throw Error(ErrorCode::InvalidArgument, fmt::format("variant {} was dropped", v));
    return *op;
  }

 private:
  std::unique_ptr<Op>& at(std::size_t v) {
    if (v >= ops_.size())
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("variant {} (the bench has {})", v, ops_.size()));
    return ops_[v];
  }
  Make make_;
  std::vector<std::unique_ptr<Op>> ops_;
};

float small_int(std::uint64_t i) {
  i = i * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((i >> 33) % 5) - 2);
}

class GemvBench : public OpBench {
 public:
  // W: float32 or (s.bf16) bfloat16, the same small integers either way; X: K x s.batch.
  GemvBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : m_(s.size),
        k_(s.ratio),
        n_(s.batch),
        bf16_(s.bf16),
        ops_(
            [&comm, &dev, s](const OpOptions& opt) {
              return std::make_unique<GemvAllReduce>(comm, dev, s.size, s.ratio, s.batch, opt);
            },
            o),
        w_(s.bf16 ? 0 : m_ * k_),
        w16_(s.bf16 ? m_ * k_ : 0),
        x_(k_ * n_),
        y_(m_ * n_),
        ref_(y_.size()),
        part_(y_.size()) {
    for (std::size_t i = 0; i < w_.size(); ++i)
      w_[i] = small_int(i + comm.rank());
    for (std::size_t i = 0; i < w16_.size(); ++i)
      w16_[i] = bfloat16(small_int(i + comm.rank()));
    for (std::size_t i = 0; i < x_.size(); ++i)
      x_[i] = small_int(7 * i + 1);
  }
  void compute_only() override {
    if (bf16())
      tilecomm::bench::compute_only(ops_[0], w16_.data(), x_.data(), part_.data());
    else
      tilecomm::bench::compute_only(ops_[0], w_.data(), x_.data(), part_.data());
  }
  void collective_only() override {
    tilecomm::bench::collective_only(ops_[0], part_.data(), y_.data());
  }
  void run(Mode mode, std::size_t v) override {
    if (bf16())
      ops_[v].run(w16_.data(), x_.data(), y_.data(), mode);
    else
      ops_[v].run(w_.data(), x_.data(), y_.data(), mode);
  }
  void record_reference() override { ref_ = y_; }
  std::size_t add_variant(const OpOptions& o) override { return ops_.add(o); }
  void drop_variant(std::size_t v) override { ops_.drop(v); }
  std::optional<Mode> auto_choice(std::size_t v) override { return ops_[v].auto_choice(); }
  Collective collective() const override { return Collective::AllReduce; }
  long long wrong_vs_sequential(Mode) override { return count_different(y_, ref_); }
  std::size_t bytes() const override { return y_.size() * sizeof(float); }
  std::string shape() const override {
    return fmt::format("M={} K={}{}{}", m_, k_, n_ > 1 ? fmt::format(" n={}", n_) : "",
                       bf16() ? " bf16" : "");
  }

 private:
  bool bf16() const { return bf16_; }
  std::size_t m_, k_, n_;
  bool bf16_;
  Variants<GemvAllReduce> ops_;
  std::vector<float> w_;
  std::vector<bfloat16> w16_;
  std::vector<float> x_, y_, ref_, part_;
};

struct TableSpec {
  std::size_t rows, pool;
};

// This rank's tables. Synthetic: `tables` of kRows rows and `ratio` indices per bag. Workload:
// every table of the job, placed by greedy balance of lookups (largest pooling first, each to the
// rank with the fewest lookups so far; ties to the lower rank), as a sharding planner would.
std::vector<TableSpec> local_tables(const Shape& s, int rank, int ranks, std::size_t synthetic) {
  if (s.table_rows.empty()) return std::vector<TableSpec>(s.tables, {synthetic, s.ratio});
  std::vector<std::size_t> order(s.table_rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return s.table_pool[a] > s.table_pool[b]; });
  std::vector<std::size_t> load(static_cast<std::size_t>(ranks), 0);
  std::vector<TableSpec> mine;
  for (std::size_t t : order) {
    const auto r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[static_cast<std::size_t>(r)] += s.table_pool[t];
    if (r == rank) mine.push_back({s.table_rows[t], s.table_pool[t]});
  }
  return mine;
}

std::vector<std::size_t> rows_of(const std::vector<TableSpec>& tables) {
  std::vector<std::size_t> rows;
  for (const TableSpec& t : tables)
    rows.push_back(t.rows);
  return rows;
}

// Index of a power-law draw: u^3 (synthetic), or Zipf(a) over the rows (continuous inverse CDF of
// (x + 1)^-a), its hot rows scattered by multiplying with a prime (a bijection of [0, rows) when
// the prime does not divide rows).
std::int64_t draw_index(std::mt19937& g, std::size_t rows, double zipf) {
  const double u = std::uniform_real_distribution<double>(0, 1)(g);
  if (zipf <= 0)
    return static_cast<std::int64_t>(rows * u * u * u) % static_cast<std::int64_t>(rows);
  const double e = 1 - zipf, top = std::pow(static_cast<double>(rows) + 1, e) - 1;
  const auto x = std::min<std::uint64_t>(
      rows - 1, static_cast<std::uint64_t>(std::pow(1 + u * top, 1 / e) - 1));
  return static_cast<std::int64_t>((x * 2654435761ull) % rows);
}

class EmbeddingBench : public OpBench {
 public:
  EmbeddingBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : batch_(s.size),
        pool_(s.ratio),
        dim_(s.dim),
        spec_(s),
        mine_(local_tables(s, comm.rank(), comm.size(), kRows)),
        ntab_(mine_.size()),
        ops_(
            [&comm, &dev, rows = rows_of(mine_), s](const OpOptions& opt) {
              return std::make_unique<EmbeddingAllToAll>(comm, dev, rows, s.dim, s.size,
                                                         Pooling::Sum, opt);
            },
            o) {
    std::mt19937 g(1234u + comm.rank());
    for (std::size_t t = 0; t < ntab_; ++t) {
      const std::size_t rows = mine_[t].rows;
      tables_.emplace_back(rows * dim_);
      for (std::size_t i = 0; i < tables_[t].size(); ++i)
        tables_[t][i] = small_int(i * 13 + t);
      idx_.emplace_back();
      off_.emplace_back(1, 0);
      for (std::size_t b = 0; b < batch_; ++b) {
        for (std::size_t j = 0; j < mine_[t].pool; ++j)
          idx_[t].push_back(draw_index(g, rows, s.zipf));  // most lookups hit a few hot rows
        off_[t].push_back(static_cast<std::int64_t>(idx_[t].size()));
      }
    }
    for (std::size_t t = 0; t < ntab_; ++t) {
      ptrs_.push_back(tables_[t].data());
      bags_.push_back({idx_[t], off_[t], {}});
    }
    out_.resize(ops_[0].local_batch() * ops_[0].num_tables() * dim_);
    send_.resize(tilecomm::bench::send_elems(ops_[0]));
  }
  void compute_only() override {
    tilecomm::bench::compute_only(ops_[0], ptrs_, bags_, send_.data());
  }
  void collective_only() override {
    tilecomm::bench::collective_only(ops_[0], send_.data(), out_.data());
  }
  void run(Mode mode, std::size_t v) override { ops_[v].run(ptrs_, bags_, out_.data(), mode); }
  void record_reference() override { ref_ = out_; }
  std::size_t add_variant(const OpOptions& o) override { return ops_.add(o); }
  void drop_variant(std::size_t v) override { ops_.drop(v); }
  std::optional<Mode> auto_choice(std::size_t v) override { return ops_[v].auto_choice(); }
  Collective collective() const override { return Collective::AllToAllv; }
  long long wrong_vs_sequential(Mode) override { return count_different(out_, ref_); }
  std::size_t bytes() const override { return send_.size() * sizeof(float); }
  std::string shape() const override {
    if (spec_.table_rows.empty())
      return fmt::format("batch={} pool={} dim={} tables/rank={}", batch_, pool_, dim_, ntab_);
    const auto& r = spec_.table_rows;
    const auto& p = spec_.table_pool;
    return fmt::format("batch={} dim={} tables={} rows={}..{} pool={}..{} zipf={}", batch_, dim_,
                       r.size(), *std::min_element(r.begin(), r.end()),
                       *std::max_element(r.begin(), r.end()), *std::min_element(p.begin(), p.end()),
                       *std::max_element(p.begin(), p.end()), spec_.zipf);
  }

 private:
  static constexpr std::size_t kRows = 100000;
  std::size_t batch_, pool_, dim_;
  Shape spec_;
  std::vector<TableSpec> mine_;
  std::size_t ntab_;
  Variants<EmbeddingAllToAll> ops_;
  std::vector<std::vector<float>> tables_;
  std::vector<std::vector<std::int64_t>> idx_, off_;
  std::vector<const float*> ptrs_;
  std::vector<EmbeddingBags> bags_;
  std::vector<float> out_, ref_, send_;
};

// Rows rank `src` routes to each of the G experts. Synthetic (top_k = 0): `tokens` rows split
// unevenly by a fixed pattern (synthetic_moe_routing, which the simulator plans with too).
// Workload: each of `tokens` tokens picks top_k distinct experts, drawn by popularity 1 / (rank +
// 1)^zipf, the popularity ranks a seeded permutation of the experts (the same on every rank), the
// draws seeded by src (so every rank knows every rank's routing).
std::vector<std::size_t> routing(const Shape& s, int src, std::size_t G) {
  if (s.top_k == 0) return tilecomm::detail::synthetic_moe_routing(s.size, src, G);
  std::vector<std::size_t> rows(G, 0);
  std::vector<std::size_t> by_popularity(G);
  std::iota(by_popularity.begin(), by_popularity.end(), 0);
  std::mt19937 perm(99u);
  std::shuffle(by_popularity.begin(), by_popularity.end(), perm);
  std::vector<double> popularity(G);
  for (std::size_t i = 0; i < G; ++i)
    popularity[by_popularity[i]] = 1 / std::pow(static_cast<double>(i + 1), s.zipf);
  std::mt19937 g(4321u + static_cast<unsigned>(src));
  for (std::size_t t = 0; t < s.size; ++t) {
    std::vector<double> left = popularity;
    for (std::size_t j = 0; j < std::min(s.top_k, G); ++j) {
      const std::size_t e = std::discrete_distribution<std::size_t>(left.begin(), left.end())(g);
      ++rows[e];
      left[e] = 0;
    }
  }
  return rows;
}

class MoeBench : public OpBench {
 public:
  // Every rank routes `tokens` tokens (top_k rows each, or 1), spread unevenly over all experts;
  // experts hold K x N weights.
  MoeBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : tokens_(s.size),
        k_(s.ratio),
        n_(s.dim),
        e_(s.tables),
        p_(comm.size()),
        top_k_(s.top_k),
        zipf_(s.zipf),
        ops_(
            [&comm, &dev, s](const OpOptions& opt) {
              return std::make_unique<GemmAllToAll>(
                  comm, dev, s.tables, s.ratio, s.dim,
                  s.size * comm.size() * std::max<std::size_t>(2, s.top_k),
                  s.size * std::max<std::size_t>(1, s.top_k), opt);
            },
            o) {
    const std::size_t G = ops_[0].num_experts();
    send_ = routing(s, comm.rank(), G);
    std::size_t rows_in = 0;
    recv_.resize(e_ * p_);
    for (int src = 0; src < p_; ++src) {
      const std::vector<std::size_t> theirs = routing(s, src, G);
      for (std::size_t e = 0; e < e_; ++e)
        rows_in += recv_[e * p_ + src] = theirs[ops_[0].first_expert() + e];
    }
    x_.resize(rows_in * k_);
    for (std::size_t i = 0; i < x_.size(); ++i)
      x_[i] = small_int(i + comm.rank());
    for (std::size_t e = 0; e < e_; ++e) {
      w_.emplace_back(k_ * n_);
      for (std::size_t i = 0; i < w_[e].size(); ++i)
        w_[e][i] = small_int(3 * i + e);
      ptrs_.push_back(w_[e].data());
    }
    y_.resize(std::accumulate(send_.begin(), send_.end(), std::size_t{0}) * n_);
    // The weights do not change between calls (inference): packed once per context, as a server
    // would (GemmAllToAll::set_weights); no call pays for packing.
    ops_[0].set_weights(ptrs_);
    compute_only();  // collective_only() exchanges the last compute's results: give it some
  }
  void compute_only() override {
    tilecomm::bench::compute_only(ops_[0], {}, x_.data(), recv_, send_);
  }
  void collective_only() override { tilecomm::bench::collective_only(ops_[0], y_.data()); }
  void run(Mode mode, std::size_t v) override {
    ops_[v].run(x_.data(), recv_, send_, y_.data(), mode);
  }
  void record_reference() override { ref_ = y_; }
  std::size_t add_variant(const OpOptions& o) override {
    const std::size_t v = ops_.add(o);
    ops_[v].set_weights(ptrs_);
    return v;
  }
  void drop_variant(std::size_t v) override { ops_.drop(v); }
  std::optional<Mode> auto_choice(std::size_t v) override { return ops_[v].auto_choice(); }
  Collective collective() const override { return Collective::AllToAllv; }
  long long wrong_vs_sequential(Mode) override { return count_different(y_, ref_); }
  std::size_t bytes() const override { return x_.size() / k_ * n_ * sizeof(float); }
  std::string shape() const override {
    if (top_k_)
      return fmt::format("tokens/rank={} top{} zipf={} K={} N={} experts={}", tokens_, top_k_,
                         zipf_, k_, n_, e_ * p_);
    return fmt::format("tokens/rank={} K={} N={} experts/rank={}", tokens_, k_, n_, e_);
  }

 private:
  std::size_t tokens_, k_, n_, e_;
  int p_;
  std::size_t top_k_;
  double zipf_;
  Variants<GemmAllToAll> ops_;
  std::vector<std::size_t> send_, recv_;
  std::vector<float> x_, y_, ref_;
  std::vector<std::vector<float>> w_;
  std::vector<const float*> ptrs_;
};

class GemmRsBench : public OpBench {
 public:
  // size: rows of Y (rounded down to a multiple of the ranks, at least one per rank), ratio: K per
  // rank, dim: N.
  GemmRsBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : m_(std::max<std::size_t>(s.size / comm.size(), 1) * comm.size()),
        k_(s.ratio),
        n_(s.dim),
        ops_(
            [&comm, &dev, m = m_, s](const OpOptions& opt) {
              return std::make_unique<GemmReduceScatter>(comm, dev, m, s.ratio, s.dim, opt);
            },
            o),
        a_(m_ * k_),
        w_(k_ * n_),
        y_(ops_[0].rows_local() * n_),
        ref_(y_.size()) {
    for (std::size_t i = 0; i < a_.size(); ++i)
      a_[i] = small_int(i + comm.rank());
    for (std::size_t i = 0; i < w_.size(); ++i)
      w_[i] = small_int(5 * i + 3);
    ops_[0].set_weights(w_.data());  // W fixed between calls, packed once (as MoeBench)
  }
  void compute_only() override { tilecomm::bench::compute_only(ops_[0], a_.data(), nullptr); }
  void collective_only() override { tilecomm::bench::collective_only(ops_[0], y_.data()); }
  void run(Mode mode, std::size_t v) override { ops_[v].run(a_.data(), y_.data(), mode); }
  void record_reference() override { ref_ = y_; }
  std::size_t add_variant(const OpOptions& o) override {
    const std::size_t v = ops_.add(o);
    ops_[v].set_weights(w_.data());
    return v;
  }
  void drop_variant(std::size_t v) override { ops_.drop(v); }
  std::optional<Mode> auto_choice(std::size_t v) override { return ops_[v].auto_choice(); }
  Collective collective() const override { return Collective::ReduceScatter; }
  long long wrong_vs_sequential(Mode) override { return count_different(y_, ref_); }
  std::size_t bytes() const override { return m_ * n_ * sizeof(float); }
  std::string shape() const override { return fmt::format("M={} K={} N={}", m_, k_, n_); }

 private:
  std::size_t m_, k_, n_;
  Variants<GemmReduceScatter> ops_;
  std::vector<float> a_, w_, y_, ref_;
};

}  // namespace

std::unique_ptr<OpBench> make_op_bench(const std::string& op, Communicator& comm, Device& device,
                                       const Shape& shape, const OpOptions& options) {
  if (op == "gemv_allreduce") return std::make_unique<GemvBench>(comm, device, shape, options);
  if (op == "embedding_alltoall")
    return std::make_unique<EmbeddingBench>(comm, device, shape, options);
  if (op == "gemm_alltoall") return std::make_unique<MoeBench>(comm, device, shape, options);
  if (op == "gemm_reduce_scatter")
    return std::make_unique<GemmRsBench>(comm, device, shape, options);
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("--op {} is not one of: gemv_allreduce, embedding_alltoall, "
                          "gemm_alltoall, gemm_reduce_scatter",
                          op));
}

Shape default_shape(const std::string& op) {
  if (op == "gemv_allreduce") return {1 << 18, 16, 0, 0};
  if (op == "embedding_alltoall") return {4096, 8, 64, 4};
  if (op == "gemm_reduce_scatter") return {2048, 256, 1024, 0};
  return {2048, 64, 256, 4};
}

AutoSettled settle_auto(OpBench& bench, std::size_t variant) {
  constexpr int kMaxTrials = 1000;
  int trials = 0;
  while (!bench.auto_choice(variant)) {
    if (trials == kMaxTrials)
      throw Error(ErrorCode::Internal,
                  fmt::format("Mode::Auto did not settle within {} calls", kMaxTrials));
    bench.run(Mode::Auto, variant);
    ++trials;
  }
  return {*bench.auto_choice(variant), trials};
}

}  // namespace tilecomm::bench
