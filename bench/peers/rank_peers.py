#!/usr/bin/python3
"""Peers for bench/rank_bench: NumPy's (uncertified) matrix_rank and full SVD on
the matrices written by `rank_bench --write-inputs DIR`.

Usage: rank_peers.py DIR
Prints JSON: {"matrix_rank_512_ms": ..., "matrix_rank_1024_ms": ..., "svd_2048_lowrank_ms": ..., ...}
NumPy runs as a user would run it: OpenBLAS (libopenblas0-pthread) on all cores.
Needs Debian's python3-numpy; run with /usr/bin/python3.
"""
import json
import sys
import time

import numpy as np


def load(path, n):
    return np.fromfile(path, dtype='<f8').reshape(n, n)


def best_ms(f, repeats):
    best = float('inf')
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        best = min(best, (time.perf_counter() - t) * 1000)
    return best


def main():
    d = sys.argv[1]
    out = {}
    for n in (512, 1024):
        a = load(f'{d}/certified_{n}.f64', n)
        out[f'matrix_rank_{n}_rank'] = int(np.linalg.matrix_rank(a))
        out[f'matrix_rank_{n}_ms'] = best_ms(lambda: np.linalg.matrix_rank(a), 5)
    for kind in ('lowrank', 'dense'):
        a = load(f'{d}/svd_2048_{kind}.f64', 2048)
        out[f'svd_2048_{kind}_ms'] = best_ms(lambda: np.linalg.svd(a, compute_uv=False), 2)
    try:
        from threadpoolctl import threadpool_info
        out['blas'] = ', '.join(f"{i['internal_api']} {i.get('version')} threads={i['num_threads']}" for i in threadpool_info())
    except ImportError:
        out['blas'] = 'unknown'
    print(json.dumps(out))


main()
