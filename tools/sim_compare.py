#!/usr/bin/python3
"""Measured (tools/sim_validate.sh) against tilecomm_sim's prediction, as a markdown table.

Each row's profile is the one tilecomm_calibrate made right before its run (sim_validate.sh's
CALIBRATE=each; grids before 2026-11-29's twentieth session: the setting's one); the link rate is the
emulated cluster's tc rate, or the rate the profile measured under load when lower, and each NIC
direction a token bucket of the tc burst (--burst, else the setting's link_<s>.json that
sim_validate.sh wrote, else cluster.sh's default); fused_perf repeats each call on the same
weights (--repeated-call), each timed call after 10 ms of its own kind, as the simulator's loop
(whose calls are apart by the benchmark's barrier and allreduce, --gap);
a rank's CPU share is 1 core, or, when N emulated nodes share this machine's 2 cores, the share
of the most crowded core (1/2 for 3 and 4 nodes).
Usage: tools/sim_compare.py --build build --results bench/results/sim
"""
import argparse
import math
import glob
import json
import os
import re
import statistics
import subprocess
import sys

SHAPES = {  # fused_perf's shapes (bench/fused/op_bench.cpp default_shape) by size
    "gemv_allreduce": "M={},K=16,n=1",
    "embedding_alltoall": "batch={},tables=4,pool=8,dim=64",
    "gemm_reduce_scatter": "M={},K=256,n=1024",
    # fused_perf --op gemm_alltoall --ratio 128 --dim 256 --tables 4 (sim_validate.sh): its
    # synthetic routing, tokens per rank
    "gemm_alltoall": "tokens={},K=128,N=256,experts=4",
}
MODES = ("sequential", "shaped", "fused")


def link_arg(gbit, prof):
    """The emulated link's tc rate, or the rate tilecomm_calibrate measured under load in that
    setting when lower (every rank sending to every off-node rank in the library's 63 KiB pieces:
    95-96 % of the tc rate at 2-4 nodes)."""
    rate = int(gbit) * 1e9 / 8
    measured = prof.get("paths", {}).get("link_bytes_per_s", 0)
    if measured > 0:
        rate = min(rate, measured)
    return f"{rate * 8 / 1e9:.6g}gbit"


def setting_args(s, cores, burst, profile, gap=0):
    if s == "shm":
        return ["--nodes", "1", "--ranks-per-node", "2"], "1 node, np 2 (shm)"
    m = re.fullmatch(r"(\d+)n(\d+)g(?:x(\d+))?", s)
    nodes, gbit, rpn = int(m.group(1)), m.group(2), int(m.group(3) or 1)
    # tools/cluster --cpus split gives node k CPU k mod cores: with 3 nodes on 2 cores, nodes 0
    # and 2 take turns on one core (half each) while node 1 has the other. A call waits for its
    # slowest rank, so every rank is simulated at the smallest share (1 / nodes per core), split
    # between the node's ranks.
    node_cores = cores / nodes if nodes <= cores else 1.0 / math.ceil(nodes / cores)
    share = min(1.0, node_cores / rpn)
    prof = json.load(open(profile))
    # The emulated nodes share this machine's one L3: every rank's weights compete for it.
    args = ["--nodes", str(nodes), "--ranks-per-node", str(rpn), "--link", link_arg(gbit, prof),
            "--cpu-share", str(share), "--ranks-per-cache", str(nodes * rpn)]
    if burst < 0:  # cluster.sh's tbf burst: 2 ms of the rate, at least 64 KiB
        burst = max(int(gbit) * 10**9 // 8 // 500, 65536)
    args += ["--burst", str(burst)]
    if gap > 0:  # the benchmark's barrier and allreduce between timed calls
        args += ["--loop-gap", str(gap * prof["overheads"]["barrier_s"])]
    return (args,
            f"{nodes} nodes" + (f" x {rpn} ranks" if rpn > 1 else "") + f", {gbit} Gbit/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--results", default="bench/results/sim",
                    help="a run of sim_validate.sh: its profiles and measurements")
    ap.add_argument("--also", action="append", default=[],
                    help="more runs of the same grid: a row's measured median is then the median "
                         "of the runs' medians (of an even count, the mean of the middle two; "
                         "until 2026-11-28 the upper one), [min, max] over all of them")
    ap.add_argument("--cores", type=float, default=2, help="cores of the machine the runs shared")
    ap.add_argument("--burst", type=int, default=-1,
                    help="bytes of the emulated links' tbf token buckets, as sim_validate.sh's "
                         "BURST (default: each setting's link_<s>.json, which sim_validate.sh "
                         "writes, else cluster.sh's default, 2 ms of the rate, at least 64 KiB; "
                         "0: simulate the links at their rate, without buckets)")
    ap.add_argument("--gap", type=float, default=2,
                    help="idle time between the simulated loop's calls, in the profile's "
                         "barrier_s: fused_perf's timed() puts an MPI_Barrier before each call and "
                         "an MPI_Allreduce after it, so 2 (0: back to back)")
    ap.add_argument("--sim-arg", action="append", default=[],
                    help="one more tilecomm_sim argument (e.g. --sim-arg=--proxy-polls)")
    ap.add_argument("--profiles", choices=("each", "first"), default="each",
                    help="each: every grid's rows are predicted from that grid's own profiles and "
                         "a row's ratio is the median of the grids' pred / meas (each grid a "
                         "whole experiment: calibrated, predicted and measured in one state of "
                         "the machine); first: the first grid's profiles predict the median of "
                         "every grid's measurements (until 2026-11-28)")
    a = ap.parse_args()
    median = statistics.median
    rows = []
    computes = []  # (setting, op, predicted / measured compute kernel): the profile's share

    def grid_burst(grid, s):
        # --burst, else the setting's links as sim_validate.sh made them (link_<s>.json: empty is
        # cluster.sh's default), else cluster.sh's default.
        link = os.path.join(grid, f"link_{s}.json")
        if a.burst >= 0 or not os.path.exists(link):
            return a.burst
        burst = json.load(open(link)).get("burst")
        return int(burst) if burst else -1

    def predict(op, size, s, grid, name):
        # The profile made right before this row's run (sim_validate.sh CALIBRATE=each), else the
        # setting's.
        profile = os.path.join(grid, f"profile_{name}.json")
        if not os.path.exists(profile):
            profile = os.path.join(grid, f"profile_{s}.json")
        args, label = setting_args(s, a.cores, grid_burst(grid, s), profile, a.gap)
        out = subprocess.run(
            [os.path.join(a.build, "tools", "tilecomm_sim"), "--op", op, "--shape",
             SHAPES[op].format(size), "--cus", "1", "--slots", "2", "--profile", profile,
             "--repeated-call"] + args + a.sim_arg,
            capture_output=True, text=True, check=True).stdout
        return label, {m: float(re.search(rf"^\s+{m}\s+([\d.]+) us", out, re.M).group(1))
                       for m in MODES + ("compute",)}

    # Every row any of the runs measured (grids of different ops combine: the twenty-second
    # session's GemmAllToAll grids with earlier ones), each from the runs that have it.
    names = sorted({os.path.basename(path)[:-5] for g in [a.results] + a.also
                    for path in glob.glob(os.path.join(g, "*_*_*.json"))})
    for name in names:
        row = re.fullmatch(r"(.+)_(\d+)_(\w+)", name)
        if name.startswith("profile_") or not row or row.group(1) not in SHAPES:
            continue
        op, size, s = row.groups()
        grids = [g for g in [a.results] + a.also if os.path.exists(os.path.join(g, name + ".json"))]
        runs = [json.load(open(os.path.join(g, name + ".json")))[0] for g in grids]
        size = re.match(r"[\w/]+=(\d+)", runs[0]["shape"]).group(1)  # as run (M rounded)
        preds = []
        for g in grids if a.profiles == "each" else grids[:1]:
            label, pred = predict(op, size, s, g, name)
            preds.append(pred)
        if a.profiles == "each":  # a ratio per grid, from its own profile
            cratio = median(p["compute"] / r["compute_us"] for p, r in zip(preds, runs))
            ratio = {m: median(p[m] / r[m + "_us"] for p, r in zip(preds, runs)) for m in MODES}
        else:
            cratio = preds[0]["compute"] / median(r["compute_us"] for r in runs)
            ratio = {m: preds[0][m] / median(r[m + "_us"] for r in runs) for m in MODES}
        computes.append((label, op, cratio))
        for m in MODES:
            rows.append((s, label, op, SHAPES[op].format(size), m, median(r[m + "_us"] for r in runs),
                         min(r["min_us"][m] for r in runs), max(r["max_us"][m] for r in runs),
                         median(p[m] for p in preds), cratio, ratio[m]))
    key = lambda r: (0 if r[0] == "shm" else 1, r[0][0] if r[0] != "shm" else "", r[0], r[2], r[3])
    rows.sort(key=key)
    print("| setting | op, shape | mode | measured median [min, max] us | predicted us (median) | "
          "pred / meas | compute pred / meas | pred / meas ÷ compute's |")
    print("|---|---|---|---|---|---|---|---|")
    within = within_norm = 0
    for s, label, op, shape, m, med, lo, hi, pred, cratio, ratio in rows:
        within += abs(ratio - 1) <= 0.15
        within_norm += abs(ratio / cratio - 1) <= 0.15
        print(f"| {label} | {op} {shape} | {m} | {med:.0f} [{lo:.0f}, {hi:.0f}] | {pred:.0f} | "
              f"{ratio:.2f} | {cratio:.2f} | {ratio / cratio:.2f} |")
    cr = sorted(c[2] for c in computes)
    print(f"\nThe compute kernel alone (sequential's first kernel, fused_perf's compute_us): "
          f"predicted / measured {cr[0]:.2f}-{cr[-1]:.2f}, median {statistics.median(cr):.2f} "
          f"over {len(cr)} rows.")
    worst = max(rows, key=lambda r: abs(r[10] - 1))
    print(f"\nDivided by the compute kernel's own ratio (the compute this run's load left the ranks): "
          f"{within_norm} of {len(rows)} rows within ±15 %.")
    print(f"\n{within} of {len(rows)} rows within ±15 %; worst: {worst[1]}, {worst[2]} {worst[3]} "
          f"{worst[4]}: predicted {worst[8]:.0f} us, measured {worst[5]:.0f} us "
          f"({worst[10]:.2f}x)")
    print_settings(rows, computes)


def print_settings(rows, computes):
    """Per setting: rows within ±15 %, pred / meas median [min, max], the compute kernel's
    pred / meas median, and the same divided by the compute's ratio (README's table)."""
    med = statistics.median
    print("\n| setting | rows | within ±15 % | pred / meas median [min, max] | compute kernel pred / "
          "meas, median | ÷ compute's: within ±15 %, median [min, max] |")
    print("|---|---|---|---|---|---|")
    labels = list(dict.fromkeys(r[1] for r in rows))
    total = total_norm = 0
    for label in labels:
        mine = [r for r in rows if r[1] == label]
        ratios = [r[10] for r in mine]
        norm = [r[10] / r[9] for r in mine]
        w = sum(abs(x - 1) <= 0.15 for x in ratios)
        wn = sum(abs(x - 1) <= 0.15 for x in norm)
        total += w
        total_norm += wn
        comp = med([c[2] for c in computes if c[0] == label])
        print(f"| {label} | {len(mine)} | {w} | {med(ratios):.2f} [{min(ratios):.2f}, "
              f"{max(ratios):.2f}] | {comp:.2f} | {wn}, {med(norm):.2f} [{min(norm):.2f}, "
              f"{max(norm):.2f}] |")
    print(f"| all | {len(rows)} | {total} | | | {total_norm} |")


if __name__ == "__main__":
    sys.exit(main())
