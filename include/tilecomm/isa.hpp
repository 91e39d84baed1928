#pragma once
/// \file isa.hpp
/// The vector instruction set tilecomm's compute kernels use, chosen once per process at run time
/// (one binary for a cluster of mixed nodes): the widest this CPU supports, capped by TILECOMM_ISA.

#include <string_view>

namespace tilecomm {

/// Kernel paths, narrowest first.
enum class Isa {
  Scalar,  ///< portable C++ (the reference every vector path is tested against)
  Avx2,    ///< AVX2 + FMA
  Avx512,  ///< AVX-512 F/BW/VL (+ AVX512_BF16 where the CPU has it)
};

std::string_view to_string(Isa isa) noexcept;

/// The widest path this CPU can run (CPUID).
Isa detected_isa() noexcept;
/// Whether the CPU has AVX512_BF16 (bfloat16 dot products); only used on the Avx512 path.
bool cpu_has_avx512_bf16() noexcept;
/// The path the kernels use: detected_isa(), or TILECOMM_ISA when set. Raises Error(NotSupported)
/// naming both when TILECOMM_ISA asks for more than the CPU has. Decided once, then cached.
Isa active_isa();

}  // namespace tilecomm
