// The embedding pooling kernels (ops/kernels/embedding_pool.hpp) without MPI: every ISA path this
// CPU can run, called directly, against the scalar reference on random data, bitwise (the paths
// keep the reference's order of additions and separate multiply / add); the reference itself
// against a plain loop; tails, empty bags, weights, mean, bfloat16 rows, output stride.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/kernels/embedding_pool.hpp"
#include "tilecomm/isa.hpp"
#include "tilecomm/types.hpp"

namespace {

using tilecomm::Isa;
using tilecomm::kernels::embedding_pool_for;
using tilecomm::kernels::EmbeddingPoolKernels;
using tilecomm::kernels::PoolJob;

/// The paths this CPU runs, narrowest first.
std::vector<Isa> runnable() {
  std::vector<Isa> out{Isa::Scalar};
  if (tilecomm::detected_isa() >= Isa::Avx2) out.push_back(Isa::Avx2);
  if (tilecomm::detected_isa() >= Isa::Avx512) out.push_back(Isa::Avx512);
  return out;
}

/// Random bags: sizes 0..max_pool (some empty), indices in [0, rows), weights in [-2, 2).
struct Bags {
  std::vector<std::int64_t> indices, offsets{0};
  std::vector<float> weights;
  Bags(std::size_t batch, std::size_t rows, std::size_t max_pool, std::mt19937& rng) {
    std::uniform_int_distribution<std::size_t> pool(0, max_pool);
    std::uniform_int_distribution<std::int64_t> index(0, static_cast<std::int64_t>(rows) - 1);
    std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
    for (std::size_t g = 0; g < batch; ++g) {
      const std::size_t n = g % 5 == 0 ? 0 : pool(rng);
      for (std::size_t j = 0; j < n; ++j) {
        indices.push_back(index(rng));
        weights.push_back(weight(rng));
      }
      offsets.push_back(static_cast<std::int64_t>(indices.size()));
    }
  }
};

struct Case {
  std::size_t dim;
  bool weighted, mean, bf16;
};

std::string name(const Case& c, Isa isa) {
  return "dim " + std::to_string(c.dim) + (c.weighted ? " weighted" : "") +
         (c.mean ? " mean" : " sum") + (c.bf16 ? " bf16" : " f32") + " isa " +
         std::string(tilecomm::to_string(isa));
}

/// Pools bags [1, batch) (not starting at 0, so bag0 is honoured) with `k` into a strided output
/// whose padding holds a sentinel that must survive.
std::vector<float> run(const EmbeddingPoolKernels& k, const Case& c, const std::vector<float>& t32,
                       const std::vector<std::uint16_t>& t16, const Bags& b, std::size_t batch,
                       std::size_t prefetch = tilecomm::kernels::kPrefetchRowsAhead) {
  const std::size_t stride = c.dim + 3;
  std::vector<float> out((batch - 1) * stride, -7.5f);
  PoolJob job;
  job.indices = b.indices.data();
  job.offsets = b.offsets.data();
  job.weights = c.weighted ? b.weights.data() : nullptr;
  job.bag0 = 1;
  job.bag1 = batch;
  job.dim = c.dim;
  job.mean = c.mean;
  job.dst = out.data();
  job.stride = stride;
  job.prefetch = prefetch;
  if (c.bf16)
    k.bf16(t16.data(), job);
  else
    k.f32(t32.data(), job);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EmbeddingPool, EveryPathMatchesTheScalarReferenceBitwise) {
  std::mt19937 rng(1234);
  const std::size_t rows = 97, batch = 41;
  for (std::size_t dim : {1, 3, 16, 17, 64, 65, 127, 128, 200, 256, 300}) {
    std::vector<float> t32(rows * dim);
    std::vector<std::uint16_t> t16(rows * dim);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (std::size_t i = 0; i < t32.size(); ++i) {
      t32[i] = value(rng);
      t16[i] = tilecomm::bfloat16(value(rng)).bits;
    }
    const Bags bags(batch, rows, 40, rng);
    for (int mode = 0; mode < 8; ++mode) {
      const Case c{dim, (mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0};
      const auto ref = run(embedding_pool_for(Isa::Scalar), c, t32, t16, bags, batch);
      for (Isa isa : runnable())
        for (std::size_t prefetch : {std::size_t{16}, std::size_t{0}, std::size_t{3}})
          EXPECT_TRUE(
              same_bits(ref, run(embedding_pool_for(isa), c, t32, t16, bags, batch, prefetch)))
              << name(c, isa) << " prefetch " << prefetch;
    }
  }
}

TEST(EmbeddingPool, ReferenceIsThePlainLoop) {
  // Sum over the bag in index order of w * row (product rounded first), then / size for mean;
  // bfloat16 widened by a 16-bit shift; empty bags are 0; the stride padding is untouched.
  std::mt19937 rng(7);
  const std::size_t rows = 50, batch = 30, dim = 19;
  std::vector<float> t32(rows * dim);
  std::vector<std::uint16_t> t16(rows * dim);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  for (std::size_t i = 0; i < t32.size(); ++i) {
    t32[i] = value(rng);
    t16[i] = tilecomm::bfloat16(value(rng)).bits;
  }
  const Bags bags(batch, rows, 9, rng);
  for (int mode = 0; mode < 8; ++mode) {
    const Case c{dim, (mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0};
    const auto got = run(embedding_pool_for(Isa::Scalar), c, t32, t16, bags, batch);
    const std::size_t stride = dim + 3;
    std::vector<float> want((batch - 1) * stride, -7.5f);
    for (std::size_t g = 1; g < batch; ++g) {
      const auto b = bags.offsets[g], e = bags.offsets[g + 1];
      for (std::size_t d = 0; d < dim; ++d) {
        volatile float acc = 0.0f;  // volatile: no contraction, no reassociation
        for (auto j = b; j < e; ++j) {
          const std::size_t at = static_cast<std::size_t>(bags.indices[j]) * dim + d;
          const float x = c.bf16 ? std::bit_cast<float>(std::uint32_t{t16[at]} << 16) : t32[at];
          volatile float product = (c.weighted ? bags.weights[j] : 1.0f) * x;
          acc = acc + product;
        }
        want[(g - 1) * stride + d] = c.mean && e > b ? acc / static_cast<float>(e - b) : acc;
      }
    }
    EXPECT_TRUE(same_bits(want, got)) << name(c, Isa::Scalar);
  }
}

TEST(EmbeddingPool, EmptyRangeAndAllEmptyBags) {
  const std::vector<float> table(4 * 20, 1.0f);
  const std::vector<std::int64_t> offsets(6, 0);  // 5 empty bags
  for (Isa isa : runnable()) {
    std::vector<float> out(5 * 20, 9.0f);
    PoolJob job;
    job.offsets = offsets.data();
    job.dim = 20;
    job.mean = true;
    job.dst = out.data();
    job.stride = 20;
    job.bag0 = job.bag1 = 2;  // nothing to do: out untouched
    embedding_pool_for(isa).f32(table.data(), job);
    EXPECT_EQ(out, std::vector<float>(100, 9.0f)) << tilecomm::to_string(isa);
    job.bag0 = 0;
    job.bag1 = 5;
    embedding_pool_for(isa).f32(table.data(), job);
    EXPECT_EQ(out, std::vector<float>(100, 0.0f)) << tilecomm::to_string(isa);
  }
}

/// A job over bags [0, n) of `b` into `out` (stride dim + 1).
PoolJob job_for(const Bags& b, std::size_t n, std::size_t dim, bool weighted, bool mean,
                std::size_t prefetch, std::vector<float>& out) {
  out.assign(n * (dim + 1), -7.5f);
  PoolJob job;
  job.indices = b.indices.data();
  job.offsets = b.offsets.data();
  job.weights = weighted ? b.weights.data() : nullptr;
  job.bag0 = 0;
  job.bag1 = n;
  job.dim = dim;
  job.mean = mean;
  job.dst = out.data();
  job.stride = dim + 1;
  job.prefetch = prefetch;
  return job;
}

TEST(EmbeddingPool, FewBagsEmptyBagsBetweenFullOnesAndEveryPrefetchDistance) {
  // Calls of 1, 2, 3, 5 bags (odd counts, a lone last bag), empty bags between full ones and at
  // either end, dims of one pass, several passes and passes plus a tail; prefetch distances from
  // none to past every index of the call (the look-ahead then stops at the call's last index).
  std::mt19937 rng(99);
  const std::size_t rows = 300;
  for (std::size_t dim : {8, 64, 72, 128, 136, 264}) {
    std::vector<float> t32(rows * dim);
    std::vector<std::uint16_t> t16(rows * dim);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (std::size_t i = 0; i < t32.size(); ++i) {
      t32[i] = value(rng);
      t16[i] = tilecomm::bfloat16(value(rng)).bits;
    }
    for (std::size_t n : {1, 2, 3, 5}) {
      for (int layout = 0; layout < 3; ++layout) {
        // layout 0: every bag full; 1: even bags empty; 2: odd bags empty.
        Bags b(0, rows, 0, rng);
        std::uniform_int_distribution<std::int64_t> index(0, static_cast<std::int64_t>(rows) - 1);
        std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
        for (std::size_t g = 0; g < n; ++g) {
          const bool empty = (layout == 1 && g % 2 == 0) || (layout == 2 && g % 2 == 1);
          const std::size_t size = empty ? 0 : 1 + (g * 7 + dim) % 23;
          for (std::size_t j = 0; j < size; ++j) {
            b.indices.push_back(index(rng));
            b.weights.push_back(weight(rng));
          }
          b.offsets.push_back(static_cast<std::int64_t>(b.indices.size()));
        }
        for (int mode = 0; mode < 8; ++mode) {
          const bool weighted = (mode & 1) != 0, mean = (mode & 2) != 0, bf16 = (mode & 4) != 0;
          std::vector<float> ref, got;
          const PoolJob rj = job_for(b, n, dim, weighted, mean, 0, ref);
          if (bf16)
            embedding_pool_for(Isa::Scalar).bf16(t16.data(), rj);
          else
            embedding_pool_for(Isa::Scalar).f32(t32.data(), rj);
          for (Isa isa : runnable())
            for (std::size_t prefetch : {0, 1, 2, 16, 64, 100000}) {
              const PoolJob job = job_for(b, n, dim, weighted, mean, prefetch, got);
              if (bf16)
                embedding_pool_for(isa).bf16(t16.data(), job);
              else
                embedding_pool_for(isa).f32(t32.data(), job);
              EXPECT_TRUE(same_bits(ref, got))
                  << "dim " << dim << " bags " << n << " layout " << layout << " mode " << mode
                  << " isa " << tilecomm::to_string(isa) << " prefetch " << prefetch;
            }
        }
      }
    }
  }
}

TEST(EmbeddingPool, LookAheadNeverReadsIndicesPastTheCall) {
  // The call's indices end right before a page the process may not read: a look-ahead that read
  // indices[offsets[bag1]] or beyond would fault. Bags [1, 4) of 4; bag 3 is empty, so the call's
  // last index is bag 2's.
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  const std::size_t count = 12, dim = 64, rows = 10;
  auto* indices = reinterpret_cast<std::int64_t*>(static_cast<char*>(mem) + page) - count;
  for (std::size_t j = 0; j < count; ++j)
    indices[j] = static_cast<std::int64_t>((j * 7) % rows);
  const std::vector<std::int64_t> offsets{0, 2, 7, 12, 12};
  std::vector<float> table(rows * dim);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<float>(i % 13);  // small integers: exact sums
  for (Isa isa : runnable())
    for (std::size_t prefetch : {1, 5, 16, 1000}) {
      std::vector<float> out(3 * dim, -1.0f);
      PoolJob job;
      job.indices = indices;
      job.offsets = offsets.data();
      job.bag0 = 1;
      job.bag1 = 4;
      job.dim = dim;
      job.dst = out.data();
      job.stride = dim;
      job.prefetch = prefetch;
      embedding_pool_for(isa).f32(table.data(), job);
      for (std::size_t g = 1; g < 4; ++g)
        for (std::size_t d = 0; d < dim; ++d) {
          float want = 0.0f;
          for (auto j = offsets[g]; j < offsets[g + 1]; ++j)
            want += table[static_cast<std::size_t>(indices[j]) * dim + d];
          ASSERT_EQ(out[(g - 1) * dim + d], want)
              << "bag " << g << " column " << d << " isa " << tilecomm::to_string(isa);
        }
    }
  munmap(mem, 2 * page);
}

TEST(EmbeddingPool, DispatchFollowsActiveIsa) {
  EXPECT_EQ(tilecomm::kernels::embedding_pool().isa, tilecomm::active_isa());
  const EmbeddingPoolKernels k = embedding_pool_for(tilecomm::active_isa());
  EXPECT_EQ(tilecomm::kernels::embedding_pool().f32, k.f32);
  EXPECT_EQ(tilecomm::kernels::embedding_pool().bf16, k.bf16);
}

}  // namespace
