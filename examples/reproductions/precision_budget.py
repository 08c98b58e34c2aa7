"""Kernel tests without a tolerance (docs/reproductions.md, section 6): the certified error
budget of a precision profile (attnrank.check_kernel(..., profile=...)) against FlashAttention's
2x rule, on correct kernels of the profile and on planted bugs.

For each case (profile, N, d, causal, input kind) it runs correct kernels emulated with the
profile's rounding (emulated_kernels.py: blocks of 16, 64 and 256 keys, blocks in reverse, the
two-pass softmax, split-KV in 3 and 7 partitions) and each planted bug, and records
  * for the correct kernels: the budget's verdict (never exceeded, or the budget is wrong),
    max_ij |err_ij| / B_ij, and the largest budget over the largest true error;
  * for each bug: whether the budget proves it exceeded, whether FlashAttention's float rule
    max |out - out_ref| <= 2 max |out_pt - out_ref| fails, and whether the certified rule
    err(out) <= 2 err(out_pt) is proven broken (out_pt: PyTorch's low-precision math path,
    emulated; out_ref: the same attention in float32).

    PYTHONPATH=build/python /usr/bin/python3 examples/reproductions/precision_budget.py --grid full
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_kernels as ek  # noqa: E402

import attnrank  # noqa: E402

FORMATS = {"fa2-bf16": ("bfloat16", "bfloat16", ek.to_bf16), "fa2-fp16": ("float16", "float16", ek.to_fp16),
           "fa3-fp8": ("float8_e4m3fn", "bfloat16", ek.to_bf16), "fp32": ("float32", "float32", ek.keep)}
VARIANTS = [dict(block=16), dict(block=64), dict(block=256), dict(block=32, reverse=True), dict(two_pass=True),
            dict(block=64, splits=3), dict(block=16, splits=7)]
KINDS = ["normal", "large logits", "near ties", "outlier channels", "one dominant key"]


def inputs(rng, kind, n, d, round_input):
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    if kind == "large logits":
        q, k = q * 4, k * 4
    elif kind == "near ties":
        q = q * 1e-3
    elif kind == "outlier channels":
        q[:, :2] *= 50
        k[:, :2] *= 50
        v[:, 0] *= 30
    elif kind == "one dominant key":
        k[3] = q.mean(axis=0) * 40
    return tuple(round_input(x.astype(np.float32)) for x in (q, k, v))


def torch_math_reference(q, k, v, causal, round_to):
    """PyTorch's math path in the low precision: (q scale) k^T, softmax (in float32 inside),
    times v, each result rounded to the dtype."""
    scale = np.float32(1 / np.sqrt(q.shape[1]))
    s = round_to(round_to(q * scale) @ k.T)
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, np.float32(-np.inf))
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p = round_to(p / p.sum(axis=1, keepdims=True))
    return round_to(p @ v)


def check(q, k, v, out, lse, profile, causal, reference=None):
    kw = dict(reference=reference[None], max_ratio=2) if reference is not None else {}
    return attnrank.check_kernel(q[None], k[None], v[None], out[None], lse=lse[None], profile=profile,
                                 causal=causal, **kw)


def run_case(rng, profile, kind, n, d, causal, bugs):
    p_format, out_format, round_input = FORMATS[profile]
    q, k, v = inputs(rng, kind, n, d, round_input)
    row = dict(profile=profile, kind=kind, n=n, d=d, causal=causal, correct=[], bugs={})
    errors, budgets = [], []
    for variant in VARIANTS:
        out, lse = ek.attention(q, k, v, causal=causal, p_format=p_format, out_format=out_format, **variant)
        c = check(q, k, v, out, lse, profile, causal)
        b = c["budget"]["out"]
        row["correct"].append(dict(variant=variant, verdict=b["verdict"], lse_verdict=c["budget"]["lse"]["verdict"],
                                   usage=float(b["usage_upper"]), error=float(c["candidate"]["max_abs_error_upper"])))
        errors.append(float(c["candidate"]["max_abs_error_lower"]))
        budgets.append(float(b["max_budget"]))
    row["budget_over_error"] = max(budgets) / max(errors) if max(errors) > 0 else float("inf")
    if bugs and profile in ("fa2-bf16", "fa2-fp16"):
        round_to = FORMATS[profile][2]
        out_pt = torch_math_reference(q, k, v, causal, round_to)
        out_ref, _ = ek.attention(q, k, v, causal=causal, p_format="float32", out_format="float32", two_pass=True)
        for bug in [None] + ek.BUGS:
            out, lse = ek.attention(q, k, v, causal=causal, p_format=p_format, out_format=out_format, block=32, bug=bug)
            c = check(q, k, v, out, lse, profile, causal, reference=out_pt)
            float_rule_fails = bool(np.abs(out - out_ref).max() > 2 * np.abs(out_pt - out_ref).max())
            row["bugs"][bug or "none (correct)"] = dict(budget=c["budget"]["out"]["verdict"],
                                                        float_rule_fails=float_rule_fails,
                                                        certified_rule=c["max_ratio_verdict"])
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", choices=["quick", "full"], default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    a = parser.parse_args()
    print(f"seed {a.seed}")
    rng = np.random.default_rng(a.seed)
    if a.grid == "quick":
        profiles, sizes, dims, kinds = ["fa2-bf16", "fa2-fp16"], [64, 128], [64], KINDS[:2]
    else:  # every kind at every size, the kinds taking turns over (d, causal)
        profiles, sizes, dims, kinds = list(FORMATS), [113, 256, 512, 1024], [64, 128], KINDS
    rows, start = [], time.time()
    for profile in profiles:
        turn = 0
        for n in sizes:
            for d in dims:
                for causal in (False, True):
                    for kind in (kinds if a.grid == "quick" else [kinds[turn % len(kinds)]]):
                        rows.append(run_case(rng, profile, kind, n, d, causal, bugs=True))
                        print(f"  {profile} n={n} d={d} causal={causal} {kind}: budget / error "
                              f"{rows[-1]['budget_over_error']:.3g}", flush=True)
                    turn += 1
    print(f"{len(rows)} cases, {time.time() - start:.0f} s")
    print("\nCorrect kernels (7 variants per case): the budget's verdicts and how close they come")
    print("| profile | cases | kernels | within | exceeded | undecided | max usage | budget / true error: median | p90 | max |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for profile in profiles:
        rs = [r for r in rows if r["profile"] == profile]
        kernels = [c for r in rs for c in r["correct"]]
        ratios = sorted(r["budget_over_error"] for r in rs)
        counts = {v: sum(c["verdict"] == v for c in kernels) for v in ("within", "exceeded", "undecided")}
        p90 = ratios[min(len(ratios) - 1, int(0.9 * len(ratios)))]
        summary[profile] = dict(cases=len(rs), kernels=len(kernels), **counts,
                                max_usage=max(c["usage"] for c in kernels), ratio_median=statistics.median(ratios),
                                ratio_p90=p90, ratio_max=ratios[-1])
        s = summary[profile]
        print(f"| {profile} | {len(rs)} | {len(kernels)} | {counts['within']} | {counts['exceeded']} | "
              f"{counts['undecided']} | {s['max_usage']:.3g} | {s['ratio_median']:.3g} | {p90:.3g} | {ratios[-1]:.3g} |")
    print("\nPlanted bugs (blocks of 32 keys): the share of cases each test catches")
    print("| bug | cases | budget: proven exceeded | FlashAttention's float rule fails | certified 2x rule proven broken |")
    print("|---|---|---|---|---|")
    catch = {}
    for bug in ["none (correct)"] + ek.BUGS:
        rs = [r["bugs"][bug] for r in rows if bug in r["bugs"]]
        if not rs:
            continue
        catch[bug] = dict(cases=len(rs), budget=sum(r["budget"] == "exceeded" for r in rs),
                          float_rule=sum(r["float_rule_fails"] for r in rs),
                          certified_rule=sum(r["certified_rule"] == "exceeded" for r in rs))
        c = catch[bug]
        print(f"| {bug} | {c['cases']} | {c['budget']} | {c['float_rule']} | {c['certified_rule']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(seed=a.seed, grid=a.grid, rows=rows, summary=summary, catch=catch), f)


if __name__ == "__main__":
    main()
