#!/usr/bin/python3
"""The low-rank bottleneck (Bhojanapalli et al., 2020) and d = O(log n) for sparse patterns
(Likhosherstov et al., 2023), with certified numbers (docs/reproductions.md).

Exactly, a head of width d_k < rank produces no pattern whose centred log has that rank:
the diagonal target diag:n:0.5 (0.5 on the diagonal, the rest spread evenly) needs
d_k = n - 1, and `reach` proves it at every d_k (the bottleneck). Approximately, within
epsilon entry by entry, sparse patterns need only O(log n): for random targets with mass
1/s on s random keys per row (zeros elsewhere), this script builds the heads of the
random-embedding argument (K = R, Q = alpha M R with R a random +-1/sqrt(d) matrix and M
the pattern's support), certifies each one's error with attnrank (check_kernel with
V = I encloses max |softmax(Q K^T) - A|), and reports the smallest width whose head is
certified within epsilon: a proven upper bound on the minimal width w*. `width` gives
the proven lower bound and its own upper bound (the log-domain starts, and the optimiser
on a budget with --refine).

usage: widths_vs_log_n.py [--max-n 512] [--epsilon 0.1] [--svg FILE] [--json FILE]
Prints the seed and Markdown tables; --svg draws width against log n.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnrank  # noqa: E402
from common import doublings, svg_plot  # noqa: E402


def sparse_target(n, s, rng):
    """A row-stochastic n x n target with 1/s on s random keys of each row, 0 elsewhere."""
    A = np.zeros((n, n))
    for i in range(n):
        A[i, rng.choice(n, s, replace=False)] = 1.0 / s
    return A


def diagonal_target(n, p=0.5):
    A = np.full((n, n), (1 - p) / (n - 1))
    np.fill_diagonal(A, p)
    return A


def float_error(A, Q, K):
    """max |softmax(Q K^T) - A| in floats: only to choose alpha (the certified one decides)."""
    S = Q @ K.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return np.abs(P / P.sum(axis=1, keepdims=True) - A).max()


def embedding_head(A, d, rng, tries):
    """The random-embedding head of width d for A's support (the entries at least half their
    row's largest), alpha chosen in floats."""
    n = A.shape[0]
    support = (A >= A.max(axis=1, keepdims=True) / 2).astype(float)
    best = (math.inf, None, None)
    for _ in range(tries):
        R = rng.choice([-1.0, 1.0], size=(n, d)) / math.sqrt(d)
        MR = support @ R
        for alpha in np.geomspace(1, 400, 48):
            e = float_error(A, alpha * MR, R)
            if e < best[0]:
                best = (e, alpha * MR, R)
    return best[1], best[2]


def certified_head_error(A, Q, K):
    """Proven [lower, upper] on max |softmax(Q K^T) - A|: the kernel check of the output
    softmax(1 * Q K^T) I, with A as the kernel's output."""
    n = A.shape[0]
    r = attnrank.check_kernel(Q, K, np.eye(n), A, scale=1.0)["candidate"]
    return float(r["max_abs_error_lower"]), float(r["max_abs_error_upper"])


def smallest_certified_width(A, epsilon, rng, tries, d_max):
    """The smallest d whose embedding head is certified within epsilon (bisection over d,
    then a step down while it holds), with that head's certified error."""
    cache = {}

    def ok(d):
        if d not in cache:
            Q, K = embedding_head(A, d, rng, tries)
            cache[d] = certified_head_error(A, Q, K)
        return cache[d][1] <= epsilon
    lo, hi = 1, d_max
    if not ok(hi):
        return None, None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi, cache[hi]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-n", type=int, default=16)
    parser.add_argument("--max-n", type=int, default=512)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--keys", type=int, default=2, help="nonzero keys per row of the sparse targets")
    parser.add_argument("--tries", type=int, default=3, help="random embeddings tried per width")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--svg")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(f"seed {args.seed}; epsilon {args.epsilon}; {args.keys} keys per row")
    rng = np.random.default_rng(args.seed)
    sizes = doublings(args.min_n, args.max_n)
    rows = []
    start = time.perf_counter()
    for n in sizes:
        A = sparse_target(n, args.keys, rng)
        w = attnrank.width(A, args.epsilon, max_dk=min(n, 16))
        d, err = smallest_certified_width(A, args.epsilon, rng, args.tries, d_max=16 * max(4, int(math.log2(n))))
        D = diagonal_target(n)
        floor = attnrank.reach(D, 1, full_floor=True)  # the floor rank(log(A) C) itself, not just enough of it
        verdicts = {dk: attnrank.reach(D, dk)["verdict"] for dk in sorted({1, int(math.log2(n)), n - 2, n - 1})}
        wd = attnrank.width(D, args.epsilon, max_dk=min(n, 16))
        rows.append({"n": n, "log2_n": math.log2(n),
                     "sparse_width_lower": w["width_lower"], "sparse_width_upper": w["width_upper"],
                     "embedding_width": d, "embedding_error": err,
                     "diag_floor": [floor["floor_lower"], floor["floor_upper"]], "diag_verdicts": verdicts,
                     "diag_width_lower": wd["width_lower"], "diag_width_upper": wd["width_upper"]})
        print(f"  n = {n}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(f"\nRandom sparse targets ({args.keys} keys per row), epsilon = {args.epsilon}:\n")
    print("| n | log2 n | `width` band | embedding head: width | its certified error | width / log2 n |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        up = r["sparse_width_upper"] if r["sparse_width_upper"] is not None else f"> {min(r['n'], 16)}"
        e = r["embedding_error"]
        print(f"| {r['n']} | {r['log2_n']:g} | [{r['sparse_width_lower']}, {up}] | {r['embedding_width']} | "
              f"[{e[0]:.3g}, {e[1]:.3g}] | {r['embedding_width'] / r['log2_n']:.2f} |")
    print(f"\nThe diagonal target diag:n:0.5, exactly and within epsilon = {args.epsilon}:\n")
    print("| n | floor (exact width) | verdicts | `width` band |")
    print("|---|---|---|---|")
    for r in rows:
        v = ", ".join(f"d_k = {dk}: {x}" for dk, x in r["diag_verdicts"].items())
        up = r["diag_width_upper"] if r["diag_width_upper"] is not None else f"> {min(r['n'], 16)}"
        print(f"| {r['n']} | {r['diag_floor'][0]} | {v} | [{r['diag_width_lower']}, {up}] |")
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.svg:
        with_head = [r for r in rows if r["embedding_width"] is not None]
        svg_plot(args.svg, [
            ("exact: diag floor n - 1", sizes, [r["diag_floor"][0] for r in rows], "#d62728"),
            ("within eps: sparse, certified head", [r["n"] for r in with_head],
             [r["embedding_width"] for r in with_head], "#1f77b4")],
            xlabel="n (log scale)", ylabel="head width d_k", logy=False, xticks=sizes,
            title=f"Exact bottleneck vs approximate width (epsilon = {args.epsilon})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "epsilon": args.epsilon, "keys": args.keys, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
