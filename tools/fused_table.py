#!/usr/bin/python3
"""Markdown table of fused_perf JSON results in the papers' form.

usage: tools/fused_table.py RESULT.json [...]   (one fused_perf --json file per setting)
"""
import json
import sys


def setting(path, row):
    name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    link = name.rsplit("_", 1)[-1]
    return "1 node, shared memory" if link == "shm" else f'{row.get("nodes", 2)} nodes, {link} link'


def main(paths):
    print("| operator | setting | shape | compute | comm | sequential | shaped | fused "
          "| shaped vs seq | fused vs seq | fused / max(compute, comm) | overlap eff. | wrong |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        for r in json.load(open(path)):
            ms = lambda k: r[k] / 1000.0  # noqa: E731
            mn, mx = r["min_us"], r["max_us"]
            cell = lambda k, short: f"{ms(k):.2f} [{mn[short] / 1000:.2f}, {mx[short] / 1000:.2f}]"  # noqa: E731
            best = max(r["compute_us"], r["comm_us"])
            print(f'| {r["op"]} | {setting(path, r)} | {r["shape"]} | {cell("compute_us", "compute")} '
                  f'| {cell("comm_us", "comm")} | {cell("sequential_us", "sequential")} '
                  f'| {cell("shaped_us", "shaped")} | {cell("fused_us", "fused")} '
                  f'| {-100 * r["reduction_shaped"]:+.1f} % | {-100 * r["reduction_fused"]:+.1f} % '
                  f'| {r["fused_us"] / best:.2f} | {r["overlap_efficiency"]:.2f} | {r["wrong"]} |')


if __name__ == "__main__":
    main(sys.argv[1:])
