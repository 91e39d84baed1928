// tilecomm_info: prints every TILECOMM_* variable with its current value and meaning, and the
// kernel ISA path and the device the current settings would build (like `ucc_info -c`).
// `--explain OP SHAPE` prints the model's prediction of each mode and Auto's choice (no MPI).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <thread>

#include "ops/kernels/gemm.hpp"
#include "ops/model/predict.hpp"
#include "tilecomm/tilecomm.hpp"

namespace {

// The prediction table for `op shape` on `layout`; returns the exit code.
int explain(const std::vector<std::string>& what, tilecomm::model::Layout layout,
            const std::string& profile_option, const tilecomm::OpOptions& options) {
  using namespace tilecomm;
  const model::OpShape shape = model::parse_shape(model::parse_op(what[0]), what[1]);
  model::Profile profile;
  if (!model::resolve_profile(profile_option, profile)) {
    fmt::print(
        "no profile ({}): Mode::Auto measures sequential, shaped and fused on its first "
        "calls (docs/ops.md); run tilecomm_calibrate to write one\n",
        profile_option.empty() ? model::default_profile_path() : profile_option);
    return 0;
  }
  const model::Prediction p = model::predict(profile, shape, layout, options);
  fmt::print("{} {} on {} rank(s), {} node(s), {} CU(s) x {} WG slots per rank\n", what[0], what[1],
             layout.ranks, layout.nodes, layout.cus, layout.wg_slots);
  fmt::print(
      "profile: host {}, version {}; tile {} ({} tiles, {:.2f} us each on one CU)\n", profile.host,
      profile.version,
      shape.tile ? shape.tile : model::default_tile(shape, layout, model::off_node_path(profile)),
      p.tiles, p.tile * 1e6);
  fmt::print(
      "  {:<10} {:10.1f} us  (all tiles on the CUs)\n  {:<10} {:10.1f} us  (after it, "
      "in sequential)\n",
      "compute", p.compute * 1e6, "collective", p.collective * 1e6);
  for (Mode m : {Mode::Sequential, Mode::Shaped, Mode::Fused})
    fmt::print("  {:<10} {:10.1f} us\n", to_string(m), p.at(m) * 1e6);
  const model::ModelChoice c = model::choose_from_model({p.sequential, p.shaped, p.fused});
  if (c.settle) {
    fmt::print(
        "auto: {} (predicted more than {:g}x faster than every other mode: settled without "
        "trial calls)\n",
        to_string(*c.settle), 1 + model::kModelMargin);
  } else {
    std::string names;
    for (Mode m : c.candidates)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(m));
    fmt::print("auto: measures {} (within {:g}x of the best prediction) on its first calls\n",
               names, 1 + model::kModelMargin);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Print tilecomm's configuration"};
  bool device = true;
  app.add_flag("--device,!--no-device", device, "also build the device and describe it");
  std::vector<std::string> what;
  app.add_option("--explain", what,
                 "OP SHAPE: the model's prediction per mode and Auto's choice, e.g. "
                 "--explain gemv_allreduce M=4096,K=1024,n=1")
      ->expected(2);
  tilecomm::model::Layout layout;
  layout.cus = 0;
  layout.wg_slots = tilecomm::defaults::kWgSlotsPerCu;
  std::string profile, policy = "lds";
  tilecomm::OpOptions options;
  app.add_option("--chunks", options.shaped.chunks, "--explain: shaped mode's chunks");
  app.add_option("--free-cus", options.shaped.free_cus, "--explain: shaped mode's free CUs");
  app.add_option("--shaped-policy", policy, "--explain: lds, cu_mask or nonblocking");
  app.add_option("--ranks", layout.ranks, "--explain: ranks of the job")
      ->check(CLI::PositiveNumber);
  app.add_option("--nodes", layout.nodes, "--explain: nodes of the job")
      ->check(CLI::PositiveNumber);
  app.add_option("--cus", layout.cus, "--explain: CUs per rank (default: cores / ranks per node)");
  app.add_option("--profile", profile, "--explain: profile file (default: as Mode::Auto finds it)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!what.empty()) {
      if (layout.nodes > layout.ranks) {
        fmt::print(stderr, "--nodes = {} is more than --ranks = {}\n", layout.nodes, layout.ranks);
        return 2;
      }
      if (layout.cus <= 0) {
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        layout.cus = std::max(1, cores / layout.ranks_per_node());
      }
      options.shaped.policy = tilecomm::parse_shaped_policy(policy);
      return explain(what, layout, profile, options);
    }
    const tilecomm::Env e = tilecomm::Env::from_process();
    for (const auto& row : e.describe())
      fmt::print("{:<26} {:<12} {}\n", row.name, row.value, row.doc);
    fmt::print("\nkernels: {} path (this CPU: {}, avx512_bf16 {})\n",
               tilecomm::to_string(tilecomm::active_isa()),
               tilecomm::to_string(tilecomm::detected_isa()),
               tilecomm::cpu_has_avx512_bf16() ? "yes" : "no");
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
