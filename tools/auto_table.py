#!/usr/bin/python3
"""Markdown table of fused_perf --auto JSON files (bench/fused/run_auto_check.sh): per row the
fixed modes' medians, Auto's median, its choice and trial calls, and Auto over the best fixed
mode (issue 15's bar: <= 1.05), and the chosen mode's own fixed column over the best fixed mode
(1.00: Auto chose the mode that was fastest in the timed rounds; a miss with 1.00 there is Auto's
calls timing apart from the same mode's fixed calls, not a wrong choice).
    tools/auto_table.py bench/results/auto/*.json
"""
import json
import sys


def setting(path, row):
    name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].rsplit("_", 1)[-1]
    if row["nodes"] == 1:
        return "1 node, shared memory"
    return f"2 nodes, {name.replace('gbit', ' Gbit/s')}"


def main():
    print("| operator | setting | shape | sequential | shaped | fused | auto (choice, trial calls) "
          "| auto / best fixed | choice's fixed / best fixed | bar |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|---|")
    worst = 0.0
    for path in sys.argv[1:]:
        for r in json.load(open(path)):
            fixed = {m: r[f"{m}_us"] for m in ("sequential", "shaped", "fused") if r[f"{m}_us"] > 0}
            ratio = r.get("auto_over_best", 0)
            worst = max(worst, ratio)
            choice = fixed.get(r["auto_choice"], 0) / min(fixed.values()) if fixed else 0
            ms = lambda us: f"{us / 1000:.3f}"
            print(f"| {r['op']} | {setting(path, r)} | {r['shape']} | "
                  + " | ".join(ms(fixed[m]) if m in fixed else "—"
                               for m in ("sequential", "shaped", "fused"))
                  + f" | {ms(r['auto_us'])} ({r['auto_choice']}, {r['auto_trials']}) | {ratio:.2f} "
                  f"| {choice:.2f} | {'met' if ratio <= 1.05 else 'missed'} |")
    print(f"\nTimes in ms (median of the slowest rank); worst auto / best fixed: {worst:.2f}")


if __name__ == "__main__":
    main()
