"""torch.distributed collectives side by side in one mpirun job: gloo, the "tilecomm" backend (its
C++ process group, and its Python one), and MPI through mpi4py on the same tensors (their numpy
views), nccl-tests style.

    mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1 \
        env PYTHONPATH=<build>/python /usr/bin/python3 bench/peers/torch_collectives.py

Each call is timed alone: an MPI barrier, the call (blocking: async_op=False), the time; the time
of an iteration is the slowest rank's; the variants take turns, one call each per iteration. Prints per size the median and [min, max] over the
iterations in microseconds, and the ratios gloo / tilecomm and tilecomm / mpi4py. float32 data;
all_reduce sums size bytes per rank; all_to_all_single sends size bytes per rank in total.
--json PATH also writes the figures.

Columns: "tilecomm" is the default group (the C++ ProcessGroupTilecomm when it was built),
"tilecomm-py" a group of the Python implementation over the same ranks, "tilecomm numpy" tilecomm's
own call (tilecomm.allreduce / alltoall on the numpy views, no torch) on the default group's
communicator, and "self" the C++ group
of each rank alone (dist.new_group([rank])): torch.distributed's Python wrapper plus the group's
own cost with no communication, what any backend pays per call before it communicates; "mpi4py
self" is mpi4py's call on COMM_SELF, its equivalent.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import tilecomm.torch

SIZES = [8, 64, 512, 4096, 32768, 262144, 2 << 20, 16 << 20]


def timed(calls, iters, world):
    """{name: slowest-rank times in us} of each call, the calls interleaved: iteration i runs every
    call once (each after a barrier), so all see the same machine (on a loaded 2-core VM whether
    the two ranks share a core flips every few seconds and moves small-message times 10x)."""
    for _ in range(3):
        for fn in calls.values():
            fn()
    times = {name: np.empty(iters) for name in calls}
    for i in range(iters):
        for name, fn in calls.items():
            world.Barrier()
            t0 = time.perf_counter()
            fn()
            times[name][i] = time.perf_counter() - t0
    out = {}
    for name, t in times.items():
        slowest = np.empty_like(t)
        world.Allreduce(t, slowest, op=MPI.MAX)
        out[name] = slowest * 1e6
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=100, help="at most this many per point")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    dist.init_process_group("tilecomm", **tilecomm.torch.mpi_rendezvous())
    gloo = dist.new_group(backend="gloo")
    tc = dist.group.WORLD
    p = world.size
    previous = tilecomm.torch.set_implementation("python")
    tc_py = dist.new_group(backend="tilecomm")
    tilecomm.torch.set_implementation(previous)
    selves = [dist.new_group([r], backend="tilecomm") for r in range(p)]  # every rank makes each
    me = selves[world.rank]
    comm = tc.comm  # the default group's communicator, for tilecomm's own call on numpy arrays
    solo = MPI.COMM_SELF
    rows = []
    for op in ("all_reduce", "all_to_all_single"):
        for size in SIZES:
            n = max(size // 4, p) // p * p
            x = torch.ones(n)
            y = torch.empty(n)
            xa, ya = x.numpy(), y.numpy()
            iters = max(10, min(args.iters, int(4e8 / max(size, 1) / 100)))
            if op == "all_reduce":
                calls = {
                    "gloo": lambda: dist.all_reduce(x, group=gloo),
                    "tilecomm": lambda: dist.all_reduce(x, group=tc),
                    "tilecomm-py": lambda: dist.all_reduce(x, group=tc_py),
                    "tilecomm numpy": lambda: tilecomm.allreduce(comm, xa, xa),
                    "mpi4py": lambda: world.Allreduce(MPI.IN_PLACE, xa),
                    "self": lambda: dist.all_reduce(x, group=me),
                    "mpi4py self": lambda: solo.Allreduce(MPI.IN_PLACE, xa),
                }
            else:
                calls = {
                    "gloo": lambda: dist.all_to_all_single(y, x, group=gloo),
                    "tilecomm": lambda: dist.all_to_all_single(y, x, group=tc),
                    "tilecomm-py": lambda: dist.all_to_all_single(y, x, group=tc_py),
                    "tilecomm numpy": lambda: tilecomm.alltoall(comm, xa, ya),
                    "mpi4py": lambda: world.Alltoall(xa, ya),
                    "self": lambda: dist.all_to_all_single(y, x, group=me),
                    "mpi4py self": lambda: solo.Alltoall(xa, ya),
                }
            row = {"op": op, "bytes": n * 4, "iters": iters}
            for name, t in timed(calls, iters, world).items():
                row[name] = {"median": float(np.median(t)), "min": float(t.min()),
                             "max": float(t.max())}
            rows.append(row)
    if world.rank == 0:
        print(f"# torch.distributed, {p} ranks, float32, us per call: median [min, max] over "
              f"iterations (slowest rank); tilecomm = {type(tc).__module__}.{type(tc).__name__}")
        print("| op | bytes | gloo | tilecomm | tilecomm-py | tilecomm numpy | mpi4py | self "
              "| mpi4py self | gloo / tilecomm | tilecomm / mpi4py |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            cell = lambda d: f"{d['median']:.1f} [{d['min']:.1f}, {d['max']:.1f}]"  # noqa: E731
            print(f"| {r['op']} | {r['bytes']} | {cell(r['gloo'])} | {cell(r['tilecomm'])} | "
                  f"{cell(r['tilecomm-py'])} | {cell(r['tilecomm numpy'])} | {cell(r['mpi4py'])} | "
                  f"{r['self']['median']:.1f} | "
                  f"{r['mpi4py self']['median']:.1f} | "
                  f"{r['gloo']['median'] / r['tilecomm']['median']:.1f}x | "
                  f"{r['tilecomm']['median'] / r['mpi4py']['median']:.2f} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": p, "tilecomm": f"{type(tc).__module__}.{type(tc).__name__}",
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
