#include "tilecomm/isa.hpp"

#include <fmt/format.h>

#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm {

std::string_view to_string(Isa isa) noexcept {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "?";
}

Isa detected_isa() noexcept {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Scalar;
}

bool cpu_has_avx512_bf16() noexcept {
#if defined(__x86_64__)
  // CPUID leaf 7, sub-leaf 1, EAX bit 5 (GCC 12's __builtin_cpu_supports does not know it).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __asm__("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(1));
  return (eax >> 5) & 1u;
#else
  return false;
#endif
}

Isa active_isa() {
  static const Isa chosen = [] {
    const Isa cpu = detected_isa();
    const std::string& want = env().isa;
    if (want.empty()) return cpu;
    Isa asked = Isa::Scalar;
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
      if (want == to_string(i)) asked = i;
    if (static_cast<int>(asked) > static_cast<int>(cpu))
      throw Error(ErrorCode::NotSupported,
                  fmt::format("TILECOMM_ISA = '{}' but this CPU supports at most '{}'", want,
                              to_string(cpu)));
    return asked;
  }();
  return chosen;
}

}  // namespace tilecomm
