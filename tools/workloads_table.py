#!/usr/bin/python3
"""Markdown table of `fused_perf --workload --json` runs, one row per case and setting.

usage: tools/workloads_table.py [--compact] [--match REGEX] SETTING=RESULT.json [...]
  e.g. tools/workloads_table.py "1 node=bench/results/workloads/shm.json" \\
         "1 Gbit/s=bench/results/workloads/1gbit.json" "10 Gbit/s=bench/results/workloads/10gbit.json"

Rows grouped by case (workload, layer, shape), the settings in the order given. Columns: the
median of every variant (ms; tuned baselines with their winning knob), the best variant other
than fused, fused against it, against sequential and against the CPU-aware ideal, the recovered
fraction, and issue 13's bars as fused_perf judged them. --compact (the README's form): only
sequential, the best other variant with its knob, fused (median [min, max]) and the ratios. --match keeps the cases
whose "workload layer shape" matches REGEX.
"""
import json
import re
import sys

COLUMNS = [("sequential", "sequential"), ("seq_best_coll", "seq. best collective"),
           ("shaped_lds", "shaped LDS"), ("shaped_nonblocking", "shaped non-blocking"),
           ("shaped_cu_mask", "shaped CU mask"), ("fused", "fused")]


def cell(v, ranges=False):
    if not v["available"]:
        return "n/a"
    t = f'{v["median_us"] / 1000:.2f}'
    if ranges:
        t += f' [{v["min_us"] / 1000:.2f}, {v["max_us"] / 1000:.2f}]'
    return f'{t} ({v["knob"]})' if v["knob"] else t


def auto(r):
    """Auto's time over the best fixed variant's, with the mode it settled on: from the A/B of the
    two after the rounds (the bar's figure), then in the rounds themselves, which favour tied
    variants (runs from before the A/B: the rounds' figure alone; before the Auto column: a dash)."""
    if "auto_over_best_fixed" not in r:
        return "—"
    if "auto_ab_over_best_fixed" not in r:
        return f'{r["auto_over_best_fixed"]:.2f} ({r["auto_choice"]})'
    return (f'{r["auto_ab_over_best_fixed"]:.2f} ({r["auto_choice"]}; '
            f'rounds {r["auto_over_best_fixed"]:.2f})')


def main(argv):
    match, compact = None, False
    while len(argv) > 1 and argv[1].startswith("--"):
        if argv[1] == "--compact":
            compact = True
            argv = argv[:1] + argv[2:]
        elif argv[1] == "--match" and len(argv) > 2:
            match = re.compile(argv[2])
            argv = argv[:1] + argv[3:]
        else:
            print(__doc__)
            return 2
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__)
        return 2
    runs = [(name, json.load(open(path))) for name, path in (a.split("=", 1) for a in argv[1:])]
    keys = []
    for _, rows in runs:
        for r in rows:
            k = (r["workload"], r["layer"], r["shape"])
            if k not in keys and (not match or match.search(" ".join(k))):
                keys.append(k)
    if compact:
        print("| workload | layer | shape | setting | sequential | best other variant | fused "
              "| fused / best other | fused / seq | fused / ideal_cpu | recovered | bars "
              "| auto / best fixed: A/B (choice; rounds) | wrong |")
        print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    else:
        print("| workload | layer | shape | setting | " + " | ".join(c[1] for c in COLUMNS) +
              " | best other | fused / best other | fused / seq | fused / ideal_cpu | recovered "
              "| bars | wrong |")
        print("|---|---|---|---|" + "---:|" * len(COLUMNS) + "---|---:|---:|---:|---:|---|---:|")
    for k in keys:
        for name, rows in runs:
            r = next((r for r in rows if (r["workload"], r["layer"], r["shape"]) == k), None)
            if not r:
                continue
            v = r["variants"]
            rec = r["recovered"]
            rec = "n/a (saving < 5 %)" if rec is None else f"{rec:.2f}"
            if compact:
                best = v[r["best_other"]]
                print(f'| {k[0]} | {k[1]} | {k[2]} | {name} | {cell(v["sequential"], True)} '
                      f'| {r["best_other"]}: {cell(best, True)} | {cell(v["fused"], True)} '
                      f'| {r["fused_over_best_other"]:.2f} | {r["fused_over_sequential"]:.2f} '
                      f'| {r["fused_over_ideal_cpu"]:.2f} | {rec} | {r["bars"]} | {auto(r)} '
                      f'| {r["wrong"]} |')
                continue
            print(f'| {k[0]} | {k[1]} | {k[2]} | {name} | '
                  + " | ".join(cell(v[c]) for c, _ in COLUMNS)
                  + f' | {r["best_other"]} | {r["fused_over_best_other"]:.2f} '
                  f'| {r["fused_over_sequential"]:.2f} | {r["fused_over_ideal_cpu"]:.2f} | {rec} '
                  f'| {r["bars"]} | {r["wrong"]} |')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
