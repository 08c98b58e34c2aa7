#!/usr/bin/python3
"""FlashAttention's 2x rule, adjudicated with true errors (docs/reproductions.md).

FlashAttention's tests accept a kernel's output ``out`` when

    max |out - out_ref| <= 2 max |out_pt - out_ref|

where out_ref is the reference computed in float32 from the low-precision inputs and
rounded back to their dtype, and out_pt the same attention computed by PyTorch in the low
precision. Both sides are differences between approximations. This script measures, for
each case of a FlashAttention-style grid, the certified true errors of ``out`` (PyTorch's
CPU attention in the dtype), of out_pt and of out_ref against the exact attention of the
same inputs, the certified ratio err(out) / err(out_pt) that the rule means to bound, and
the share of the rule's right-hand side that is out_ref's own error.

usage:
  flash_attention_rule.py [--grid quick|full] [--dtypes float32,bfloat16,float16] [--json FILE]
  flash_attention_rule.py --saved DIR [--json FILE]
    DIR holds one folder per case with q, k, v, out, out_pt, out_ref (FlashAttention's
    (B, S, H, d) layout) as NAME.npy or NAME.pt (torch.save; bfloat16 kept exactly) and an
    optional case.json {"causal": true}: tensors saved from a GPU run of the tests.
Prints the seed and a Markdown table; --json writes every number.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnrank  # noqa: E402
from common import attention_ref, certified, load, low_precision_ops, max_diff, saved_case_folders, torch_attention  # noqa: E402

GRIDS = {
    # FlashAttention's test_flash_attn_qkvpacked grid (seqlen 97..2048), head dims 16..128.
    "full": dict(seqlens=[97, 128, 200, 384, 768, 1024, 1025, 2048], dims=[16, 32, 59, 64, 111, 128],
                 heads=2),
    "quick": dict(seqlens=[97, 200], dims=[16, 59], heads=2),
}


def case_row(name, dtype, causal, q, k, v, out, out_pt, out_ref, what_ran):
    """Certified errors of the three outputs and what the rule concludes, for one case."""
    pair = certified(attnrank, q, k, v, out, causal, reference=out_pt)  # out and out_pt, their ratio
    ref = certified(attnrank, q, k, v, out_ref, causal)                # out_ref
    e_out, e_pt, e_ref = pair["candidate"], pair["reference"], ref["candidate"]
    d_out, d_pt = max_diff(out, out_ref), max_diff(out_pt, out_ref)
    rule_passes = d_out <= 2 * d_pt
    true_ratio = (float(pair["ratio_lower"]), float(pair["ratio_upper"]))
    true_rule = ("passes" if true_ratio[1] <= 2 else "fails" if true_ratio[0] > 2 else "undecided")
    return {
        "case": name, "dtype": dtype, "causal": causal, "shape": list(q.shape), "kernel": what_ran,
        "err_out": [float(e_out["max_abs_error_lower"]), float(e_out["max_abs_error_upper"])],
        "err_pt": [float(e_pt["max_abs_error_lower"]), float(e_pt["max_abs_error_upper"])],
        "err_ref": [float(e_ref["max_abs_error_lower"]), float(e_ref["max_abs_error_upper"])],
        "diff_out_ref": d_out, "diff_pt_ref": d_pt,
        # None when out_pt equals out_ref (the float32 case: one computation, two names).
        "measured_ratio": d_out / d_pt if d_pt > 0 else None,
        "true_ratio": list(true_ratio),
        "rule": "passes" if rule_passes else "fails", "true_rule": true_rule,
        # out_ref's own error against out_pt's: how far the rule's yardstick max |out_pt - out_ref|
        # can be from the error it stands for (it lies within err(out_pt) +- err(out_ref)).
        "ref_share": float(e_ref["max_abs_error_upper"]) / float(e_pt["max_abs_error_lower"]),
        # The largest true ratio err(kernel) / err(out_pt) the rule can accept with this out_pt and
        # out_ref: a kernel passes when max |out - out_ref| <= 2 d_pt, which a kernel whose error is
        # up to 2 d_pt + err(out_ref) can meet (its error may point away from out_ref's).
        "rule_admits": (2 * d_pt + float(e_ref["max_abs_error_upper"])) / float(e_pt["max_abs_error_lower"]),
        "method": pair["method"],
    }


def generated_cases(grid, dtypes, seed):
    g = torch.Generator().manual_seed(seed)
    spec = GRIDS[grid]
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for n in spec["seqlens"]:
            for d in spec["dims"]:
                for causal in (False, True):
                    # FlashAttention draws randn in the dtype: the inputs are low-precision numbers.
                    q, k, v = (torch.randn(1, n, spec["heads"], d, generator=g).to(dtype) for _ in range(3))
                    out = torch_attention(q, k, v, causal)
                    kernel = "torch SDPA"
                    if out is None:  # no CPU kernel in this dtype: the op-by-op computation in it
                        out = attention_ref(q, k, v, causal, upcast=False)
                        emulated = low_precision_ops(dtype)[2] != "native"
                        kernel = f"ops in {dtype_name}" + (" (each a float32 op, rounded)" if emulated else "")
                    out_pt = attention_ref(q, k, v, causal, upcast=False, reorder_ops=True)
                    out_ref = attention_ref(q, k, v, causal, upcast=True)
                    yield (f"S={n} d={d}", dtype_name, causal, q, k, v, out, out_pt, out_ref, kernel)


def saved_cases(root):
    for case, folder, meta in saved_case_folders(root):
        t = {name: load(folder, name) for name in ("q", "k", "v", "out", "out_pt", "out_ref")}
        dtype = str(t["q"].dtype).removeprefix("torch.")
        yield (case, dtype, bool(meta.get("causal", False)), t["q"], t["k"], t["v"], t["out"], t["out_pt"],
               t["out_ref"], meta.get("kernel", "saved"))


def band(b):
    return f"[{b[0]:.3g}, {b[1]:.3g}]"


def ratio_text(x):
    return "0/0" if x is None else f"{x:.3g}"


def markdown(rows):
    lines = ["| dtype | case | causal | err(out) | err(out_pt) | err(out_ref) | measured ratio | true ratio | "
             "rule | true rule | err(out_ref) / err(out_pt) | rule admits |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['case']} | {'yes' if r['causal'] else 'no'} | {band(r['err_out'])} | "
                     f"{band(r['err_pt'])} | {band(r['err_ref'])} | {ratio_text(r['measured_ratio'])} | "
                     f"{band(r['true_ratio'])} | {r['rule']} | {r['true_rule']} | {r['ref_share']:.2f} | "
                     f"{r['rule_admits']:.2f} |")
    return "\n".join(lines)


def span(values, digits=3):
    return f"{min(values):.{digits}g} .. {max(values):.{digits}g}"


def summary(rows):
    """Per dtype: what the rule and the true rule conclude, and the ranges of the ratios."""
    lines = ["| dtype | kernel (out) | cases | rule passes | true rule passes | measured ratio | true ratio | "
             "err(out_ref) / err(out_pt) | rule admits up to |", "|---|---|---|---|---|---|---|---|---|"]
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        rs = [r for r in rows if r["dtype"] == dtype]
        m = [r["measured_ratio"] for r in rs if r["measured_ratio"] is not None]
        t = [v for r in rs for v in r["true_ratio"]]
        zero = sum(r["measured_ratio"] is None for r in rs)
        measured = (span(m) if m else "") + (f" ({zero} x 0/0)" if zero else "")
        lines.append(f"| {dtype} | {rs[0]['kernel']} | {len(rs)} | {sum(r['rule'] == 'passes' for r in rs)} | "
                     f"{sum(r['true_rule'] == 'passes' for r in rs)} | {measured} | {span(t)} | "
                     f"{span([r['ref_share'] for r in rs], 2)} | {max(r['rule_admits'] for r in rs):.2f} x |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="quick")
    parser.add_argument("--dtypes", default="float32,bfloat16,float16")
    parser.add_argument("--saved", help="a folder of cases saved from a GPU run (see the usage)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every row to this file")
    parser.add_argument("--details", action="store_true", help="print one table row per case too")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"seed {args.seed}; PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    start = time.perf_counter()
    cases = saved_cases(args.saved) if args.saved else generated_cases(args.grid, args.dtypes.split(","), args.seed)
    rows = []
    for c in cases:
        rows.append(case_row(*c))
        print(f"  {c[1]} {c[0]} {'causal' if c[2] else 'full'}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(summary(rows))
    measured = [r for r in rows if r["measured_ratio"] is not None]
    measured.sort(key=lambda r: -abs(r["measured_ratio"] - r["true_ratio"][1]))
    print("\nWhere the measured ratio is furthest from the true one:\n")
    print(markdown(measured[:6]))
    if args.details:
        print()
        print(markdown(rows))
    print(f"\n{len(rows)} cases in {time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
