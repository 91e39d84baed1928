// tilecomm_sim: the discrete-event simulator (docs/model.md, "Simulator") from the command line.
// Replays the operators' own task lists on N nodes x R ranks with a calibrated profile and a
// network model, and prints the predicted time of every mode. No MPI.
//   tilecomm_sim --op gemv_allreduce --shape M=4096,K=1024,n=1 --nodes 8 --ranks-per-node 4 \
//       --cus 8 --link 100gbit --latency 2us --profile bench/results/profile_np2_vm.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <string>

#include "ops/model/sim_ops.hpp"
#include "tilecomm/error.hpp"

namespace model = tilecomm::model;

namespace {

// "100gbit", "5gbit", "500mbit", "12.5GB/s" (bytes) -> bytes per second.
double parse_rate(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const double scale = unit == "gbit"   ? 1e9 / 8
                       : unit == "mbit" ? 1e6 / 8
                       : unit == "gb/s" ? 1e9
                       : unit == "mb/s" ? 1e6
                                        : 0;
  if (used == 0 || scale == 0 || v <= 0)
    throw tilecomm::Error(
        tilecomm::ErrorCode::InvalidArgument,
        fmt::format("--link = '{}' (want e.g. 100gbit, 500mbit, 12.5GB/s)", text));
  return v * scale;
}

// "2us", "0.5ms", "1e-6s", "800ns" -> seconds.
double parse_time(const std::string& text) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const double scale = unit == "us"   ? 1e-6
                       : unit == "ms" ? 1e-3
                       : unit == "ns" ? 1e-9
                       : unit == "s"  ? 1.0
                                      : 0;
  if (used == 0 || scale == 0 || v < 0)
    throw tilecomm::Error(tilecomm::ErrorCode::InvalidArgument,
                          fmt::format("--latency = '{}' (want e.g. 2us, 800ns, 0.1ms)", text));
  return v * scale;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulate a tilecomm operator's modes on N nodes x R ranks (no MPI)"};
  std::string op = "gemv_allreduce", shape_text = "M=4096,K=1024,n=1", profile_path, link, latency,
              json, timeline, fused_algorithm = "auto";
  model::SimSetup s;
  double oversub = 1, burst = 0;
  bool no_remote_first = false, nic_offload = false;
  app.add_option("--op", op,
                 "gemv_allreduce | embedding_alltoall | gemm_reduce_scatter | gemm_alltoall");
  app.add_option("--shape", shape_text,
                 "M=..,K=..,n=.. (GEMV, K per rank; GemmReduceScatter: M rows, K per rank, N "
                 "columns) or batch=..,tables=..,pool=..,dim=.. (embedding: global batch, tables "
                 "per rank) or tokens=..,K=..,N=..,experts=.. (GemmAllToAll: rows each rank "
                 "routes, fused_perf's synthetic routing; experts per rank), optional tile=..");
  app.add_option("--nodes", s.nodes, "nodes");
  app.add_option("--ranks-per-node", s.ranks_per_node, "ranks per node");
  app.add_option("--cus", s.cus, "cores (CUs) per rank");
  app.add_option("--slots", s.slots, "WG slots per rank (the device's CUs x slots per CU)");
  app.add_option("--cpu-share", s.cpu_share,
                 "cores each rank really gets (default: --cus; < 1 when ranks share cores)");
  app.add_option("--chunks", s.options.shaped.chunks, "shaped: chunks");
  app.add_flag("--no-remote-first", no_remote_first, "fused: plain rank order");
  app.add_option("--fused-algorithm", fused_algorithm,
                 "GEMV fused protocol: auto (the operator's choice) | one_shot | two_shot");
  app.add_option("--link", link,
                 "NIC rate per direction (default: the link rate the profile measured, else its "
                 "MPI beta)");
  app.add_option("--latency", latency,
                 "one-way network latency (default: the profile's MPI alpha less its CPU)");
  app.add_option("--core-oversub", oversub, "core oversubscription (1: full bisection)");
  app.add_option("--burst", burst,
                 "bytes: each NIC direction is a token bucket of this size refilled at --link, "
                 "as tc's tbf shapes tools/cluster's links (default 0: none); with "
                 "--repeated-call each mode is simulated in a loop of its calls")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--proxy-polls", s.proxy_polls,
               "fused across nodes: the proxy (the host thread) also takes a share of the cores "
               "for the whole "
               "kernel (it polls MPI; default: CPU per receive only)");
  app.add_flag(
      "--repeated-call", s.repeated_call,
      "the call repeats on the same weights and indices (a benchmark's loop): the share of the "
      "GEMV weights, or of the rows an embedding call looks up, that the profile's L3 keeps is "
      "charged from the caches (its gemv_warm, embedding_warm points): all of it when they fit in "
      "half the L3, none from twice it on, between linear in log2 of the size");
  app.add_option("--loop-gap", s.loop_gap_s,
                 "seconds between the loop's calls (--burst with --repeated-call), when the "
                 "buckets refill: a benchmark's barrier between timed calls (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ranks-per-cache", s.ranks_per_cache,
                 "ranks sharing one last-level cache, for --repeated-call (default: "
                 "--ranks-per-node; every rank when the nodes are emulated on one machine)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--nic-offload", nic_offload,
               "off-node messages cost CPU per message only, not per byte (an RDMA NIC)");
  app.add_option("--profile", profile_path, "profile (default: as Mode::Auto finds it)");
  app.add_option("--json", timeline, "write the fused call's timeline (trace JSON, plot_trace.py)");
  app.add_option("--summary", json, "append one JSON line with the predictions to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    s.options.remote_first = !no_remote_first;
    s.options.fused_algorithm = tilecomm::parse_fused_algorithm(fused_algorithm);
    s.shape = model::parse_shape(model::parse_op(op), shape_text);
    if (oversub < 1)
      throw tilecomm::Error(tilecomm::ErrorCode::InvalidArgument,
                            fmt::format("--core-oversub = {} (must be >= 1)", oversub));
    model::Profile profile;
    if (!model::resolve_profile(profile_path, profile))
      throw tilecomm::Error(tilecomm::ErrorCode::InvalidArgument,
                            "no profile: pass --profile FILE (tilecomm_calibrate writes one)");
    model::SimCosts costs = model::SimCosts::from(profile);
    if (!link.empty()) costs.net.link_bytes_per_s = parse_rate(link);
    if (!latency.empty()) costs.net.latency_s = parse_time(latency);
    costs.net.core_oversub = oversub;
    costs.net.burst_bytes = burst;
    costs.nic_offload = nic_offload;
    s.off_node = model::sim_off_node_path(costs);  // as simulate_modes plans
    const model::SimModes m = model::simulate_modes(profile, s, costs, !timeline.empty());
    fmt::print(
        "{} {} on {} node(s) x {} rank(s), {} core(s) x {} slot(s) per rank; link {:.3g} "
        "Gbit/s, latency {:.3g} us, core oversubscription {}{}\n",
        op, shape_text, s.nodes, s.ranks_per_node, s.cus, s.slots,
        costs.net.link_bytes_per_s * 8 / 1e9, costs.net.latency_s * 1e6, oversub,
        burst > 0 ? fmt::format(", token buckets of {:.0f} bytes{}", burst,
                                s.repeated_call ? " (a loop of each mode's calls)" : "")
                  : "");
    fmt::print("tile {}; fused: {} tasks on rank 0, {} messages, {} events\n", model::sim_tile(s),
               model::fused_program(profile, s)[0].tasks.size(), m.fused_run.messages,
               m.fused_run.events);
    fmt::print("  compute      {:10.1f} us  (sequential's compute kernel)\n", m.compute * 1e6);
    fmt::print("  sequential   {:10.1f} us\n", m.sequential * 1e6);
    fmt::print("  shaped       {:10.1f} us\n", m.shaped * 1e6);
    fmt::print("  fused        {:10.1f} us  ({:+.1f} % vs sequential)\n", m.fused * 1e6,
               100 * (m.fused / m.sequential - 1));
    if (!timeline.empty()) std::ofstream(timeline) << model::timeline_json(m.fused_run);
    if (!json.empty())
      std::ofstream(json, std::ios::app) << fmt::format(
          "{{\"op\": \"{}\", \"shape\": \"{}\", \"nodes\": {}, \"ranks_per_node\": {}, \"cus\": "
          "{}, "
          "\"slots\": {}, \"link_gbit\": {:.6g}, \"latency_us\": {:.6g}, \"core_oversub\": {}, "
          "\"burst_bytes\": {:.6g}, \"nic_offload\": {}, "
          "\"tile\": {}, \"compute_us\": {:.3f}, \"sequential_us\": {:.3f}, \"shaped_us\": {:.3f}, "
          "\"fused_us\": {:.3f}}}\n",
          op, shape_text, s.nodes, s.ranks_per_node, s.cus, s.slots,
          costs.net.link_bytes_per_s * 8 / 1e9, costs.net.latency_s * 1e6, oversub, burst,
          nic_offload, model::sim_tile(s), m.compute * 1e6, m.sequential * 1e6, m.shaped * 1e6,
          m.fused * 1e6);
  } catch (const tilecomm::Error& e) {
    fmt::print(stderr, "tilecomm_sim: {}\n", e.what());
    return 2;
  }
  return 0;
}
