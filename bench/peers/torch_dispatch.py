"""What one torch.distributed call costs before any communication: 8-byte all_reduce on groups of
one rank (nothing to exchange), against the same call without torch.

    mpirun -np 1 --bind-to none env PYTHONPATH=<build>/python taskset -c 1 \
        /usr/bin/python3 bench/peers/torch_dispatch.py

Rows: mpi4py's Allreduce on COMM_SELF; tilecomm.allreduce on a communicator of one rank (numpy);
torch.distributed's own Python checks in all_reduce (_check_single_tensor, _rank_not_in_group,
AllreduceOptions: a lower bound of its wrapper); dist.all_reduce on the "tilecomm" group in C++
(ProcessGroupTilecomm: torch's wrapper, pybind11, torch's c10d dispatcher op, the group, the Work
and its wait, tilecomm's call), on the Python group (PyProcessGroupTilecomm), and on gloo. Per
row: the median [min, max] over 7 batches of N calls of the mean process CPU time per call in
microseconds (time.process_time: every thread of the process, so gloo's worker threads count; not
the time the process waits for a core on a shared machine).
--json PATH also writes the figures.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import tilecomm.torch


def per_call(fn, n, batches=7):
    for _ in range(n // 10):
        fn()
    means = []
    for _ in range(batches):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        means.append((time.process_time() - t0) / n * 1e6)
    return {"median": float(np.median(means)), "min": min(means), "max": max(means)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000, help="calls per batch")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 1:
        raise SystemExit("torch_dispatch.py runs on one rank (mpirun -np 1)")
    dist.init_process_group("tilecomm", **tilecomm.torch.mpi_rendezvous())
    cpp = dist.group.WORLD
    previous = tilecomm.torch.set_implementation("python")
    py = dist.new_group(backend="tilecomm")
    tilecomm.torch.set_implementation(previous)
    gloo = dist.new_group(backend="gloo")
    comm = cpp.comm
    x = torch.ones(2)
    a = x.numpy()
    c10d = dist.distributed_c10d
    rows = {
        "mpi4py Allreduce (COMM_SELF)": lambda: MPI.COMM_SELF.Allreduce(MPI.IN_PLACE, a),
        "tilecomm.allreduce (numpy, 1 rank)": lambda: tilecomm.allreduce(comm, a, a),
        "torch's own checks in all_reduce": lambda: (
            c10d._check_single_tensor(x, "tensor"), c10d._rank_not_in_group(cpp),
            dist.AllreduceOptions()),
        f"dist.all_reduce, {type(cpp).__name__} ({type(cpp).__module__})":
            lambda: dist.all_reduce(x, group=cpp),
        "dist.all_reduce, PyProcessGroupTilecomm": lambda: dist.all_reduce(x, group=py),
        "dist.all_reduce, gloo": lambda: dist.all_reduce(x, group=gloo),
    }
    out = {name: per_call(fn, args.calls if "gloo" not in name else args.calls // 10)
           for name, fn in rows.items()}
    print("# 8-byte all_reduce on one rank, CPU us per call: median [min, max] of 7 batch means")
    print("| call | CPU us per call |")
    print("|---|---:|")
    for name, d in out.items():
        print(f"| {name} | {d['median']:.2f} [{d['min']:.2f}, {d['max']:.2f}] |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
