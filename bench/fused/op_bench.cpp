// The operators as OpBench: deterministic small-integer inputs (so every mode must agree
// bitwise with sequential), built once per shape.
#include "op_bench.hpp"

#include "tilecomm/bench_hooks.hpp"

#include <fmt/format.h>

#include <random>
#include <vector>

namespace tilecomm::bench {
namespace {

// Elements that differ bitwise (the output of a mode against sequential's).
long long count_different(const std::vector<float>& a, const std::vector<float>& b) {
  long long wrong = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    wrong += a[i] != b[i];
  return wrong;
}

float small_int(std::uint64_t i) {
  i = i * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((i >> 33) % 5) - 2);
}

class GemvBench : public OpBench {
 public:
  GemvBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : m_(s.size),
        k_(s.ratio),
        op_(comm, dev, s.size, s.ratio, o),
        w_(m_ * k_),
        x_(k_),
        y_(m_),
        ref_(m_),
        part_(m_) {
    for (std::size_t i = 0; i < w_.size(); ++i)
      w_[i] = small_int(i + comm.rank());
    for (std::size_t i = 0; i < k_; ++i)
      x_[i] = small_int(7 * i + 1);
  }
  void compute_only() override {
    tilecomm::bench::compute_only(op_, w_.data(), x_.data(), part_.data());
  }
  void collective_only() override {
    tilecomm::bench::collective_only(op_, part_.data(), y_.data());
  }
  void run(Mode mode) override {
    op_.run(w_.data(), x_.data(), y_.data(), mode);
    if (mode == Mode::Sequential) ref_ = y_;
  }
  long long wrong_vs_sequential(Mode) override { return count_different(y_, ref_); }
  std::size_t bytes() const override { return m_ * sizeof(float); }
  std::string shape() const override { return fmt::format("M={} K={}", m_, k_); }

 private:
  std::size_t m_, k_;
  GemvAllReduce op_;
  std::vector<float> w_, x_, y_, ref_, part_;
};

class EmbeddingBench : public OpBench {
 public:
  EmbeddingBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : batch_(s.size),
        pool_(s.ratio),
        dim_(s.dim),
        ntab_(s.tables),
        op_(comm, dev, std::vector<std::size_t>(s.tables, kRows), s.dim, s.size, Pooling::Sum, o) {
    std::mt19937 g(1234u + comm.rank());
    for (std::size_t t = 0; t < ntab_; ++t) {
      tables_.emplace_back(kRows * dim_);
      for (std::size_t i = 0; i < tables_[t].size(); ++i)
        tables_[t][i] = small_int(i * 13 + t);
      idx_.emplace_back();
      off_.emplace_back(1, 0);
      for (std::size_t b = 0; b < batch_; ++b) {
        for (std::size_t j = 0; j < pool_; ++j) {
          // power-law-ish: most lookups hit a few hot rows
          const double u = std::uniform_real_distribution<double>(0, 1)(g);
          idx_[t].push_back(static_cast<std::int64_t>(kRows * u * u * u) % kRows);
        }
        off_[t].push_back(static_cast<std::int64_t>(idx_[t].size()));
      }
    }
    for (std::size_t t = 0; t < ntab_; ++t) {
      ptrs_.push_back(tables_[t].data());
      bags_.push_back({idx_[t], off_[t], {}});
    }
    out_.resize(op_.local_batch() * op_.num_tables() * dim_);
    send_.resize(tilecomm::bench::send_elems(op_));
  }
  void compute_only() override { tilecomm::bench::compute_only(op_, ptrs_, bags_, send_.data()); }
  void collective_only() override {
    tilecomm::bench::collective_only(op_, send_.data(), out_.data());
  }
  void run(Mode mode) override {
    op_.run(ptrs_, bags_, out_.data(), mode);
    if (mode == Mode::Sequential) ref_ = out_;
  }
  long long wrong_vs_sequential(Mode) override { return count_different(out_, ref_); }
  std::size_t bytes() const override { return send_.size() * sizeof(float); }
  std::string shape() const override {
    return fmt::format("batch={} pool={} dim={} tables/rank={}", batch_, pool_, dim_, ntab_);
  }

 private:
  static constexpr std::size_t kRows = 100000;
  std::size_t batch_, pool_, dim_, ntab_;
  EmbeddingAllToAll op_;
  std::vector<std::vector<float>> tables_;
  std::vector<std::vector<std::int64_t>> idx_, off_;
  std::vector<const float*> ptrs_;
  std::vector<EmbeddingBags> bags_;
  std::vector<float> out_, ref_, send_;
};

class MoeBench : public OpBench {
 public:
  // Every rank routes `tokens` rows, spread unevenly over all experts; experts hold K x N weights.
  MoeBench(Communicator& comm, Device& dev, const Shape& s, const OpOptions& o)
      : tokens_(s.size),
        k_(s.ratio),
        n_(s.dim),
        e_(s.tables),
        p_(comm.size()),
        op_(comm, dev, s.tables, s.ratio, s.dim, s.size * comm.size() * 2, s.size, o) {
    const std::size_t G = op_.num_experts();
    auto share = [&](int src,
                     std::size_t g) {  // rows src routes to g: uneven but summing to tokens
      std::size_t w = 1 + (src * 7 + g * 3) % 5, total = 0;
      for (std::size_t h = 0; h < G; ++h)
        total += 1 + (src * 7 + h * 3) % 5;
      std::size_t before = 0;
      for (std::size_t h = 0; h < g; ++h)
        before += 1 + (src * 7 + h * 3) % 5;
      return (tokens_ * (before + w)) / total - (tokens_ * before) / total;
    };
    send_.resize(G);
    for (std::size_t g = 0; g < G; ++g)
      send_[g] = share(comm.rank(), g);
    std::size_t rows_in = 0;
    recv_.resize(e_ * p_);
    for (std::size_t e = 0; e < e_; ++e)
      for (int src = 0; src < p_; ++src)
        rows_in += recv_[e * p_ + src] = share(src, op_.first_expert() + e);
    x_.resize(rows_in * k_);
    for (std::size_t i = 0; i < x_.size(); ++i)
      x_[i] = small_int(i + comm.rank());
    for (std::size_t e = 0; e < e_; ++e) {
      w_.emplace_back(k_ * n_);
      for (std::size_t i = 0; i < w_[e].size(); ++i)
        w_[e][i] = small_int(3 * i + e);
      ptrs_.push_back(w_[e].data());
    }
    y_.resize(tokens_ * n_);
  }
  void compute_only() override {
    tilecomm::bench::compute_only(op_, ptrs_, x_.data(), recv_, send_);
  }
  void collective_only() override { tilecomm::bench::collective_only(op_, y_.data()); }
  void run(Mode mode) override {
    op_.run(ptrs_, x_.data(), recv_, send_, y_.data(), mode);
    if (mode == Mode::Sequential) ref_ = y_;
  }
  long long wrong_vs_sequential(Mode) override { return count_different(y_, ref_); }
  std::size_t bytes() const override { return x_.size() / k_ * n_ * sizeof(float); }
  std::string shape() const override {
    return fmt::format("tokens/rank={} K={} N={} experts/rank={}", tokens_, k_, n_, e_);
  }

 private:
  std::size_t tokens_, k_, n_, e_;
  int p_;
  GemmAllToAll op_;
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
        op_(comm, dev, m_, k_, n_, o),
        a_(m_ * k_),
        w_(k_ * n_),
        y_(op_.rows_local() * n_),
        ref_(y_.size()) {
    for (std::size_t i = 0; i < a_.size(); ++i)
      a_[i] = small_int(i + comm.rank());
    for (std::size_t i = 0; i < w_.size(); ++i)
      w_[i] = small_int(5 * i + 3);
  }
  void compute_only() override { tilecomm::bench::compute_only(op_, a_.data(), w_.data()); }
  void collective_only() override { tilecomm::bench::collective_only(op_, y_.data()); }
  void run(Mode mode) override {
    op_.run(a_.data(), w_.data(), y_.data(), mode);
    if (mode == Mode::Sequential) ref_ = y_;
  }
  long long wrong_vs_sequential(Mode) override { return count_different(y_, ref_); }
  std::size_t bytes() const override { return m_ * n_ * sizeof(float); }
  std::string shape() const override { return fmt::format("M={} K={} N={}", m_, k_, n_); }

 private:
  std::size_t m_, k_, n_;
  GemmReduceScatter op_;
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

}  // namespace tilecomm::bench
