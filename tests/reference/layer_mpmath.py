#!/usr/bin/python3
"""Independent reference for the multi-head attention layer, in mpmath.

Usage: layer_mpmath.py DIGITS HEADS X.csv WQ.csv WK.csv WV.csv WO.csv [MASK.csv]
Prints the output matrix, one row per line, entries separated by spaces, each
with DIGITS significant digits. With MASK.csv (n x n of 0s and 1s, one mask for
every head) a query attends only where the mask is 1: the other scores are -inf. Written from the paper's formulas, sharing no
code with attnrank; inputs are CSV rows of integers, decimals or p/q.
Needs Debian's python3-mpmath (run with /usr/bin/python3).
"""
import sys
from fractions import Fraction

import mpmath
from mpmath import mp


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.split('#')[0].strip()
            if line:
                rows.append([Fraction(cell.strip()) for cell in line.split(',')])
    return [[mp.mpf(q.numerator) / q.denominator for q in row] for row in rows]


def matmul(a, b):
    return [[mp.fsum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def main():
    digits, heads = int(sys.argv[1]), int(sys.argv[2])
    mp.dps = digits + 20
    x, wq, wk, wv, wo = (read(p) for p in sys.argv[3:8])
    mask = read(sys.argv[8]) if len(sys.argv) > 8 else None
    q, k, v = matmul(x, wq), matmul(x, wk), matmul(x, wv)
    dk, dv = len(wq[0]) // heads, len(wv[0]) // heads
    n = len(x)
    concat = [[] for _ in range(n)]
    for h in range(heads):
        qi = [row[h * dk:(h + 1) * dk] for row in q]
        ki = [row[h * dk:(h + 1) * dk] for row in k]
        vi = [row[h * dv:(h + 1) * dv] for row in v]
        scores = [[mp.fsum(qi[r][c] * ki[s][c] for c in range(dk)) / mp.sqrt(dk) for s in range(n)] for r in range(n)]
        weights = []
        for r, row in enumerate(scores):
            allowed = [mask is None or mask[r][s] == 1 for s in range(n)]
            top = max(s for s, a in zip(row, allowed) if a)
            e = [mp.exp(s - top) if a else mp.mpf(0) for s, a in zip(row, allowed)]
            total = mp.fsum(e)
            weights.append([x / total for x in e])
        z = matmul(weights, vi)
        for r in range(n):
            concat[r].extend(z[r])
    out = matmul(concat, wo)
    for row in out:
        print(' '.join(mpmath.nstr(val, digits, strip_zeros=False) for val in row))


if __name__ == '__main__':
    main()
