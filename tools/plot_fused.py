#!/usr/bin/python3
"""Plot fused_perf JSON: time vs size for compute-only, comm-only, sequential, shaped and fused.

usage: tools/plot_fused.py OUT.png RESULT.json [RESULT.json ...]

Each JSON file is one `fused_perf --json` run (one operator, a sweep of sizes). One panel per file.
Needs Debian's python3-matplotlib (run with /usr/bin/python3).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = [("compute_us", "compute only", ":"), ("comm_us", "comm only", ":"),
          ("sequential_us", "sequential", "-"), ("shaped_us", "shaped", "--"),
          ("fused_us", "fused", "-")]


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    out, files = argv[1], argv[2:]
    fig, axes = plt.subplots(1, len(files), figsize=(5.5 * len(files), 4.2), squeeze=False)
    for ax, path in zip(axes[0], files):
        rows = json.load(open(path))
        if not rows:
            continue
        rows.sort(key=lambda r: r["bytes"])
        x = [r["bytes"] / 2**20 for r in rows]
        for key, label, style in SERIES:
            ax.plot(x, [r[key] / 1000 for r in rows], style, marker="o", markersize=3, label=label)
        r0 = rows[0]
        ax.set_title(f'{r0["op"]} ({r0["ranks"]} ranks, {r0.get("nodes", 1)} nodes)', fontsize=10)
        ax.set_xlabel("MiB moved per rank")
        ax.set_ylabel("time (ms, median)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
