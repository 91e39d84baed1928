#!/usr/bin/env python3
"""tilecomm's collectives against MPI at its best (issue 13 §2), side by side in one script.

Three launches per collective, np 2 on one node, their order rotated run by run (--runs each):
  1. tilecomm `auto` and the in-process `mpi` row: the harness (<coll>_perf) as the README runs
     it -- one tilecomm process, MPI_THREAD_MULTIPLE, launched with mpi_yield_when_idle;
  2. MPI at its best: bench/collectives/mpi_best (plain MPI_Init = MPI_THREAD_SINGLE, no tilecomm),
     ranks pinned to cores (--bind-to core), no yield;
  3. tilecomm at its best: the harness launched like (2), pinned, no yield.
Prints per size the medians over runs of each run's median [min, max over runs], and
  speedup vs in-process mpi = mpi(1) / auto(1), vs best MPI = mpi_best(2) / auto(1),
  and pinned vs pinned = mpi_best(2) / auto(3).

    bench/collectives/vs_best_mpi.py --build build [--coll allreduce alltoall] [--runs 3]
        [-b 8] [-e 16M] [-f 8] [-n 50] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

MPIRUN = ["mpirun", "-np", "2", "--oversubscribe"]
VARIANTS = ("tilecomm auto", "mpi in tilecomm process", "mpi best", "tilecomm auto pinned")


def run(cmd, env):
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--coll", nargs="+", default=["allreduce", "alltoall"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="16M")
    ap.add_argument("-f", default="8")
    ap.add_argument("-n", default="50")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OPENBLAS_NUM_THREADS="1")
    sweep = ["-b", args.b, "-e", args.e, "-f", args.f, "-n", args.n]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for coll in args.coll:
            per = {}  # (bytes, variant) -> [run medians]
            for r in range(args.runs):
                h, b, hp = (os.path.join(tmp, f) for f in ("h.json", "b.json", "hp.json"))
                tc = [f"{args.build}/bench/collectives/{coll}_perf", "--algo", "auto", "-c", "0",
                      "-w", "10"] + sweep
                harness = MPIRUN + ["--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"] + tc \
                    + ["--json", h]
                pinned = MPIRUN + ["--bind-to", "core"] + tc + ["--json", hp]
                best = MPIRUN + ["--bind-to", "core", f"{args.build}/bench/collectives/mpi_best",
                                 "--coll", coll, "-w", "10", "--json", b] + sweep
                cmds = [harness, best, pinned]
                for cmd in cmds[r % 3:] + cmds[:r % 3]:
                    run(cmd, env)
                for row in json.load(open(h)):
                    variant = "tilecomm auto" if row["algo"] == "auto" else "mpi in tilecomm process"
                    per.setdefault((row["bytes"], variant), []).append(row["time_us"])
                for row in json.load(open(hp)):
                    if row["algo"] == "auto":
                        per.setdefault((row["bytes"], "tilecomm auto pinned"), []).append(
                            row["time_us"])
                for row in json.load(open(b)):
                    per.setdefault((row["bytes"], "mpi best"), []).append(row["time_us"])
            sizes = sorted({k[0] for k in per})
            print(f"\n{coll}, np 2, float32: median over {args.runs} runs of each run's median (us) "
                  "[min, max over runs]")
            print(f"{'size':>10} | {'tilecomm auto':>22} | {'mpi in tilecomm proc':>22} | "
                  f"{'mpi best':>22} | {'tilecomm auto pinned':>22} | vs in-proc | vs best | "
                  "pinned vs best")
            for s in sizes:
                cell, med = {}, {}
                for v in VARIANTS:
                    t = per.get((s, v), [])
                    med[v] = statistics.median(t) if t else float("nan")
                    cell[v] = f"{med[v]:9.2f} [{min(t):.2f}, {max(t):.2f}]" if t else "n/a"
                a, ap_ = med["tilecomm auto"], med["tilecomm auto pinned"]
                print(f"{s:>10} | {cell['tilecomm auto']:>22} | {cell['mpi in tilecomm process']:>22}"
                      f" | {cell['mpi best']:>22} | {cell['tilecomm auto pinned']:>22} |"
                      f" {med['mpi in tilecomm process'] / a:9.2f}x | {med['mpi best'] / a:6.2f}x |"
                      f" {med['mpi best'] / ap_:13.2f}x")
                rows.append({"coll": coll, "bytes": s, **{k: per.get((s, k), []) for k in VARIANTS}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
