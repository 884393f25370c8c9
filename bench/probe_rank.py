#!/usr/bin/env python3
"""bench/probe_rank.py PROBES TRUTH: Spearman's rank correlation with the
truth (TRUTH: "tensor kld" lines, llama.cpp's single-tensor KLD) of the
unscaled loss and of memwall's probe KLD (PROBES: "tensor probe_kld loss"
lines), and the ratio of the probe KLD to the truth (median, range).
Standard library only."""
import sys
P = {l.split()[0]: (float(l.split()[1]), float(l.split()[2])) for l in open(sys.argv[1])}
T = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[2])}
names = sorted(n for n in P if n in T)
def ranks(v):
    o = sorted(range(len(v)), key=lambda i: v[i]); r = [0.0] * len(v)
    i = 0
    while i < len(o):
        j = i
        while j + 1 < len(o) and v[o[j + 1]] == v[o[i]]: j += 1
        for k in range(i, j + 1): r[o[k]] = (i + j) / 2
        i = j + 1
    return r
def spearman(a, b):
    ra, rb = ranks(a), ranks(b); n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    saa = sum((x - ma) ** 2 for x in ra); sbb = sum((y - mb) ** 2 for y in rb)
    return sab / (saa * sbb) ** 0.5
t = [T[n] for n in names]
print(f"tensors: {len(names)}")
print(f"rank correlation with llama.cpp's single-tensor KLD (eval.txt, held out):")
print(f"  before (loss alone, L(Q3_K)):        {spearman([P[n][1] for n in names], t):.3f}")
print(f"  after  (memwall's probe KLD, calib): {spearman([P[n][0] for n in names], t):.3f}")
r = sorted(P[n][0] / T[n] for n in names if T[n] > 0)
print(f"memwall probe KLD / llama.cpp KLD: median {r[len(r)//2]:.3f}, range {r[0]:.3f} .. {r[-1]:.3f}")
