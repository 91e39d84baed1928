import re,sys
for line in open(sys.argv[1]):
    head, _, rest = line.partition(': ')
    f = re.findall(r'(\d+) \[(\d+),(\d+)\]', rest)
    if len(f) >= 5:
        print(f'{head:40s} seq {f[2][0]:>5} [{f[2][1]},{f[2][2]}] fused {f[4][0]:>5} [{f[4][1]},{f[4][2]}] ratio {int(f[4][0])/int(f[2][0]):.2f}')
    else: print(line.strip()[:100])
