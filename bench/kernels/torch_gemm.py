#!/usr/bin/python3
"""torch.mm on one thread at gemm_perf's shapes, for the side-by-side table in docs/kernels.md.

Shapes are M x N x K: C[M x N] = A[M x K] B[K x N], float32. Prints, per shape, the median and
[min, max] of `--reps` runs (each the mean over enough calls to last `--min-time` CPU seconds,
after a warm-up call) and GFLOP/s = 2 M N K per CPU second (1e9; CPU time, like gemm_perf: the
machine is shared). Exits 0 with a message when torch does not import (Debian: python3-torch).
    taskset -c 1 /usr/bin/python3 bench/kernels/torch_gemm.py
"""
import argparse
import statistics
import sys

from cpu_timing import time_call

SHAPES = [(1024, 1024, 1024), (2048, 4096, 1024), (2048, 336, 256)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_gemm.py: torch does not import ({e}); skipped")
        return 0
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'M x N x K':>16} {'ms':>9} {'[min, max]':>18} {'GFLOPs':>7}")
    for m, n, k in SHAPES:
        gen = torch.Generator().manual_seed(42)
        a = torch.rand(m, k, generator=gen) * 2 - 1
        b = torch.rand(k, n, generator=gen) * 2 - 1
        c = torch.empty(m, n)
        runs = [time_call(lambda: torch.mm(a, b, out=c), args.min_time) for _ in range(args.reps)]
        sec = statistics.median(runs)
        print(f"{m:>5}x{n:>5}x{k:>4} {sec * 1e3:9.2f} [{min(runs) * 1e3:7.2f}, "
              f"{max(runs) * 1e3:7.2f}] {2 * m * n * k / sec / 1e9:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
