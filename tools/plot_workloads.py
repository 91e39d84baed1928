#!/usr/bin/python3
"""Per workload, time per variant on 1 node / 2 nodes at 1 Gbit/s / 2 nodes at 10 Gbit/s.

usage: tools/plot_workloads.py OUT_PREFIX SETTING=RESULT.json [SETTING=RESULT.json ...]
  e.g. tools/plot_workloads.py bench/results/workloads/plot \\
         "1 node=bench/results/workloads/shm.json" \\
         "2 nodes, 1 Gbit/s=bench/results/workloads/1gbit.json" \\
         "2 nodes, 10 Gbit/s=bench/results/workloads/10gbit.json"
writes OUT_PREFIX_<workload>.png for every workload in the files.

Each RESULT.json is one `fused_perf --workload ... --json` run. One panel per setting (a row),
the workload's cases along x, one bar per variant (median, whiskers [min, max]; no bar where the
variant did not run, e.g. the CU mask on a 1-CU device), the CPU-aware ideal as a black
tick. The time axis is logarithmic where a panel's cases differ by 10x and more. Needs Debian's python3-matplotlib
(run with /usr/bin/python3).
"""
import json
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

VARIANTS = [("sequential", "sequential", "tab:gray"),
            ("seq_best_coll", "sequential, best collective", "tab:brown"),
            ("shaped_lds", "shaped LDS", "tab:olive"),
            ("shaped_nonblocking", "shaped non-blocking", "tab:cyan"),
            ("shaped_cu_mask", "shaped CU mask", "tab:purple"),
            ("fused", "fused", "tab:red")]


def case_label(r):
    extra = r["shape"].replace("M=", "").split(" ")
    if r["workload"] == "llama-decode":
        n = next((e for e in extra if e.startswith("n=")), "n=1")
        return f'{r["layer"]}\n{n} {"bf16" if "bf16" in extra else "fp32"}'
    return r["layer"].replace(" (", "\n(").replace(" + ", "\n+ ")


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        print(__doc__)
        return 2
    prefix = argv[1]
    settings = [a.split("=", 1) for a in argv[2:]]
    data = [(name, json.load(open(path))) for name, path in settings]
    workloads = OrderedDict()
    for _, rows in data:
        for r in rows:
            workloads.setdefault(r["workload"], None)
    for wl in workloads:
        cases = OrderedDict()
        for _, rows in data:
            for r in rows:
                if r["workload"] == wl:
                    cases.setdefault(case_label(r), None)
        labels = list(cases)
        width = max(7.0, 1.1 * len(labels) + 2)
        fig, axes = plt.subplots(len(data), 1, figsize=(width, 2.9 * len(data) + 0.7), squeeze=False)
        bar = 0.8 / len(VARIANTS)
        for ax, (name, rows) in zip(axes[:, 0], data):
            mine = {case_label(r): r for r in rows if r["workload"] == wl}
            for vi, (key, vlabel, colour) in enumerate(VARIANTS):
                xs, ys, lo, hi = [], [], [], []
                for ci, label in enumerate(labels):
                    r = mine.get(label)
                    x = ci - 0.4 + bar * (vi + 0.5)
                    v = r["variants"].get(key) if r else None
                    if not v or not v["available"]:
                        continue
                    m = v["median_us"] / 1000
                    xs.append(x)
                    ys.append(m)
                    lo.append(m - v["min_us"] / 1000)
                    hi.append(v["max_us"] / 1000 - m)
                ax.bar(xs, ys, bar, color=colour, label=vlabel, yerr=[lo, hi],
                       error_kw={"elinewidth": 0.6, "capsize": 1.5, "alpha": 0.6})
            for ci, label in enumerate(labels):
                r = mine.get(label)
                if r:
                    ideal = r["ideal_cpu_us"] / 1000
                    ax.hlines(ideal, ci - 0.42, ci + 0.42, colors="black", linewidth=1.2)
            any_row = next(iter(mine.values()), None)
            sub = ""
            if any_row:
                sub = (f' — {any_row["ranks"]} ranks, {any_row["cus"]} CU(s) x '
                       f'{any_row["slots"]} slots per rank')
            ax.set_title(f"{wl}: {name}{sub}", fontsize=10)
            tops = [r["variants"]["sequential"]["median_us"] for r in mine.values()]
            if tops and max(tops) > 10 * min(tops):
                ax.set_yscale("log")  # the cases differ by 10x and more
            else:
                ax.set_ylim(bottom=0)
            ax.set_ylabel("ms per call (median)")
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels(labels, fontsize=7)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        handles = [Patch(color=colour, label=vlabel) for _, vlabel, colour in VARIANTS]
        handles.append(Line2D([], [], color="black", label="ideal (CPU-aware)"))
        fig.legend(handles=handles, fontsize=7, ncol=4, loc="lower center")
        fig.tight_layout(rect=(0, 0.7 / (2.9 * len(data) + 0.7), 1, 1))
        out = f"{prefix}_{wl}.png"
        fig.savefig(out, dpi=100)
        plt.close(fig)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
