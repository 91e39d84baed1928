#!/usr/bin/python3
"""Markdown table of fused_perf --auto JSON files (bench/fused/run_auto_check.sh): per row the
fixed modes' medians, Auto's median, its choice and trial calls, and Auto over the best fixed
mode in the timed rounds, the chosen mode's own fixed column over the best fixed mode (1.00: Auto
chose the mode that was fastest in the timed rounds), and Auto over the best fixed mode in the A/B
of the two that follows the rounds (issue 15's bar: <= 1.05; fused_perf.cpp, harness.hpp
auto_ab: the rounds' lowest median favours tied modes). Files from before the A/B are judged on
the rounds' figure.
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
          "| auto / best fixed: rounds | choice's fixed / best fixed | A/B (best fixed, rounds) "
          "| bar |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|---|---|")
    worst = 0.0
    for path in sys.argv[1:]:
        for r in json.load(open(path)):
            fixed = {m: r[f"{m}_us"] for m in ("sequential", "shaped", "fused") if r[f"{m}_us"] > 0}
            rounds = r.get("auto_over_best", 0)
            ab = r.get("auto_ab_over_best")
            ratio = rounds if ab is None else ab
            worst = max(worst, ratio)
            ab_cell = "—" if ab is None else (f"{ab:.2f} ({r['auto_best_fixed']}, "
                                               f"{r['auto_ab_rounds']})")
            choice = fixed.get(r["auto_choice"], 0) / min(fixed.values()) if fixed else 0
            ms = lambda us: f"{us / 1000:.3f}"
            print(f"| {r['op']} | {setting(path, r)} | {r['shape']} | "
                  + " | ".join(ms(fixed[m]) if m in fixed else "—"
                               for m in ("sequential", "shaped", "fused"))
                  + f" | {ms(r['auto_us'])} ({r['auto_choice']}, {r['auto_trials']}) | {rounds:.2f} "
                  f"| {choice:.2f} | {ab_cell} | {'met' if ratio <= 1.05 else 'missed'} |")
    print(f"\nTimes in ms (median of the slowest rank); worst auto / best fixed (A/B where "
          f"measured): {worst:.2f}")


if __name__ == "__main__":
    main()
