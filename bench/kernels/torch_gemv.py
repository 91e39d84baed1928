#!/usr/bin/python3
"""torch.mv on one thread at gemv_perf's shapes, for the side-by-side table in docs/kernels.md.

Prints, per shape, the median of 3 runs (each the mean over enough calls to last ~0.3 s) and the
GB/s of W streamed, for float32 and (where torch supports it) bfloat16 W. Exits 0 with a message
when torch does not import (Debian: apt-get install python3-torch).
    /usr/bin/python3 bench/kernels/torch_gemv.py
"""
import statistics
import sys

from cpu_timing import time_call

SHAPES = [(4096, 4096), (8192, 2048), (262144, 76), (1024, 1024)]


def main():
    try:
        import torch
    except ImportError as e:
        print(f"torch_gemv.py: torch does not import ({e}); skipped")
        return 0
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'shape':>12} {'dtype':>9} {'ms':>9} {'GBps':>7}")
    for m, k in SHAPES:
        w = torch.rand(m, k, dtype=torch.float32) * 2 - 1
        x = torch.rand(k, dtype=torch.float32) * 2 - 1
        for dtype in (torch.float32, torch.bfloat16):
            wd, xd = w.to(dtype), x.to(dtype)
            try:
                torch.mv(wd, xd)
            except RuntimeError as e:
                print(f"{m}x{k:>5} {str(dtype)[6:]:>9} unsupported: {e}")
                continue
            runs = [time_call(lambda: torch.mv(wd, xd)) for _ in range(3)]
            sec = statistics.median(runs)
            gbps = m * k * wd.element_size() / sec / 1e9
            print(f"{m:>6}x{k:<5} {str(dtype)[6:]:>9} {sec * 1e3:9.3f} {gbps:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
