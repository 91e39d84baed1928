#!/usr/bin/python3
"""Measured (fused_perf) against predicted (tilecomm_info --explain) for every operator.

    tools/model_check.py --build build --profile /tmp/p.json --np 2 [--node-size 1] [--iters 10]

Runs fused_perf once per operator at its default shape (bench/fused/op_bench.cpp) and at one
other size, then asks the model for the same shape and layout, and prints a Markdown table:
median [min, max] of the slowest rank, microseconds, and predicted / measured.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

# op -> (default size, ratio, dim, tables) as bench/fused/op_bench.cpp's default_shape, and the
# other size measured.
OPS = {
    "gemv_allreduce": ((1 << 18, 16, 0, 0), 1 << 14),
    "embedding_alltoall": ((4096, 8, 64, 4), 1024),
    "gemm_alltoall": ((2048, 64, 256, 4), 512),
    "gemm_reduce_scatter": ((2048, 256, 1024, 0), 512),
}


def model_shape(op, size, ratio, dim, tables):
    if op == "gemv_allreduce":
        return f"M={size},K={ratio},n=1"
    if op == "embedding_alltoall":
        return f"batch={size},pool={ratio},dim={dim},tables={tables}"
    return f"M={size},K={ratio},N={dim}"


def predict(a, op, shape, nodes):
    out = subprocess.run(
        [os.path.join(a.build, "tools/tilecomm_info"), "--explain", op, shape, "--ranks",
         str(a.np), "--nodes", str(nodes), "--cus", str(a.cus), "--profile", a.profile],
        check=True, capture_output=True, text=True).stdout
    got = {}
    for key in ("compute", "collective", "sequential", "shaped", "fused"):
        m = re.search(rf"\b{key}\s+([0-9.]+) us", out)
        got[key] = float(m.group(1))
    got["auto"] = re.search(r"^auto: (.*)$", out, re.M).group(1)
    return got


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--profile", required=True)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--node-size", type=int, default=0)
    p.add_argument("--cus", type=int, default=1)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--ops", default=",".join(OPS))
    a = p.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OPENBLAS_NUM_THREADS="1")
    mpirun = ["mpirun", "-np", str(a.np), "--oversubscribe", "--bind-to", "none", "--mca",
              "mpi_yield_when_idle", "1"]
    if a.node_size:
        mpirun += ["-x", f"TILECOMM_NODE_SIZE={a.node_size}"]
    print("| op | shape | nodes | variant | measured us | predicted us | pred/meas |")
    print("|---|---|---|---|---|---|---|")
    for op in a.ops.split(","):
        (size, ratio, dim, tables), other = OPS[op]
        for s in (size, other):
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                subprocess.run(mpirun + [os.path.join(a.build, "bench/fused/fused_perf"), "--op", op,
                                         "-b", str(s), "-e", str(s), "-n", str(a.iters),
                                         "--json", f.name], check=True, env=env,
                               capture_output=True)
                row = json.load(f)[0]
            pred = predict(a, op, model_shape(op, s, ratio, dim, tables), row["nodes"])
            for v, key in (("compute", "compute"), ("comm", "collective"),
                           ("sequential", "sequential"), ("shaped", "shaped"), ("fused", "fused")):
                med = row[f"{v}_us"]
                meas = f"{med:.0f} [{row['min_us'][v]:.0f}, {row['max_us'][v]:.0f}]"
                print(f"| {op} | {row['shape']} | {row['nodes']} | {v} | {meas} | "
                      f"{pred[key]:.0f} | {pred[key] / med:.2f} |")
            # CPU per rank of the compute alone (fused_perf sums a node's ranks): what the model
            # predicts when other users' load stretches the wall times.
            cpu = row["compute_cpu_us"] / a.np  # every rank runs on this one host
            print(f"| {op} | {row['shape']} | {row['nodes']} | compute, CPU per rank | {cpu:.0f} | "
                  f"{pred['compute']:.0f} | {pred['compute'] / cpu:.2f} |")
            print(f"| {op} | {row['shape']} | {row['nodes']} | auto | — | {pred['auto']} | |",
                  flush=True)


if __name__ == "__main__":
    main()
