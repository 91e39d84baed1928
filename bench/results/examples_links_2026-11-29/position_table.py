# Per position in the step (1st = right after the gate, 2nd = after the other mode's calls):
# medians over steps of the alltoallv (max over ranks), the run's start (max over ranks) and the layer.
import statistics as st, sys
d = sys.argv[1]
rows = {}
for r in range(4):
    for l in open(f'{d}/steps_{r}.txt'):
        x = l.split()
        rows.setdefault((x[0], int(x[1]), x[2]), {})[r] = [float(v) for v in x[3:]]
print('| routing | mode | position | steps | dispatch alltoallv ms (slowest rank) | run starts ms (last rank) | layer ms |')
print('|---|---|---|---|---|---|---|')
for k in ('1', '2'):
    steps = sorted(set(s for (kk, s, m) in rows if kk == k and s > 0))
    for m, name in (('0', 'sequential'), ('2', 'fused')):
        for pos in (1, 2):
            # in_turn(): even steps run sequential first, odd steps fused first
            sel = [s for s in steps if ((s % 2 == 0) == (m == '0')) == (pos == 1)]
            v = [rows[(k, s, m)] for s in sel]
            print(f'| top-{k} | {name} | {pos} | {len(v)} | {st.median(max(x[r][0] for r in x) for x in v):.2f} | '
                  f'{st.median(max(x[r][1] for r in x) for x in v):.2f} | {st.median(x[0][2] for x in v):.2f} |')
