#!/usr/bin/python3
"""Peer for bench/reach_bench: NumPy's uncertified numerical rank of the centered
log matrix log(A) C of the targets written by `reach_bench --write-inputs DIR`.

Usage: reach_peers.py DIR      prints JSON {"numpy_<n>_ms": ..., "numpy_<n>_rank": ..., "svd_<n>_ms": ...}
Timed: np.log, centering and np.linalg.matrix_rank, best of 5 (and the full SVD,
best of 3), OpenBLAS on all cores. The causal peer ("causal_<n>_ms", once: it
takes seconds): the ranks of the same blocks attnrank certifies for the lower
triangle of the target, rows k.. by columns ..k and rows k+1.. by columns ..k,
each centered, by np.linalg.matrix_rank; "causal_<n>_floor" the staircase
formula's sum from those ranks.
Needs Debian's python3-numpy; run with /usr/bin/python3.
"""
import json
import sys
import time

import numpy as np


def floor(a):
    lg = np.log(a)
    lc = lg - lg.mean(axis=1, keepdims=True)
    return int(np.linalg.matrix_rank(lc))


out = {}
for n in (128, 512, 1024):
    a = np.fromfile(f'{sys.argv[1]}/target_{n}.f64', dtype='<f8').reshape(n, n)
    best = float('inf')
    for _ in range(5):
        t = time.perf_counter()
        r = floor(a)
        best = min(best, (time.perf_counter() - t) * 1000)
    out[f'numpy_{n}_ms'] = best
    out[f'numpy_{n}_rank'] = r
    # The full SVD of log(A) C, the peer of `width`: every singular value at once.
    best = float('inf')
    for _ in range(3):
        t = time.perf_counter()
        lg = np.log(a)
        np.linalg.svd(lg - lg.mean(axis=1, keepdims=True), compute_uv=False)
        best = min(best, (time.perf_counter() - t) * 1000)
    out[f'svd_{n}_ms'] = best

def causal_floor(a):
    n = a.shape[0]
    lg = np.log(a)  # only the lower triangle is read
    total = 0
    for k in range(1, n + 1):
        for first, sign in ((k - 1, 1), (k, -1)):
            if sign < 0 and k == n:
                continue
            block = lg[first:, :k]
            if block.shape[0] == 0 or k < 2:
                continue
            block = block - block.mean(axis=1, keepdims=True)
            total += sign * int(np.linalg.matrix_rank(block))
    return total


for n in (512, 1024):
    a = np.fromfile(f'{sys.argv[1]}/target_{n}.f64', dtype='<f8').reshape(n, n)
    t = time.perf_counter()
    out[f'causal_{n}_floor'] = causal_floor(a)
    out[f'causal_{n}_ms'] = (time.perf_counter() - t) * 1000
print(json.dumps(out))
