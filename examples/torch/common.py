"""Harness shared by the end-to-end PyTorch examples (llama_decode.py, dlrm.py); not tilecomm API.

One mpirun job runs every variant of a model side by side:
  gloo      plain PyTorch, torch.distributed collectives on a gloo group
  tilecomm  the same plain-PyTorch code, collectives on the "tilecomm" backend's group
  fused     tilecomm.torch's fused modules (RowParallelLinear / ShardedEmbeddingBags), the
            remaining collectives on the "tilecomm" group
The world group is the "tilecomm" backend; the gloo group is dist.new_group(backend="gloo") over
the same ranks. Timing: every repeat runs each variant once (the order rotates from repeat to
repeat so no variant always runs first, after the host work of another), each run preceded by an
MPI barrier; a run's time is the slowest rank's.
"""
import time

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import tilecomm.torch

VARIANTS = ("gloo", "tilecomm", "fused")


def add_run_options(ap, module, perturb_help):
    """The options every example takes: --repeats, --mode of its fused `module`, --seed, --perturb."""
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per variant")
    ap.add_argument("--mode", default="fused", choices=["auto", "sequential", "shaped", "fused"],
                    help=f"mode of the fused variant's {module}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--perturb", action="store_true", help=perturb_help)
    ap.add_argument("--pg", default="default", choices=["default", "cpp", "python", "both"],
                    help="the \"tilecomm\" process group's implementation (tilecomm.torch."
                         "set_implementation; default: the C++ one when it was built); both: "
                         "the default one, plus a variant tilecomm-py on a Python group")


def setup(pg="default"):
    """One thread per rank for torch (one core per rank on the device model), the process groups
    (`pg`: the "tilecomm" group's implementation, "default", "cpp" or "python"; "both" adds a
    Python group as "tilecomm-py"). Returns (MPI world, {"gloo": group, "tilecomm": group, ...})."""
    torch.set_num_threads(1)
    world = MPI.COMM_WORLD
    if pg in ("cpp", "python"):
        tilecomm.torch.set_implementation(pg)
    dist.init_process_group("tilecomm", **tilecomm.torch.mpi_rendezvous())
    groups = {"gloo": dist.new_group(backend="gloo"), "tilecomm": dist.group.WORLD}
    if pg == "both":
        previous = tilecomm.torch.set_implementation("python")
        groups["tilecomm-py"] = dist.new_group(backend="tilecomm")
        tilecomm.torch.set_implementation(previous)
    return world, groups


def max_rel_error(ref, got):
    """max |got - ref| / max(max |ref|, 1e-30): the error relative to the reference's scale."""
    ref, got = ref.double(), got.double()
    scale = max(float(ref.abs().max()) if ref.numel() else 0.0, 1e-30)
    return float((got - ref).abs().max()) / scale if ref.numel() else 0.0


def time_runs(runs, repeats, world):
    """runs: {variant: fn()}; every fn is run `repeats` times, interleaved. Returns {variant:
    numpy array of the slowest rank's seconds per run}."""
    names = list(runs)
    times = {n: np.empty(repeats) for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            world.Barrier()
            t0 = time.perf_counter()
            runs[n]()
            times[n][r] = time.perf_counter() - t0
    for n in names:
        slowest = np.empty_like(times[n])
        world.Allreduce(times[n], slowest, op=MPI.MAX)
        times[n] = slowest
    return times


def report(title, unit, work_per_run, times, world):
    """Prints (rank 0) per variant: unit/s as median [min, max] over the runs and the speed-up of
    the medians vs gloo. Returns {variant: (median, min, max)}."""
    rates = {n: work_per_run / t for n, t in times.items()}
    out = {n: (float(np.median(r)), float(r.min()), float(r.max())) for n, r in rates.items()}
    if world.rank == 0:
        print(title)
        base = out["gloo"][0]
        for n, (med, lo, hi) in out.items():
            print(f"  {n:<11} {med:10.1f} {unit}/s  [{lo:.1f}, {hi:.1f}]  "
                  f"x{med / base:.2f} vs gloo  ({len(rates[n])} runs)")
    return out


def agree(errors, tol, world):
    """errors: {check name: this rank's error (a max relative error, or a fraction of mismatches)}. Every rank learns the worst error of
    each check; rank 0 prints them. Returns True when all are <= tol on every rank."""
    names = sorted(errors)
    mine = np.array([errors[n] for n in names], dtype=np.float64)
    mine[np.isnan(mine)] = np.inf  # a NaN anywhere is a failure (MPI's MAX may drop NaNs)
    worst = np.empty_like(mine)
    world.Allreduce(mine, worst, op=MPI.MAX)
    ok = bool((worst <= tol).all())
    if world.rank == 0:
        for n, e in zip(names, worst):
            print(f"  check {n}: {e:.2e} (tolerance {tol:.0e}) "
                  f"{'ok' if e <= tol else 'FAILED'}")
    return ok
