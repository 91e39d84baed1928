#!/usr/bin/python3
"""ab.sh's output: per layout, rate and size, each build's median time per run, and new / old."""
import collections
import statistics
import sys

t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 10 or f[8] != "hierarchical":
        continue
    t[(f[0], f[1], int(f[4]), f[3])].append(float(f[9]))
keys = sorted({k[:3] for k in t}, key=lambda k: (k[0], int(k[1][:-4]), k[2]))
print(f"{'layout':6} {'link':7} {'bytes':>8}  old (us, per run)      new (us, per run)      new/old")
for k in keys:
    o, n = t[k + ("old",)], t[k + ("new",)]
    print(f"{k[0]:6} {k[1]:7} {k[2]:>8}  {' '.join(f'{x:7.1f}' for x in o):22} "
          f"{' '.join(f'{x:7.1f}' for x in n):22} {statistics.median(n) / statistics.median(o):.2f}")
