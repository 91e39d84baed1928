"""Summarises several runs of torch_collectives.py (their --json files): per op, size and variant
the median over the runs of each run's median, with [min, max] of those run medians, as a
markdown table. On a shared, loaded VM one run's small-message figures flip with whether the two
ranks share a core; the median over runs is steadier than any one run.

    python3 bench/peers/torch_collectives_summary.py run1.json run2.json ... [--json OUT]
"""
import argparse
import json

import numpy as np

COLUMNS = ("gloo", "tilecomm", "tilecomm-py", "tilecomm numpy", "mpi4py", "self", "mpi4py self")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    runs = [json.load(open(path)) for path in args.runs]
    table = []
    for k, row in enumerate(runs[0]["rows"]):
        out = {"op": row["op"], "bytes": row["bytes"]}
        for col in COLUMNS:
            meds = np.array([run["rows"][k][col]["median"] for run in runs])
            out[col] = {"median": float(np.median(meds)), "min": float(meds.min()),
                        "max": float(meds.max())}
        table.append(out)
    print(f"# {len(runs)} runs, {runs[0]['ranks']} ranks; tilecomm = {runs[0].get('tilecomm', '?')}; "
          f"us per call: median over runs of the run medians [min, max of the run medians]")
    print("| op | bytes | " + " | ".join(COLUMNS) + " | gloo / tilecomm | tilecomm / mpi4py "
          "| tilecomm-py / tilecomm |")
    print("|---|---:|" + "---:|" * (len(COLUMNS) + 3))
    for r in table:
        cells = " | ".join(f"{r[c]['median']:.1f} [{r[c]['min']:.1f}, {r[c]['max']:.1f}]"
                           for c in COLUMNS)
        m = {c: r[c]["median"] for c in COLUMNS}
        print(f"| {r['op']} | {r['bytes']} | {cells} | {m['gloo'] / m['tilecomm']:.1f}x | "
              f"{m['tilecomm'] / m['mpi4py']:.2f} | {m['tilecomm-py'] / m['tilecomm']:.1f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "summary": table}, f, indent=1)


if __name__ == "__main__":
    main()
