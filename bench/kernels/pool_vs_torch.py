#!/usr/bin/python3
"""tilecomm's embedding pooling kernel against PyTorch's embedding_bag, interleaved in one process.

Each round calls tilecomm's kernel (through ctypes: build/bench/kernels/libtilecomm_pool_capi.so;
one or more variants: ISA path, prefetch distance, another build's library) and then
torch.nn.functional.embedding_bag (mode="sum", one thread) on the same tables, A B A B ..., and
records the CPU time of every call (time.process_time_ns: the machine is shared). Every call
takes the next of S index sets, S coprime to the number of timed sides and large enough that the
rows of the S sets together are over twice the 32 MiB L3 cache, so a set's rows were evicted
since its last use (the old benchmark reused one set: its rows came from the cache) and every
side sees every set. Reported per shape: per-call CPU time (median and [min, max]) and GB/s
(bytes of rows gathered, indices x dim x 4, per median second, 1e9 bytes) of each side, and the
median and [min, max] of the per-round ratio torch time / tilecomm time (> 1: tilecomm is
faster). One more side, "gather", is the roofline of the same call: one load per cache line of
every row gathered and the kernel's prefetch, nothing else (tilecomm_gather in pool_capi.cpp),
so no pooling kernel gathers faster from the same memory. Outputs are compared with PyTorch's
once per shape (bitwise or not, and the largest difference; --check fails unless bitwise). Run
with Debian's python3 (python3-torch) on one core:
    taskset -c 1 /usr/bin/python3 bench/kernels/pool_vs_torch.py \
        --lib build/bench/kernels/libtilecomm_pool_capi.so
"""
import argparse
import ctypes
import math
import statistics
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as e:  # not an error: nothing to compare against
    print(f"pool_vs_torch.py: skipped, cannot import torch/numpy ({e}); "
          "on Debian: apt-get install python3-torch")
    sys.exit(0)

BATCH = 4096
SMALL_ROWS, SMALL_TABLES = 100_000, 4
BIG_BYTES = 256 << 20
L3_BYTES = 32 << 20
ISAS = {"scalar": 0, "avx2": 1, "avx512": 2, "auto": -1}


def make_indices(rows, pool, zipf, rng):
    """BATCH * pool indices in [0, rows): uniform, or Zipf(1.05) ranks scattered by a hash (as
    kernel_perf and torch_kernels.py)."""
    n = BATCH * pool
    if not zipf:
        return rng.integers(0, rows, n, dtype=np.int64)
    cdf = np.cumsum(np.arange(1, rows + 1, dtype=np.float64) ** -1.05)
    ranks = np.searchsorted(cdf, rng.uniform(0, cdf[-1], n)).astype(np.uint64)
    return ((ranks * np.uint64(2654435761)) % np.uint64(rows)).astype(np.int64)


class Tilecomm:
    """tilecomm_pool() of pool_capi.cpp through ctypes."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.tilecomm_pool
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                      ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
        self.fn = f
        g = self.lib.tilecomm_gather
        g.restype = ctypes.c_uint32
        g.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_size_t]
        self.gather_fn = g

    def pool(self, table, indices, offsets, out, isa, prefetch):
        bf16 = 1 if table.dtype == torch.bfloat16 else 0
        rc = self.fn(table.data_ptr(), bf16, indices.data_ptr(), offsets.data_ptr(), None, BATCH,
                     table.shape[1], 0, isa, prefetch, out.data_ptr())
        if rc != 0:
            raise RuntimeError(f"tilecomm_pool: this CPU cannot run isa {isa}")


    def gather(self, table, indices, prefetch):
        self.gather_fn(table.data_ptr(), table.shape[1] * 4, indices.data_ptr(), indices.numel(),
                       prefetch)


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def run_shape(tc, variants, tables, dim, pool, zipf, args, seed, bf16_tables=None):
    """variants: (lib, isa, prefetch, bf16) per tilecomm side; a bf16 side pools bf16_tables
    (the same tables rounded to bfloat16) and is compared with torch's float32 call."""
    count, rows = len(tables), tables[0].shape[0]
    set_bytes = count * BATCH * pool * dim * 4
    # Calls take sets 0, 1, 2, ... in turn across the sides (the variants, gather, torch): with S
    # coprime to the number of sides, every side meets every set.
    sides = len(variants) + 2
    sets = max(3, -(-2 * L3_BYTES // set_bytes))
    while math.gcd(sets, sides) != 1:
        sets += 1
    rng = np.random.default_rng(seed)
    index_sets = [[torch.from_numpy(make_indices(rows, pool, zipf, rng)) for _ in tables]
                  for _ in range(sets)]
    csr = torch.arange(0, BATCH * pool + 1, pool, dtype=torch.int64)  # tilecomm: BATCH + 1
    offsets = csr[:-1].clone()  # torch: the bags' starts
    # One output for every table, as torch's: its result is freed after each call, and the
    # allocator hands the same block to the next call.
    out = torch.empty(BATCH, dim)
    fns = []
    for lib, isa, prefetch, bf16 in variants:
        def call(s, lib=lib, isa=isa, prefetch=prefetch, ts=bf16_tables if bf16 else tables):
            for t, i in zip(ts, index_sets[s]):
                lib.pool(t, i, csr, out, isa, prefetch)
        fns.append(call)

    def gather_call(s):
        for t, i in zip(tables, index_sets[s]):
            tc.gather(t, i, 16)
    fns.append(gather_call)

    def torch_call(s):
        for t, i in zip(tables, index_sets[s]):
            torch.nn.functional.embedding_bag(i, t, offsets, mode="sum")
    fns.append(torch_call)

    # Agreement with PyTorch on set 0, table by table (the first variant).
    bitwise, diff = True, 0.0
    lib0, isa0, prefetch0, _ = variants[0]
    for t, i in zip(tables, index_sets[0]):
        lib0.pool(t, i, csr, out, isa0, prefetch0)
        want = torch.nn.functional.embedding_bag(i, t, offsets, mode="sum")
        bitwise = bitwise and torch.equal(out, want)
        diff = max(diff, float((out - want).abs().max()))

    times = [[] for _ in fns]
    nxt = 0
    for _ in range(sets):  # warm-up: one call per set on each side
        for f in fns:
            f(nxt % sets)
            nxt += 1
    rounds, spent = 0, 0.0
    while rounds < args.min_rounds or spent < args.min_time:
        for k, f in enumerate(fns):
            t0 = time.process_time_ns()
            f(nxt % sets)
            t1 = time.process_time_ns()
            nxt += 1
            times[k].append((t1 - t0) * 1e-9)
        spent += times[-1][-1]
        rounds += 1
    elem = [2 if v[3] else 4 for v in variants] + [4, 4]
    res = {"sets": sets, "rounds": rounds, "bitwise": bitwise, "diff": diff, "sides": []}
    for k in range(len(fns)):
        gathered = count * BATCH * pool * dim * elem[k]
        med, lo, hi = summary(times[k])
        ratios = [b / a for a, b in zip(times[k], times[-1])]
        res["sides"].append({"ms": (med * 1e3, lo * 1e3, hi * 1e3), "gbs": gathered / med / 1e9,
                             "ratio": summary(ratios)})
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default="build/bench/kernels/libtilecomm_pool_capi.so")
    ap.add_argument("--isa", nargs="*", default=["auto"], choices=list(ISAS),
                    help="tilecomm paths to time (each a column)")
    ap.add_argument("--prefetch", type=int, nargs="*", default=[-1],
                    help="prefetch distances in rows (-1: the kernel's default; each a column)")
    ap.add_argument("--bf16", action="store_true",
                    help="one more column, 'bf16': the default path on bfloat16 copies of the "
                         "tables (GB/s of bf16 bytes), against torch on the float32 tables "
                         "(PyTorch 1.13's CPU embedding_bag takes no bfloat16)")
    ap.add_argument("--baseline-lib", metavar="SO",
                    help="another build's libtilecomm_pool_capi.so, timed as one more column "
                         "('baseline', its default path) in the same rounds")
    ap.add_argument("--dims", type=int, nargs="*", default=[64, 128])
    ap.add_argument("--pools", type=int, nargs="*", default=[1, 8, 32, 100])
    ap.add_argument("--dists", nargs="*", default=["uniform", "zipf"], choices=["uniform", "zipf"])
    ap.add_argument("--tables", choices=["small", "big", "both"], default="both",
                    help="4 x 100k rows, one 256 MiB table, or both")
    ap.add_argument("--small-rows", type=int, default=SMALL_ROWS,
                    help="rows of each of the 4 small tables")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless tilecomm's output equals PyTorch's bitwise in every shape "
                         "(the smoke test's use)")
    ap.add_argument("--min-rounds", type=int, default=15)
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="least CPU seconds of PyTorch calls per shape")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tc = Tilecomm(args.lib)
    variants = [(tc, ISAS[i], p, False) for i in args.isa for p in args.prefetch]
    names = [f"{i}/pf{p}" if p >= 0 else i for i in args.isa for p in args.prefetch]
    if args.bf16:
        variants.append((tc, -1, -1, True))
        names.append("bf16")
    if args.baseline_lib:
        variants.append((Tilecomm(args.baseline_lib), -1, -1, False))
        names.append("baseline")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}; columns: "
          f"{', '.join(names)}, gather (roofline), torch; "
          f"times: CPU ms per call, median [min, max]; "
          f"ratio: torch / tilecomm per round, median [min, max]", flush=True)
    bigs = {"small": (False,), "big": (True,), "both": (False, True)}[args.tables]
    seed, mismatches = 1, 0
    for big in bigs:
        for dim in args.dims:
            rows = BIG_BYTES // (dim * 4) if big else args.small_rows
            gen = torch.Generator().manual_seed(0)
            tables = [torch.rand(rows, dim, generator=gen) for _ in range(1 if big else 4)]
            halves = [t.to(torch.bfloat16) for t in tables] if args.bf16 else None
            shape = "1 x 256MiB" if big else f"4 x {args.small_rows // 1000}k"
            for dist in args.dists:
                for pool in args.pools:
                    seed += 1
                    r = run_shape(tc, variants, tables, dim, pool, dist == "zipf", args, seed,
                                  halves)
                    line = f"{shape:>10} {dist:>7} dim {dim:>3} pool {pool:>3}:"
                    for n, s in zip(names + ["gather", "torch"], r["sides"]):
                        ms, lo, hi = s["ms"]
                        line += f"  {n} {ms:7.3f} [{lo:.3f}, {hi:.3f}] {s['gbs']:5.2f} GB/s"
                        if n != "torch":
                            rm, rlo, rhi = s["ratio"]
                            line += f" x{rm:.2f} [{rlo:.2f}, {rhi:.2f}]"
                    line += (f"  (sets {r['sets']}, rounds {r['rounds']}, "
                             f"{'bitwise' if r['bitwise'] else 'max diff %.3g' % r['diff']})")
                    print(line, flush=True)
                    mismatches += 0 if r["bitwise"] else 1
            del tables, halves
    if args.check and mismatches:
        print(f"FAILED: {mismatches} shape(s) differ from PyTorch's embedding_bag")
        sys.exit(1)


if __name__ == "__main__":
    main()
