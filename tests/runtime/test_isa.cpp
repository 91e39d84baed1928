// ISA dispatch: the detected path is the widest the CPU has, judged independently from the
// kernel's own /proc/cpuinfo flags (x86-64 Linux).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tilecomm/isa.hpp"

namespace tilecomm {
namespace {

std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;)
      flags.insert(w);
    return flags;
  }
  return {};
}

TEST(Isa, DetectsTheWidestPathTheCpuHas) {
  const auto flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  auto has = [&](const char* f) { return flags.count(f) > 0; };
  Isa expected = Isa::Scalar;
  if (has("avx2") && has("fma")) expected = Isa::Avx2;
  if (has("avx512f") && has("avx512bw") && has("avx512vl")) expected = Isa::Avx512;
  EXPECT_EQ(detected_isa(), expected) << to_string(detected_isa()) << " vs " << to_string(expected);
  EXPECT_EQ(cpu_has_avx512_bf16(), has("avx512_bf16"));
}

TEST(Isa, NamesAreTheEnvironmentValues) {
  EXPECT_EQ(to_string(Isa::Scalar), "scalar");
  EXPECT_EQ(to_string(Isa::Avx2), "avx2");
  EXPECT_EQ(to_string(Isa::Avx512), "avx512");
}

}  // namespace
}  // namespace tilecomm
