#!/usr/bin/python3
"""Fit an alpha-beta cost model per algorithm to the collectives benchmarks' JSON and print the
crossover sizes it implies, next to the ladder the measurements themselves give; or print the
default tables' thresholds (collectives/default_thresholds.hpp) as the measurements give them.

    mpirun -np 2 ... build-bench/bench/collectives/allreduce_perf -b 8 -e 16M --json ar.json
    tools/tune_collectives.py ar.json [more.json ...] [--fit-min 1K] [--absolute]
    tools/tune_collectives.py --emit-header ar*.json rs*.json > collectives/default_thresholds.hpp

--emit-header prints the current header with every threshold the given files measure replaced by
the measured one (the sizes where the measured ladder switches, see THRESHOLDS below); thresholds
no file measures keep their current value. Where each value came from goes to stderr. Rows carry
"nodes" and "ranks_per_node" (files from before those fields count as one node).

Model: t(bytes) = a + b * bytes (a: latency alpha in us; 1/b: effective bandwidth, which folds the
reduction cost gamma into beta since both scale with bytes). Fitted by linear least squares; by
default every point is weighted by 1/t^2, i.e. the relative error is minimised, because times
span four orders of magnitude and an unweighted fit would ignore small messages.
Rows are grouped by (collective, nranks, dtype, op); "auto" is left out of the fit (it is itself
a ladder) but appears in the measured ladder.
"""
import argparse
import itertools
import json
import math
import os
import re
import sys
from collections import defaultdict

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "collectives",
                      "default_thresholds.hpp")
ELEM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bfloat16": 2}


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B").rstrip("I")
    unit = t[-1] if t and t[-1] in "KMG" else ""
    return int(float(t[: len(t) - len(unit)]) * units[unit])


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fit(points, relative):
    """Weighted least squares for t = a + b x. Returns (a, b, rms relative error)."""
    sw = sx = sy = sxx = sxy = 0.0
    for x, t in points:
        w = 1.0 / (t * t) if relative else 1.0
        sw += w
        sx += w * x
        sy += w * t
        sxx += w * x * x
        sxy += w * x * t
    det = sw * sxx - sx * sx
    if len(points) < 2 or det == 0:
        x, t = points[0]
        return t, 0.0, 0.0
    b = (sw * sxy - sx * sy) / det
    a = (sy - b * sx) / sw
    rms = math.sqrt(sum(((a + b * x) / t - 1) ** 2 for x, t in points) / len(points))
    return a, b, rms


def ladder(intervals):
    """Merges [(lo, hi, name)] with equal neighbours."""
    out = []
    for lo, hi, name in intervals:
        if out and out[-1][2] == name:
            out[-1] = (out[-1][0], hi, name)
        else:
            out.append((lo, hi, name))
    return out


def report(key, rows, args):
    coll, nranks, dtype, op = key
    print(f"\n== {coll}, {nranks} ranks, {dtype}, op {op}")
    by_algo = defaultdict(list)
    for r in rows:
        if r.get("time_us") and args.fit_min <= r["bytes"] <= args.fit_max:
            by_algo[r["algo"]].append((float(r["bytes"]), float(r["time_us"])))
    models = {}
    print(f"{'algo':>20} {'alpha(us)':>10} {'bw(GB/s)':>9} {'rms rel err':>11} {'points':>6}")
    for algo, pts in sorted(by_algo.items()):
        if algo == "auto" and not args.include_auto:
            continue
        a, b, rms = fit(pts, not args.absolute)
        models[algo] = (a, b)
        bw = f"{1e-3 / b:9.2f}" if b > 0 else f"{'inf':>9}"
        print(f"{algo:>20} {a:10.2f} {bw} {rms:11.2%} {len(pts):6d}")
    if len(models) < 2:
        return
    print("crossovers (model):")
    for (n1, (a1, b1)), (n2, (a2, b2)) in itertools.combinations(sorted(models.items()), 2):
        if b1 == b2:
            continue
        x = (a2 - a1) / (b1 - b2)
        if x <= 0:
            continue
        below, above = (n1, n2) if a1 < a2 else (n2, n1)
        print(f"  {n1} vs {n2}: {human(x)} ({below} below, {above} above)")
    sizes = sorted({x for pts in by_algo.values() for x, _ in pts})
    cuts = sorted({sizes[0], sizes[-1]} | {
        (a2 - a1) / (b1 - b2)
        for (a1, b1), (a2, b2) in itertools.combinations(models.values(), 2)
        if b1 != b2 and sizes[0] < (a2 - a1) / (b1 - b2) < sizes[-1]})
    spans = []
    for lo, hi in zip(cuts, cuts[1:]):
        mid = math.sqrt(lo * hi)
        spans.append((lo, hi, min(models, key=lambda n: models[n][0] + models[n][1] * mid)))
    print("fitted ladder: " + "; ".join(f"{human(lo)}..{human(hi)}: {n}" for lo, hi, n in ladder(spans)))
    # The measured ladder: fastest time per size (the median over runs when several are given).
    med = {}
    for algo, pts in by_algo.items():
        per_size = defaultdict(list)
        for x, t in pts:
            per_size[x].append(t)
        med[algo] = {x: sorted(v)[len(v) // 2] for x, v in per_size.items()}
    best = {}
    for algo, times in med.items():
        if algo == "auto":
            continue
        for x, t in times.items():
            if x not in best or t < best[x][1]:
                best[x] = (algo, t)
    mpi = med.get("mpi", {})
    spans = [(x, x, best[x][0]) for x in sorted(best)]
    print("measured ladder: " + "; ".join(f"{human(lo)}..{human(hi)}: {n}" for lo, hi, n in ladder(spans)))
    if mpi:
        worst = min((mpi[x] / best[x][1], x) for x in best if x in mpi)
        print(f"best-of vs mpi: worst speedup {worst[0]:.2f}x at {human(worst[1])}")


def markdown(key, rows):
    """A table: one line per size, one column per algorithm, "time us (speedup vs mpi)"."""
    coll, nranks, dtype, op = key
    algos = []
    for r in rows:
        if r["algo"] not in algos:
            algos.append(r["algo"])
    # Several runs (several JSON files): the median time and the median of the per-run speedups
    # (each measured interleaved with mpi in its own run).
    runs = defaultdict(list)
    for r in rows:
        if r.get("time_us"):
            runs[(r["bytes"], r["algo"])].append(r)

    def median(v):
        v = sorted(v)
        return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])

    cell = {}
    for k, rs in runs.items():
        sp = [r["speedup_vs_mpi"] for r in rs if r.get("speedup_vs_mpi")]
        cell[k] = {"time_us": median([r["time_us"] for r in rs]),
                   "speedup_vs_mpi": median(sp) if sp else None}
    nruns = max((len(v) for v in runs.values()), default=0)
    per_peer = coll == "alltoall"
    print(f"\n{coll}, {nranks} ranks, {dtype}" + (f", {op}" if op not in ("none", "?") else "") +
          f": median µs (speedup vs mpi){f', median of {nruns} runs' if nruns > 1 else ''}\n")
    head = ["size"] + (["per peer"] if per_peer else []) + algos
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in sorted({r["bytes"] for r in rows}):
        line = [human(b)] + ([human(b / nranks)] if per_peer else [])
        for a in algos:
            r = cell.get((b, a))
            if not r or not r.get("time_us"):
                line.append("–")
            elif a == "mpi" or not r.get("speedup_vs_mpi"):
                line.append(f"{r['time_us']:.3g}")
            else:
                line.append(f"{r['time_us']:.3g} ({r['speedup_vs_mpi']:.2f}×)")
        print("| " + " | ".join(line) + " |")


# ---- --emit-header ----------------------------------------------------------------------------
# Each threshold: the collective, which rows measure it (by nodes and ranks per node), the algorithm
# the table picks on one side, the ones it competes with, and which side of the threshold it owns
# ("up_to": the table picks it for sizes <= the threshold; "from": for sizes >= it). Sizes are the
# table's key, bytes of one rank's contribution: count x element size.

def one_node(small):
    return lambda r, t: r["nodes"] == 1 and (r["ranks_per_node"] <= t["small_node_ranks"]) == small


def across_nodes(ranks_per_node_ok, min_nodes=lambda t: 2):
    return lambda r, t: (r["nodes"] >= min_nodes(t)
                         and ranks_per_node_ok(r["ranks_per_node"]))


THRESHOLDS = [
    ("allreduce_one_shot_max_small_node", "allreduce", one_node(True), "one_shot", ["two_shot"],
     "up_to"),
    ("allreduce_one_shot_max", "allreduce", one_node(False), "one_shot", ["two_shot"], "up_to"),
    ("allreduce_hierarchical_min", "allreduce", across_nodes(lambda n: n >= 2), "hierarchical",
     ["recursive_doubling", "ring", "mpi"], "from"),
    ("allreduce_recursive_doubling_max", "allreduce", across_nodes(lambda n: n == 1),
     "recursive_doubling", ["ring", "mpi"], "up_to"),
    ("allgather_ring_min", "allgather",
     across_nodes(lambda n: True, lambda t: t["allgather_hierarchical_max_nodes"] + 1), "ring",
     ["mpi"], "from"),
    # On more nodes than reduce_scatter_hierarchical_max_nodes (on fewer, hierarchical everywhere).
    ("reduce_scatter_ring_min", "reduce_scatter",
     across_nodes(lambda n: True, lambda t: t["reduce_scatter_hierarchical_max_nodes"] + 1), "ring",
     ["hierarchical"], "from"),
]


def read_header(path):
    """The header's text and its constants: name -> value (std::size_t ones in bytes)."""
    with open(path) as f:
        text = f.read()
    scale = {"": 1, "kKiB": 1 << 10, "kMiB": 1 << 20}
    values = {}
    for m in re.finditer(r"static constexpr (?:std::size_t|int) (\w+) = (\d+)(?: \* (kKiB|kMiB))?;",
                         text):
        values[m.group(1)] = int(m.group(2)) * scale[m.group(3) or ""]
    return text, values


def size_expr(n):
    for unit, scale in (("kMiB", 1 << 20), ("kKiB", 1 << 10)):
        if n and n % scale == 0:
            return f"{n // scale} * {unit}"
    return str(n)


def switch_point(times, pick, others, side, sizes):
    """The threshold the measured medians give (None when `pick` or its rivals were not measured
    at every size): "up_to", the largest size up to which `pick` is never slower than the fastest
    rival (0 when it loses at the smallest); "from", the smallest size from which it never is
    (one past the largest size when it loses at the largest)."""
    if pick not in times or not any(o in times for o in others):
        return None
    if any(x not in times[pick] for x in sizes):
        return None

    def wins(x):
        rival = min(times[o][x] for o in others if x in times.get(o, {}))
        return times[pick][x] <= rival

    if side == "up_to":
        best = 0
        for x in sizes:
            if not wins(x):
                break
            best = x
        return best
    best = sizes[-1] + 1
    for x in reversed(sizes):
        if not wins(x):
            break
        best = x
    return best


def derive(name, coll, selects, pick, others, side, rows, current):
    """Per measured group (ranks, ranks per node, dtype): the switch point; and their median."""
    groups = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        if r.get("collective") != coll or not r.get("time_us") or not selects(r, current):
            continue
        key = r["count"] * ELEM_BYTES[r["dtype"]]
        if coll in ("reduce_scatter", "allgather"):  # the JSON counts every rank's block; the
            key //= r["nranks"]                           # table, one rank's
        groups[(r["nranks"], r["ranks_per_node"], r["dtype"])][r["algo"]][key].append(r["time_us"])
    found = []
    for group, by_algo in sorted(groups.items()):
        times = {a: {x: sorted(v)[len(v) // 2] for x, v in t.items()} for a, t in by_algo.items()}
        sizes = sorted({x for t in times.values() for x in t})
        if not sizes:
            continue
        value = switch_point(times, pick, others, side, sizes)
        if value is not None:
            found.append((group, value))
    if not found:
        return None, "not measured in these files: kept"
    values = sorted(v for _, v in found)
    detail = ", ".join(f"np {g[0]} ({g[1]}/node) {g[2]}: {human(v)}" for g, v in found)
    return values[(len(values) - 1) // 2], f"median of {detail}"


def emit_header(paths):
    text, current = read_header(HEADER)
    rows = []
    for path in paths:
        with open(path) as f:
            for r in json.load(f):
                r.setdefault("nodes", 1)
                r.setdefault("ranks_per_node", r.get("nranks", 1) // max(r["nodes"], 1))
                rows.append(r)
    for name, coll, selects, pick, others, side in THRESHOLDS:
        value, how = derive(name, coll, selects, pick, others, side, rows, current)
        if value is not None:
            current[name] = value
            text = re.sub(rf"(static constexpr std::size_t {name} = )[^;]+;",
                          lambda m: m.group(1) + size_expr(value) + ";", text)
        print(f"{name} = {human(current[name])}: {how}", file=sys.stderr)
    sys.stdout.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", nargs="+", help="files written by *_perf --json")
    p.add_argument("--fit-min", type=parse_size, default=0, help="smallest size fitted (bytes, K/M ok)")
    p.add_argument("--fit-max", type=parse_size, default=1 << 62, help="largest size fitted")
    p.add_argument("--absolute", action="store_true", help="unweighted least squares")
    p.add_argument("--include-auto", action="store_true", help="fit the default ladder too")
    p.add_argument("--markdown", action="store_true", help="print the measurements as tables")
    p.add_argument("--emit-header", action="store_true",
                   help="print collectives/default_thresholds.hpp with the measured thresholds")
    args = p.parse_args()
    if args.emit_header:
        emit_header(args.json)
        return
    groups = defaultdict(list)
    for path in args.json:
        with open(path) as f:
            for r in json.load(f):
                groups[(r.get("collective", "?"), r.get("nranks", 0), r["dtype"], r.get("op", "?"))].append(r)
    if not groups:
        sys.exit("no rows")
    for key in sorted(groups):
        if args.markdown:
            markdown(key, groups[key])
        else:
            report(key, groups[key], args)


if __name__ == "__main__":
    main()
