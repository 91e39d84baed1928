#!/usr/bin/python3
"""Scale-out prediction (docs/model.md "Simulator", README "At scale"): tilecomm_sim at 8-128 nodes
for the DLRM-style EmbeddingAllToAll (weak scaling: batch and tables per rank fixed), a
tensor-parallel decode layer (GemvAllReduce M=4096 x K=4096, K split over the ranks, one vector)
and an expert-parallel MoE layer's expert GEMM + All-to-All back (GemmAllToAll, weak scaling: one
expert per rank, --moe-tokens rows per rank routed over all experts by fused_perf's synthetic
pattern, Mixtral's down projection sliced as the workloads slice it: K = 14336 / 8, N = 4096).
Writes the predictions as JSON lines, a markdown table on stdout and an SVG plot (no matplotlib
here: the SVG is written by hand).

  tools/sim_scale.py --build build --profile bench/results/profile_np2_vm.json \
      --out bench/results/sim/scale.jsonl --svg docs/sim_scale.svg
"""
import argparse
import json
import os
import subprocess
import sys

NODES = (8, 16, 32, 64, 128)


def workloads(n, a):
    ranks = n * a.ranks_per_node
    yield ("dlrm", "embedding_alltoall",
           f"batch={a.batch_per_rank * ranks},tables={a.tables},pool={a.pool},dim={a.dim},"
           f"tile={a.bag_tile}", [])
    decode = f"M=4096,K={max(1, 4096 // ranks)},n=1"
    # The operator's choice: from 8 nodes on, decode's 16 KiB output takes the two-shot protocol
    # (ReduceScatter + AllGather tiles: 2 (N - 1) / N blocks per rank on the wire), since one-shot
    # would send every block to every other node ((N - 1) x 16 KiB > 48 KiB).
    yield ("decode", "gemv_allreduce", decode, [])
    one_shot = ["--fused-algorithm", "one_shot"]
    yield ("decode_one_shot", "gemv_allreduce", decode, one_shot)
    yield ("decode_one_shot_tile1024", "gemv_allreduce", decode + ",tile=1024", one_shot)
    yield ("moe", "gemm_alltoall", f"tokens={a.moe_tokens},K=1792,N=4096,experts=1", [])


def svg(rows, path):
    """Sequential (dashed) and fused (solid) time per call against nodes, log-log."""
    import math
    names = sorted({r["name"] for r in rows})
    colours = {"dlrm": "#1f77b4", "moe": "#ff7f0e", "decode": "#9467bd",
               "decode_one_shot": "#d62728",
               "decode_one_shot_tile1024": "#2ca02c"}
    w, h, left, top, pw, ph = 760, 460, 80, 40, 560, 340
    vals = [r[m] for r in rows for m in ("sequential_us", "fused_us")]
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    x = lambda n: left + pw * NODES.index(n) / (len(NODES) - 1)
    y = lambda v: top + ph * (1 - (math.log10(v) - lo) / (hi - lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14">tilecomm_sim: time per call, sequential '
           f'(dashed) vs fused (solid); 100 Gbit/s, 2 us, full bisection</text>']
    for e in range(lo, hi + 1):
        v = 10 ** e
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#ddd"/><text x="{left - 8}" y="{y(v) + 4:.1f}" '
                   f'text-anchor="end">{v:g} us</text>')
    for n in NODES:
        out.append(f'<text x="{x(n):.1f}" y="{top + ph + 18}" text-anchor="middle">{n}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{top + ph + 36}" text-anchor="middle">nodes '
               f'(1 rank of 32 cores each)</text>')
    for k, name in enumerate(names):
        c = colours.get(name, "black")
        for mode, dash in (("sequential_us", ' stroke-dasharray="6 4"'), ("fused_us", "")):
            pts = sorted((r["nodes"], r[mode]) for r in rows if r["name"] == name)
            out.append('<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>'.format(
                c, dash, " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)))
            for n, v in pts:
                out.append(f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"/>')
        out.append(f'<text x="{left + pw + 10}" y="{top + 16 + 18 * k}" fill="{c}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--profile", default="bench/results/profile_np2_vm.json")
    ap.add_argument("--ranks-per-node", type=int, default=1)
    ap.add_argument("--cores", type=int, default=32, help="cores per rank")
    ap.add_argument("--batch-per-rank", type=int, default=2048)
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--pool", type=int, default=20)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--bag-tile", type=int, default=256)
    ap.add_argument("--moe-tokens", type=int, default=4096, help="MoE rows routed per rank")
    ap.add_argument("--out", default="bench/results/sim/scale.jsonl")
    ap.add_argument("--svg", default="docs/sim_scale.svg")
    a = ap.parse_args()
    if os.path.exists(a.out):
        os.remove(a.out)
    rows = []
    for n in NODES:
        for name, op, shape, extra in workloads(n, a):
            subprocess.run([os.path.join(a.build, "tools", "tilecomm_sim"), "--op", op, "--shape",
                            shape, "--nodes", str(n), "--ranks-per-node", str(a.ranks_per_node),
                            "--cus", str(a.cores), "--slots", str(2 * a.cores), "--link", "100gbit",
                            "--latency", "2us", "--nic-offload", "--profile", a.profile,
                            "--summary", a.out] + extra, check=True, capture_output=True)
            with open(a.out) as f:
                r = json.loads(f.readlines()[-1])
            r["name"] = name
            rows.append(r)
    print("| workload | nodes | shape | tile | compute us | sequential us | shaped us | fused us "
          "| fused vs sequential |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['nodes']} | {r['shape']} | {r['tile']} | {r['compute_us']:.0f} | "
              f"{r['sequential_us']:.0f} | {r['shaped_us']:.0f} | {r['fused_us']:.0f} | "
              f"{100 * (r['fused_us'] / r['sequential_us'] - 1):+.1f} % |")
    svg(rows, a.svg)


if __name__ == "__main__":
    sys.exit(main())
