#!/usr/bin/python3
"""PyTorch's single-threaded embedding_bag on kernel_perf's BM_Pool shapes (bench/kernels/).

GB/s = bytes of rows gathered (indices x dim x element size) per second, 1e9 bytes, as in
kernel_perf. Each shape: every table's 4096 bags pooled (mode="sum"); median of `--reps` timed
runs of at least `--min-time` seconds each, in CPU time of the process (as kernel_perf: the
machine is shared; torch runs one thread). Run with Debian's python3 (python3-torch):
    taskset -c 1 /usr/bin/python3 bench/kernels/torch_kernels.py
"""
import argparse
import sys

from cpu_timing import time_call

try:
    import numpy as np
    import torch
except ImportError as e:  # not an error: the C++ side still runs
    print(f"torch_kernels.py: skipped, cannot import torch/numpy ({e}); "
          "on Debian: apt-get install python3-torch")
    sys.exit(0)

BATCH = 4096
SMALL_ROWS, SMALL_TABLES = 100_000, 4
BIG_BYTES = 256 << 20


def make_indices(rows, pool, zipf, seed):
    rng = np.random.default_rng(seed)
    n = BATCH * pool
    if not zipf:
        return rng.integers(0, rows, n, dtype=np.int64)
    cdf = np.cumsum(np.arange(1, rows + 1, dtype=np.float64) ** -1.05)
    ranks = np.searchsorted(cdf, rng.uniform(0, cdf[-1], n)).astype(np.uint64)
    return ((ranks * np.uint64(2654435761)) % np.uint64(rows)).astype(np.int64)


def time_shape(dim, pool, zipf, big, dtype, reps, min_time):
    count = 1 if big else SMALL_TABLES
    rows = BIG_BYTES // (dim * 4) if big else SMALL_ROWS
    gen = torch.Generator().manual_seed(0)
    tables = [torch.rand(rows, dim, generator=gen).to(dtype) for _ in range(count)]
    indices = [torch.from_numpy(make_indices(rows, pool, zipf, i + 1)) for i in range(count)]
    offsets = torch.arange(0, BATCH * pool, pool, dtype=torch.int64)

    def once():
        for t, i in zip(tables, indices):
            torch.nn.functional.embedding_bag(i, t, offsets, mode="sum")

    runs = [time_call(once, min_time) for _ in range(reps)]
    seconds = sorted(runs)[len(runs) // 2]
    size = 2 if dtype == torch.bfloat16 else 4
    return count * BATCH * pool * dim * size / seconds / 1e9, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--dims", type=int, nargs="*", default=[64, 128])
    ap.add_argument("--pools", type=int, nargs="*", default=[1, 8, 32, 100])
    ap.add_argument("--tables", choices=["small", "big", "both"], default="both",
                    help="4 x 100k rows, one 256 MiB table, or both")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'dim':>4} {'pool':>4} {'indices':>8} {'tables':>12} {'dtype':>5} {'ms':>8} {'GB/s':>6}")
    bigs = {"small": (0,), "big": (1,), "both": (0, 1)}[args.tables]
    for big in bigs:
        for dim in args.dims:
            for zipf in (0, 1):
                for pool in args.pools:
                    dtypes = [torch.float32] + ([torch.bfloat16] if not big and not zipf else [])
                    for dtype in dtypes:
                        try:
                            gbs, s = time_shape(dim, pool, zipf, big, dtype, args.reps,
                                                args.min_time)
                        except RuntimeError as e:  # e.g. no bf16 embedding_bag on this build
                            print(f"{dim:>4} {pool:>4} skipped {dtype}: {e}".splitlines()[0])
                            continue
                        shape = "1 x 256MiB" if big else "4 x 100k"
                        name = "bf16" if dtype == torch.bfloat16 else "f32"
                        print(f"{dim:>4} {pool:>4} {'zipf' if zipf else 'uniform':>8} "
                              f"{shape:>12} {name:>5} {s * 1e3:8.2f} {gbs:6.2f}", flush=True)


if __name__ == "__main__":
    main()
