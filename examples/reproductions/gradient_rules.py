#!/usr/bin/python3
"""Gradient tolerances adjudicated with true errors (docs/reproductions.md, section 4).

FlashAttention's tests accept a kernel's gradients when, for X in {Q, K, V},

    max |dX - dX_ref| <= 2 max |dX_pt - dX_ref|

(dX_ref from the float32-upcast reference, dX_pt from PyTorch's attention in the low
precision), and PyTorch's test_transformers.py accepts a fused kernel's gradient within
``fudge x max |dX_lp - dX_true|`` of the float64 one, with fudge factors of 160-180 for dQ,
16-25 for dK and 4-8 for dV. Both stand for a claim about true errors: the kernel's error is
at most c times the low-precision reference's. This script measures, per case of a
FlashAttention-style grid and per gradient, the certified true errors of the kernel's, of
dX_pt's and of dX_ref's gradient against the exact gradient of the exact attention of the
same inputs (contracted with the same dout), the certified ratio the rules mean to bound,
dX_ref's share of the yardstick, and the factor a rule of PyTorch's form needed.

usage:
  gradient_rules.py [--grid quick|full] [--dtypes float32,bfloat16] [--json FILE]
  gradient_rules.py --saved DIR [--json FILE]
    DIR holds one folder per case with q, k, v, dout and the gradients dq, dk, dv (the kernel's),
    dq_pt, dk_pt, dv_pt and dq_ref, dk_ref, dv_ref, in FlashAttention's (B, S, H, d) layout, as
    NAME.npy or NAME.pt (torch.save), and an optional case.json {"causal": true}: tensors
    saved from a GPU run of the tests.
Prints the seed and Markdown tables; --json writes every number. float16 is not in the
generated grid: PyTorch 1.13 has no float16 matmul (nor its backward) on a CPU.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnrank  # noqa: E402
from common import attention_ref, blocked_attention, load, max_diff, saved_case_folders, torch_attention  # noqa: E402

GRIDS = {
    "full": dict(seqlens=[97, 128, 200, 384, 512], dims=[32, 64, 128], heads=2),
    "quick": dict(seqlens=[97, 200], dims=[16, 59], heads=2),
}
# PyTorch's test_transformers.py fudge factors (the largest of its CPU/CUDA values, ROCm aside).
PYTORCH_FUDGE = {"dq": 180, "dk": 25, "dv": 8}
GRADS = ("dq", "dk", "dv")


def gradients(forward, q, k, v, dout):
    """dq, dk, dv of ``forward`` by autograd, in the inputs' dtype (the leaves')."""
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
    out = forward(*leaves)
    out.backward(dout)
    return {name: x.grad for name, x in zip(GRADS, leaves)}


def bhsd(x):
    return x.transpose(1, 2)


def case_rows(name, dtype, causal, q, k, v, dout, kernel, pt, ref, kernel_name):
    """One row per gradient: certified errors of the kernel's, pt's and ref's, and the rules."""
    mask = "causal" if causal else None
    args = [bhsd(x) for x in (q, k, v)]
    pair = attnrank.check_kernel(*args, dout=bhsd(dout), mask=mask, **{g: bhsd(kernel[g]) for g in GRADS},
                                 **{"reference_" + g: bhsd(pt[g]) for g in GRADS})
    own = attnrank.check_kernel(*args, dout=bhsd(dout), mask=mask, **{g: bhsd(ref[g]) for g in GRADS})
    rows = []
    for g in GRADS:
        e_k, e_pt, e_ref = pair[g]["candidate"], pair[g]["reference"], own[g]["candidate"]
        band = lambda e: [float(e["max_abs_error_lower"]), float(e["max_abs_error_upper"])]  # noqa: E731
        d_k, d_pt = max_diff(kernel[g], ref[g]), max_diff(pt[g], ref[g])
        ratio = [float(pair[g]["ratio_lower"]), float(pair[g]["ratio_upper"])]
        rows.append({
            "case": name, "dtype": dtype, "causal": causal, "kernel": kernel_name, "gradient": g,
            "err_kernel": band(e_k), "err_pt": band(e_pt), "err_ref": band(e_ref),
            "diff_kernel_ref": d_k, "diff_pt_ref": d_pt,
            "measured_ratio": d_k / d_pt if d_pt > 0 else None,
            "true_ratio": ratio,
            "rule": "passes" if d_k <= 2 * d_pt else "fails",
            "true_rule": "passes" if ratio[1] <= 2 else "fails" if ratio[0] > 2 else "undecided",
            # How much of FlashAttention's yardstick max |dX_pt - dX_ref| is dX_ref's own error.
            "ref_share": band(e_ref)[1] / band(e_pt)[0] if band(e_pt)[0] > 0 else None,
            # The factor c a rule of PyTorch's form (kernel error <= c x the low-precision
            # reference's error) needed here: the certified upper bound of err(kernel) / err(pt).
            "factor_needed": ratio[1],
            "method": pair["backward"]["method"],
        })
    return rows


def generated_cases(grid, dtypes, seed):
    g = torch.Generator().manual_seed(seed)
    spec = GRIDS[grid]
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for n in spec["seqlens"]:
            for d in spec["dims"]:
                for causal in (False, True):
                    q, k, v, dout = (torch.randn(1, n, spec["heads"], d, generator=g).to(dtype) for _ in range(4))
                    pt = gradients(lambda q, k, v: attention_ref(q, k, v, causal, upcast=False, reorder_ops=True),
                                   q, k, v, dout)
                    ref = gradients(lambda q, k, v: attention_ref(q, k, v, causal, upcast=True), q, k, v, dout)
                    kernels = {"blocked online softmax": lambda q, k, v: blocked_attention(q, k, v, causal)}
                    if torch_attention(q, k, v, causal) is not None:
                        kernels["torch SDPA"] = lambda q, k, v: torch_attention(q, k, v, causal)
                    for kernel_name, forward in kernels.items():
                        yield (f"S={n} d={d}", dtype_name, causal, q, k, v, dout,
                               gradients(forward, q, k, v, dout), pt, ref, kernel_name)


def saved_cases(root):
    for case, folder, meta in saved_case_folders(root):
        t = {name: load(folder, name) for name in ("q", "k", "v", "dout")}
        grads = {suffix: {g: load(folder, g + suffix) for g in GRADS} for suffix in ("", "_pt", "_ref")}
        yield (case, str(t["q"].dtype).removeprefix("torch."), bool(meta.get("causal", False)), t["q"], t["k"],
               t["v"], t["dout"], grads[""], grads["_pt"], grads["_ref"], meta.get("kernel", "saved"))


def band_text(b):
    return f"[{b[0]:.3g}, {b[1]:.3g}]"


def span(values):
    values = [x for x in values if x is not None]
    return f"{min(values):.3g} .. {max(values):.3g}" if values else "-"


def summary(rows):
    lines = ["| dtype | kernel | gradient | cases | rule passes | true rule passes | measured ratio | true ratio | "
             "err(dX_ref) / err(dX_pt) | factor needed (max) | PyTorch's fudge |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["dtype"], r["kernel"], r["gradient"]) for r in rows}, key=lambda t: (t[0], t[1], GRADS.index(t[2])))
    for dtype, kernel, g in keys:
        rs = [r for r in rows if (r["dtype"], r["kernel"], r["gradient"]) == (dtype, kernel, g)]
        lines.append(f"| {dtype} | {kernel} | {g} | {len(rs)} | {sum(r['rule'] == 'passes' for r in rs)} | "
                     f"{sum(r['true_rule'] == 'passes' for r in rs)} | {span(r['measured_ratio'] for r in rs)} | "
                     f"{span(r['true_ratio'][0] for r in rs).split(' .. ')[0]} .. "
                     f"{span(r['true_ratio'][1] for r in rs).split(' .. ')[-1]} | {span(r['ref_share'] for r in rs)} | "
                     f"{max(r['factor_needed'] for r in rs):.3g} | {PYTORCH_FUDGE[g]} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", choices=sorted(GRIDS), default="quick")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--saved")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    a = parser.parse_args()
    print(f"seed {a.seed}")
    torch.manual_seed(a.seed)
    start = time.time()
    cases = saved_cases(a.saved) if a.saved else generated_cases(a.grid, a.dtypes.split(","), a.seed)
    rows = []
    for case in cases:
        rows += case_rows(*case)
    print(summary(rows))
    print(f"\n{len(rows)} rows in {time.time() - start:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seed": a.seed, "grid": None if a.saved else a.grid, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
