#!/usr/bin/python3
"""Numeric deviation vs sequence length, in the manner of "Is Flash Attention Stable?"
(Golden et al., 2024), with true errors (docs/reproductions.md).

Golden et al. measure how far a low-precision attention drifts from a baseline as the
sequence grows, each number a difference between two implementations. Here every point
is the certified max |O - exact| of one implementation against the exact attention of
its own (low-precision) inputs, for N = 128 .. 8192: bfloat16 and float16 computed op by
op in the dtype (out_pt in FlashAttention's tests), and the float32 computation rounded
to the dtype (what a fused kernel with float32 accumulation returns at best: out_ref).

usage: error_vs_length.py [--max-n 8192] [--d 64] [--heads 1] [--svg FILE] [--json FILE]
Prints the seed and a Markdown table; --svg draws the figure.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnrank  # noqa: E402
from common import attention_ref, certified, doublings, low_precision_ops, svg_plot  # noqa: E402

SERIES = [("bfloat16", False, "bfloat16 ops", "#d62728"), ("float16", False, "float16 ops", "#1f77b4"),
          ("bfloat16", True, "float32, rounded to bfloat16", "#ff9896"),
          ("float16", True, "float32, rounded to float16", "#aec7e8"),
          ("float32", True, "float32 throughout", "#2ca02c")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-n", type=int, default=128)
    parser.add_argument("--max-n", type=int, default=8192)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--svg")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"seed {args.seed}; PyTorch {torch.__version__}; d = {args.d}, heads = {args.heads}, "
          f"causal = {args.causal}")
    for dtype in ("bfloat16", "float16"):
        print(f"{dtype} ops: {low_precision_ops(getattr(torch, dtype))[2]}")
    lengths = doublings(args.min_n, args.max_n)
    rows = []
    start = time.perf_counter()
    for n in lengths:
        g = torch.Generator().manual_seed(args.seed + n)
        base = [torch.randn(1, n, args.heads, args.d, generator=g) for _ in range(3)]
        row = {"n": n}
        for dtype, upcast, label, _ in SERIES:
            q, k, v = (x.to(getattr(torch, dtype)) for x in base)
            out = attention_ref(q, k, v, args.causal, upcast=upcast)
            c = certified(attnrank, q, k, v, out, args.causal)["candidate"]
            row[label] = [float(c["max_abs_error_lower"]), float(c["max_abs_error_upper"])]
            row[label + " (relative)"] = [float(c["max_rel_error_lower"]), float(c["max_rel_error_upper"])]
        rows.append(row)
        print(f"  N = {n}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    labels = [s[2] for s in SERIES]
    print("Certified max |O - exact| / max |exact| (upper bounds):\n")
    print("| N | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for r in rows:
        print(f"| {r['n']} | " + " | ".join(f"{r[s + ' (relative)'][1]:.3g}" for s in labels) + " |")
    print("\nCertified max |O - exact| (upper bounds):\n")
    print("| N | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for r in rows:
        print(f"| {r['n']} | " + " | ".join(f"{r[s][1]:.3g}" for s in labels) + " |")
    pinned = all(r[k][0] >= 0.99 * r[k][1] for r in rows for s in labels for k in (s, s + " (relative)"))
    print(f"\n(every lower bound is within 1% of its upper one: {pinned})")
    if args.svg:
        svg_plot(args.svg, [(label, lengths, [tuple(r[label + " (relative)"]) for r in rows], colour)
                            for _, _, label, colour in SERIES],
                 xlabel="sequence length N", ylabel="certified max |O - exact| / max |exact|",
                 title=f"True error of attention vs sequence length (d = {args.d})", xticks=lengths)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "d": args.d, "heads": args.heads, "causal": args.causal, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
