#!/usr/bin/python3
"""Peers for bench/layer_bench: the same forward pass in NumPy float64 and in
mpmath at 50 digits, on the CSV inputs written by `layer_bench --write-inputs`.

Usage: layer_peers.py DIR HEADS [--mpmath-repeats R]   (R = 0 skips mpmath)
Prints JSON: {"numpy_ms": best of 5 loop means, "mpmath_ms": best of R single runs, "blas": ...}.
Peers run at their best as a user would: NumPy on OpenBLAS (libopenblas0-pthread),
mpmath on the gmpy2 backend (python3-gmpy2), mpmath's own matrix product.
Needs Debian's python3-numpy, python3-mpmath, python3-gmpy2; run with /usr/bin/python3.
"""
import json
import sys
import time
from fractions import Fraction

import mpmath
import numpy as np
from mpmath import mp


def read(path):
    with open(path) as f:
        return [[Fraction(c) for c in line.strip().split(',')] for line in f if line.strip()]


def numpy_forward(x, wq, wk, wv, wo, heads):
    q, k, v = x @ wq, x @ wk, x @ wv
    dk, dv = wq.shape[1] // heads, wv.shape[1] // heads
    zs = []
    for h in range(heads):
        s = q[:, h * dk:(h + 1) * dk] @ k[:, h * dk:(h + 1) * dk].T / np.sqrt(dk)
        s = s - s.max(axis=1, keepdims=True)
        e = np.exp(s)
        a = e / e.sum(axis=1, keepdims=True)
        zs.append(a @ v[:, h * dv:(h + 1) * dv])
    return np.concatenate(zs, axis=1) @ wo


def mpmath_forward(x, wq, wk, wv, wo, heads):
    q, k, v = x * wq, x * wk, x * wv
    n = x.rows
    dk, dv = wq.cols // heads, wv.cols // heads
    root = mp.sqrt(dk)
    concat = mp.matrix(n, heads * dv)
    for h in range(heads):
        qi = q[:, h * dk:(h + 1) * dk]
        ki = k[:, h * dk:(h + 1) * dk]
        vi = v[:, h * dv:(h + 1) * dv]
        s = qi * ki.T
        a = mp.matrix(n, n)
        for r in range(n):
            row = [s[r, c] / root for c in range(n)]
            top = max(row)
            e = [mp.exp(val - top) for val in row]
            total = mp.fsum(e)
            for c in range(n):
                a[r, c] = e[c] / total
        z = a * vi
        for r in range(n):
            for c in range(dv):
                concat[r, h * dv + c] = z[r, c]
    return concat * wo


def loop_means_ms(fn, repetitions, min_seconds):
    """The mean time of fn in each of `repetitions` loops of at least min_seconds (ms),
    as Google Benchmark's --benchmark_repetitions times attnrank."""
    means = []
    for _ in range(repetitions):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        means.append(elapsed / calls * 1e3)
    return means


def best_mean_ms(fn, repetitions=5, min_seconds=0.2):
    """Best of `repetitions` loop means: the statistic compare-layer takes from Google
    Benchmark for attnrank's double tier (the smallest per-repetition mean)."""
    return min(loop_means_ms(fn, repetitions, min_seconds))


def best_ms(fn, repeats):
    best = float('inf')
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main():
    d, heads = sys.argv[1], int(sys.argv[2])
    mp_repeats = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == '--mpmath-repeats' else 3
    names = ['x', 'wq', 'wk', 'wv', 'wo']
    exact = [read(f'{d}/{n}.csv') for n in names]
    arrays = [np.array([[float(c) for c in row] for row in m]) for m in exact]
    np_ms = best_mean_ms(lambda: numpy_forward(*arrays, heads))
    mp.dps = 50
    mats = [mp.matrix([[mp.mpf(c.numerator) / c.denominator for c in row] for row in m]) for m in exact]
    mp_ms = best_ms(lambda: mpmath_forward(*mats, heads), mp_repeats) if mp_repeats > 0 else None
    try:
        from threadpoolctl import threadpool_info
        blas = [i.get('internal_api', '') + ':' + i.get('threading_layer', '') for i in threadpool_info()]
    except ImportError:
        blas = [str(np.show_config.__module__)]
    print(json.dumps({'numpy_ms': np_ms, 'mpmath_ms': mp_ms, 'mpmath_backend': mpmath.libmp.BACKEND,
                      'numpy': np.__version__, 'blas': blas}))


if __name__ == '__main__':
    main()
