#!/usr/bin/python3
"""Fit an alpha-beta cost model per algorithm to the collectives benchmarks' JSON and print the
crossover sizes it implies, next to the ladder the measurements themselves give.

    mpirun -np 2 ... build-bench/bench/collectives/allreduce_perf -b 8 -e 16M --json ar.json
    tools/tune_collectives.py ar.json [more.json ...] [--fit-min 1K] [--absolute]

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
import sys
from collections import defaultdict


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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", nargs="+", help="files written by *_perf --json")
    p.add_argument("--fit-min", type=parse_size, default=0, help="smallest size fitted (bytes, K/M ok)")
    p.add_argument("--fit-max", type=parse_size, default=1 << 62, help="largest size fitted")
    p.add_argument("--absolute", action="store_true", help="unweighted least squares")
    p.add_argument("--include-auto", action="store_true", help="fit the default ladder too")
    p.add_argument("--markdown", action="store_true", help="print the measurements as tables")
    args = p.parse_args()
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
