#!/usr/bin/python3
"""Timeline PNG of one fused iteration from a fused_perf --trace file (Chrome trace JSON).

usage: tools/plot_trace.py TRACE.json OUT.png [TITLE]

One row per (rank, lane): workgroup spans as bars, tile marks as ticks (tile stored / handed to
the proxy on compute lanes, send posted / tile sent / tile received). Needs python3-matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKS = {  # mark name -> (colour, marker, row offset)
    "tile stored": ("tab:green", "|", 0.0),
    "tile computed": ("tab:gray", "|", 0.0),
    "tile handed to proxy": ("tab:blue", "|", 0.0),
    "send posted": ("tab:cyan", "|", 0.15),
    "block reduced": ("tab:olive", "|", -0.15),
    "tile sent": ("tab:orange", "|", 0.25),
    "tile received": ("tab:red", "|", -0.25),
}


def main(src, out, title=None):
    data = json.load(open(src))
    events = data["traceEvents"] if isinstance(data, dict) else data
    timed = [e for e in events if e.get("ph") in ("X", "i")]
    t0 = min(e["ts"] for e in timed)
    lanes = sorted({(e["pid"], e["tid"]) for e in timed})
    row = {lane: i for i, lane in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(12, 0.9 * len(lanes) + 1.2))
    for e in timed:
        y = row[(e["pid"], e["tid"])]
        if e["ph"] == "X":
            ax.barh(y, e["dur"] / 1000, left=(e["ts"] - t0) / 1000, height=0.7, color="0.85",
                    edgecolor="0.5")
            ax.text((e["ts"] - t0) / 1000, y + 0.38, e["name"], fontsize=7, va="bottom")
    for name, (colour, marker, dy) in MARKS.items():
        pts = [e for e in timed if e["ph"] == "i" and e["name"] == name]
        if pts:
            ax.scatter([(e["ts"] - t0) / 1000 for e in pts],
                       [row[(e["pid"], e["tid"])] + dy for e in pts], marker=marker, s=60,
                       color=colour, label=f"{name} ({len(pts)})", linewidths=1)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {p} lane {t}" for p, t in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms) from the iteration's first event")
    ax.set_title(title or src.rsplit("/", 1)[-1])
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:4])
