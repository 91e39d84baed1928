#!/usr/bin/python3
"""Fused / sequential per run of ab.sh's output files: python3 summarize.py FILE..."""
import collections
import re
import sys

rows = collections.defaultdict(list)
for path in sys.argv[1:]:
    for line in open(path):
        m = re.match(r'(\S+) M=(\d+)(?: K=(\d+))? round=(\d+) (\w+) \| (.*)', line)
        if not m:
            continue
        f = [int(x[0]) for x in re.findall(r'(\d+) \[(\d+),(\d+)\]', m.group(6))]
        comp, comm, seq, shaped, fused = f[:5]
        rows[(m.group(1), int(m.group(2)), int(m.group(3) or 16), m.group(5))].append((seq, fused))
for k in sorted(rows, key=lambda k: (int(k[0][:-4]), k[1], k[2], k[3])):
    print(f"{k[0]:7} M={k[1]:<8} K={k[2]:<4} {k[3]:9}",
          "  ".join(f"seq {s} fused {f} ({f / s:.2f})" for s, f in rows[k]))
