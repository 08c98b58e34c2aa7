#!/usr/bin/python3
"""Inputs and NumPy peers for bench/compare-defaults: whole processes, as a user runs them.

Usage:
  defaults_peers.py write DIR SEED   writes the inputs (see below) into DIR
  defaults_peers.py run CASE DIR     one NumPy process for CASE (what the benchmark times)

Inputs, from numpy.random.default_rng(SEED):
  A128.npy, A512.npy   positive targets softmax(G) with G standard normal (n x n)
  S2048.npy            a score-like matrix: Q K^T / 8 with Q, K of width 64, plus 1e-3 noise
  R1024.txt, R1024.npy uniform [-1, 1] entries, 1024 x 1024 (the text with 17 significant digits)
Each NumPy process does what the attnrank command answers, uncertified: the rank of the
centred log of the target (reach, width), the full singular values (svd), loadtxt or load
and matrix_rank (rank).
Needs Debian's python3-numpy; run with /usr/bin/python3.
"""
import sys

import numpy as np


def softmax(g):
    e = np.exp(g - g.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def write(d, seed):
    rng = np.random.default_rng(seed)
    for n in (128, 512):
        np.save(f'{d}/A{n}.npy', softmax(rng.standard_normal((n, n))))
    q, k = rng.standard_normal((2048, 64)), rng.standard_normal((2048, 64))
    np.save(f'{d}/S2048.npy', q @ k.T / 8 + 1e-3 * rng.standard_normal((2048, 2048)))
    r = rng.uniform(-1, 1, (1024, 1024))
    np.save(f'{d}/R1024.npy', r)
    np.savetxt(f'{d}/R1024.txt', r, fmt='%.17g', delimiter=',')


def centred_log_rank(a):
    log = np.log(a)
    return np.linalg.matrix_rank(log - log.mean(axis=1, keepdims=True))


def run(case, d):
    if case == 'reach-diag':
        n, p = 300, 0.5
        a = np.full((n, n), (1 - p) / (n - 1))
        np.fill_diagonal(a, p)
        print(centred_log_rank(a))
    elif case in ('reach-512', 'width-128'):
        print(centred_log_rank(np.load(f"{d}/A{case.split('-')[1]}.npy")))
    elif case == 'svd-2048':
        print(np.linalg.svd(np.load(f'{d}/S2048.npy'), compute_uv=False)[:65].sum())
    elif case == 'rank-text':
        print(np.linalg.matrix_rank(np.loadtxt(f'{d}/R1024.txt', delimiter=',')))
    elif case == 'rank-npy':
        print(np.linalg.matrix_rank(np.load(f'{d}/R1024.npy')))
    else:
        raise SystemExit(f'unknown case {case}')


if __name__ == '__main__':
    if sys.argv[1] == 'write':
        write(sys.argv[2], int(sys.argv[3]))
    else:
        run(sys.argv[2], sys.argv[3])
