import json, glob, os, statistics as st
def pts(f):
    p = json.load(open(f))['compute']
    out = {}
    for k in ('gemv', 'gemv_warm', 'embedding', 'embedding_warm', 'gemm'):
        for x in p[k]['table']:
            out[(k, round(x[0]), round(x[1]))] = x[2]
    return out
for ps in (1, 3):
    runs = [pts(f) for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), f'p{ps}_*.json')))]
    keys = runs[0].keys()
    by_kind = {}
    for key in keys:
        v = [r[key] for r in runs]
        m = st.median(v)
        dev = max(abs(x / m - 1) for x in v)          # worst run's deviation from the median
        iqr = (st.quantiles(v, n=4)[2] - st.quantiles(v, n=4)[0]) / m
        by_kind.setdefault(key[0], []).append((dev, iqr))
    print(f'passes={ps}: {len(runs)} calibrations; per point: worst deviation from the median over runs, IQR/median (median over the sweep\'s points [max])')
    for k, l in by_kind.items():
        d = sorted(x[0] for x in l); q = sorted(x[1] for x in l)
        print(f'  {k:15s} worst dev median {st.median(d):.2f} [max {d[-1]:.2f}]   IQR {st.median(q):.3f} [max {q[-1]:.3f}]  ({len(l)} points)')
