// tilecomm_info: prints every TILECOMM_* variable with its current value and meaning, and the
// kernel ISA path and the device the current settings would build (like `ucc_info -c`).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "ops/kernels/gemm.hpp"
#include "tilecomm/tilecomm.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Print tilecomm's configuration"};
  bool device = true;
  app.add_flag("--device,!--no-device", device, "also build the device and describe it");
  CLI11_PARSE(app, argc, argv);
  try {
    const tilecomm::Env e = tilecomm::Env::from_process();
    for (const auto& row : e.describe())
      fmt::print("{:<26} {:<12} {}\n", row.name, row.value, row.doc);
    fmt::print("\nkernels: {} path (this CPU: {}, avx512_bf16 {})\n",
               tilecomm::to_string(tilecomm::active_isa()),
               tilecomm::to_string(tilecomm::detected_isa()),
               tilecomm::cpu_has_avx512_bf16() ? "yes" : "no");
    // The GEMM kernel has no AVX-512 micro-kernel: it may run a narrower path than the others.
    fmt::print("GEMM kernel: {} micro-kernel\n",
               tilecomm::to_string(tilecomm::kernels::gemm_kernels().isa));
    if (device) {
      tilecomm::Device d;
      fmt::print("\ndevice: {} CUs x {} WG slots, {} bytes LDS per CU, threads {}\n", d.num_cus(),
                 d.wg_slots_per_cu(), d.lds_bytes_per_cu(), d.pinned() ? "pinned" : "unpinned");
    }
  } catch (const tilecomm::Error& err) {
    fmt::print(stderr, "{}\n", err.what());
    return 2;
  }
  return 0;
}
