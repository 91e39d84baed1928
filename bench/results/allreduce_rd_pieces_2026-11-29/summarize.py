#!/usr/bin/python3
"""sweep.sh's output: per rate and size, each algorithm's median time per run, and rd / ring."""
import collections
import statistics
import sys

t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 9 or f[6] not in ("ring", "recursive_doubling"):
        continue
    t[(f[0], int(f[2]), f[6])].append(float(f[7]))
keys = sorted({k[:2] for k in t}, key=lambda k: (int(k[0][:-4]), k[1]))
print(f"{'link':7} {'bytes':>8}  ring (us, per run)       recursive doubling (us)   rd/ring")
for k in keys:
    ring, rd = t[k + ("ring",)], t[k + ("recursive_doubling",)]
    print(f"{k[0]:7} {k[1]:>8}  {' '.join(f'{x:7.1f}' for x in ring):24} "
          f"{' '.join(f'{x:7.1f}' for x in rd):24} {statistics.median(rd) / statistics.median(ring):.2f}")
