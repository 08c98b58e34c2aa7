#!/usr/bin/python3
"""FlashAttention's output test grid, adjudicated with certified errors (docs/reproductions.md).

FlashAttention's test_flash_attn_output accepts a kernel's output ``out`` when

    max |out - out_ref| <= 2 max |out_pt - out_ref|

with out_ref the float32-upcast reference rounded to the inputs' dtype and out_pt the same
attention in the low precision (reordered). This script walks that test's parameter grid --
(seqlen_q, seqlen_k) pairs, head dims 32..256, float16 / bfloat16, causal, local (a random
window), ALiBi, softcap 50, dropout 0.17, MHA / MQA / GQA -- and for every case runs the
kernels under test, then reports the float rule next to the same rule on true errors
(err(x) = max |x - exact attention of the same inputs|, certified by attnrank.check_kernel):

  * rule        max |out - out_ref| <= 2 max |out_pt - out_ref|   (FlashAttention's, in floats)
  * true rule   err(out) <= 2 err(out_pt)                          (proven, or "undecided")

and counts the cases where they disagree: a false pass (the rule passes an output whose true
error breaks it) and a false fail (the rule fails an output that keeps it).

``--test varlen`` walks test_flash_attn_varlen_output's grid instead (23,232 cases: its pairs,
(1, 147) among them, and head dims; batch 4 and 9 heads, 3 K/V heads for GQA; no softcap; the
KV cache in float8_e5m2 or not): each batch element is a sequence of a random length (as
generate_random_padding_mask(mode="random") draws it), the kernels and references run
sequence by sequence, their outputs packed as flash_attn_varlen_func returns them, and the
check reads the packed tensors with their cu_seqlens.

Kernels: "blocked" -- a FlashAttention-style kernel written here (common.blocked_attention:
blocks of 64 keys, online softmax in float32, probabilities rounded to the dtype before the
P V product, the output rounded to the dtype) --, the same with its output accumulator rounded
to the dtype after every block ("blocked, dtype accumulator": a precision bug), and PyTorch's
CPU attention (SDPA with the mask, window and ALiBi as a float attn_mask) where it runs the
variant (not softcap or dropout; not float16 on PyTorch 1.13's CPU).

Not walked: ``deterministic`` and ``kvpacked`` (they change neither the forward's arithmetic
nor its inputs). Cases with a query row that attends to no key (causal or local with
seqlen_q > seqlen_k) are checked with FlashAttention's convention, output 0 in such rows
(``check_kernel(..., empty_rows="zero")``), and counted. The grid has 15,840 cases; ``--grid full`` walks them all (a
cluster's work: give ``--scheduler``), ``--grid sample --cases N`` a seeded uniform sample,
``--grid quick --cases N`` one among the pairs of at most 256 keys and head dims up to 64.

usage:
  flash_attention_output_grid.py [--test output|varlen] [--grid quick|sample|full] [--cases N] [--batch B]
      [--scheduler ADDRESS | --local-cluster WORKERS] [--seed S] [--json FILE] [--details]
  flash_attention_output_grid.py --saved DIR [--json FILE]
    DIR: one folder per case saved from a GPU run, with q, k, v (FlashAttention's (B, S, H, d)),
    out, out_pt, out_ref and, when used, alibi_slopes (B, H) and dropout_mask (B, H, S_q, S_k),
    as NAME.pt or NAME.npy, and a case.json {"causal": bool, "window_size": [l, r],
    "softcap": c, "dropout_p": p, "kernel": "name"} (keys optional).
"""
import argparse
import itertools
import json
import math
import os
import random
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (attention_ref, blocked_attention, has_saved, load, local_keep, max_diff,  # noqa: E402
                    saved_case_folders, torch_attention_variant)

PAIRS = [(113, 203), (128, 217), (113, 211), (108, 256), (256, 512), (512, 256), (1024, 1024), (1023, 1024),
         (1024, 1023), (2048, 2048)]
DIMS = [32, 40, 59, 64, 96, 111, 128, 160, 192, 224, 256]
# test_flash_attn_varlen_output's own lists.
VARLEN_PAIRS = [(1, 147)] + PAIRS
VARLEN_DIMS = [32, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256]


def full_grid(test="output"):
    """Every case of test_flash_attn_output (test="output") or test_flash_attn_varlen_output
    ("varlen") but deterministic and kvpacked, in its order."""
    if test == "varlen":
        return [dict(test="varlen", seqlen_q=sq, seqlen_k=sk, d=d, causal=causal, local=local, alibi=alibi,
                     mha_type=mha, dtype=dtype, softcap=0.0, dropout_p=dropout_p, kv_cache=kv_cache)
                for kv_cache, dropout_p, (sq, sk), d, causal, local, alibi, mha, dtype in itertools.product(
                    (None, "e5m2"), (0.0, 0.17), VARLEN_PAIRS, VARLEN_DIMS, (False, True), (False, True),
                    (False, True), ("mha", "mqa", "gqa"), ("float16", "bfloat16"))]
    cases = []
    for softcap, dropout_p, (sq, sk), d, causal, local, alibi, mha, dtype in itertools.product(
            (0.0, 50.0), (0.0, 0.17), PAIRS, DIMS, (False, True), (False, True), (False, True),
            ("mha", "mqa", "gqa"), ("float16", "bfloat16")):
        if softcap > 0 and dropout_p > 0:
            continue  # "Softcap and dropout not supported together", as the tests skip it
        cases.append(dict(seqlen_q=sq, seqlen_k=sk, d=d, causal=causal, local=local, alibi=alibi, mha_type=mha,
                          dtype=dtype, softcap=softcap, dropout_p=dropout_p))
    return cases


def chosen_cases(grid, kind, cases, seed):
    """Indices into the full grid: all of it, a seeded uniform sample of `cases`, or (quick) a
    seeded sample of `cases` among the smaller pairs (at most 256 keys) and head dims (<= 64)."""
    if kind == "full":
        return list(range(len(grid)))
    pool = range(len(grid)) if kind == "sample" else [
        i for i, c in enumerate(grid) if max(c["seqlen_q"], c["seqlen_k"]) <= 256 and c["d"] <= 64]
    return sorted(random.Random(seed).sample(list(pool), min(cases, len(pool))))


def round_to_e5m2(x):
    """x (float16 or bfloat16, within float16's range) rounded to FP8 E5M2, to nearest even, in
    x's dtype: float16 with its mantissa cut from 10 bits to 2 (FlashAttention's kv_cache_dtype)."""
    bits = x.to(torch.float16).view(torch.int16).to(torch.int32) & 0xFFFF
    bits = (bits + 0x7F + ((bits >> 8) & 1)) & 0xFF00
    bits = torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16)
    return bits.view(torch.float16).to(x.dtype)


def make_case(spec, index, seed, batch):
    """The tensors of one case, drawn as test_flash_attn_output draws them (randn in the dtype,
    q scaled by the softcap, a random window, slopes rand * 0.3), from a generator seeded by
    (seed, index): a worker makes the same case as the caller would. A varlen case also draws each
    sequence's lengths as generate_random_padding_mask(mode="random") does (from max(1, S - 20) to
    S), and rounds K and V to E5M2 with kv_cache "e5m2"."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + index)
    dtype = getattr(torch, spec["dtype"])
    sq, sk, d = spec["seqlen_q"], spec["seqlen_k"], spec["d"]
    varlen = spec.get("test") == "varlen"
    nheads = 9 if varlen else 6 if spec["softcap"] == 0 else 4
    nheads_k = nheads if spec["mha_type"] == "mha" else (1 if spec["mha_type"] == "mqa" else (3 if varlen else 2))
    q = torch.randn(batch, sq, nheads, d, generator=g).to(dtype)
    if spec["softcap"] > 0:
        q = q * spec["softcap"]  # "Ensure the values of qk are at least within softcap range"
    k = torch.randn(batch, sk, nheads_k, d, generator=g).to(dtype)
    v = torch.randn(batch, sk, nheads_k, d, generator=g).to(dtype)
    window = tuple(int(x) for x in torch.randint(0, sk, (2,), generator=g)) if spec["local"] else None
    if spec["causal"] and window is not None:
        window = (window[0], 0)
    slopes = torch.rand(batch, nheads, generator=g) * 0.3 if spec["alibi"] else None
    dropout = (torch.rand(batch, nheads, sq, sk, generator=g) >= spec["dropout_p"]) if spec["dropout_p"] > 0 else None
    case = dict(q=q, k=k, v=v, causal=spec["causal"], window=window, alibi_slopes=slopes, softcap=spec["softcap"],
                dropout_mask=dropout, dropout_p=spec["dropout_p"])
    if varlen:
        case["lengths_q"] = torch.randint(max(1, sq - 20), sq + 1, (batch,), generator=g).tolist()
        case["lengths_k"] = torch.randint(max(1, sk - 20), sk + 1, (batch,), generator=g).tolist()
        if spec.get("kv_cache") == "e5m2":
            case["k"], case["v"] = round_to_e5m2(k), round_to_e5m2(v)
    return case


def per_sequence(case, fn):
    """fn(q, k, v, variant) on the case: on the whole (B, S, H, d) tensors, or, for a varlen
    case, on each sequence's first lengths_q[b] queries and lengths_k[b] keys (its slopes row and
    dropout block), the outputs packed as FlashAttention's varlen output (total_q, H, d)."""
    variant = dict(window=case["window"], alibi_slopes=case["alibi_slopes"], softcap=case["softcap"],
                   dropout_mask=case["dropout_mask"], dropout_p=case["dropout_p"])
    if "lengths_q" not in case:
        return fn(case["q"], case["k"], case["v"], variant)
    outs = []
    for b, (lq, lk) in enumerate(zip(case["lengths_q"], case["lengths_k"])):
        one = dict(variant)
        if case["alibi_slopes"] is not None:
            one["alibi_slopes"] = case["alibi_slopes"][b:b + 1]
        if case["dropout_mask"] is not None:
            one["dropout_mask"] = case["dropout_mask"][b:b + 1, :, :lq, :lk]
        out = fn(case["q"][b:b + 1, :lq], case["k"][b:b + 1, :lk], case["v"][b:b + 1, :lk], one)
        if out is None:
            return None
        outs.append(out[0])
    return torch.cat(outs, 0)


def packed(case, name):
    """Tensor q, k or v of a varlen case as FlashAttention's varlen functions take it: (total, H, d)."""
    lengths = case["lengths_q"] if name == "q" else case["lengths_k"]
    return torch.cat([case[name][b, :n] for b, n in enumerate(lengths)], 0)


def offsets(lengths):
    return torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=torch.int32)


def band(e):
    """A check_kernel error band as floats that still enclose it: the decimal strings are rounded
    outward, and each end is moved one double outward so that reading them cannot round inward."""
    return (math.nextafter(float(e["max_abs_error_lower"]), 0.0),
            math.nextafter(float(e["max_abs_error_upper"]), math.inf))


def certified_error(attnrank, case, out):
    """err(out): attnrank.check_kernel's band on max |out - exact| for this case's variant (a
    varlen case's packed tensors with its cu_seqlens, the dropout mask padded as there)."""
    kw = dict(softcap=case["softcap"])
    if "lengths_q" in case:
        t = [packed(case, "q"), packed(case, "k"), packed(case, "v"), out]
        kw.update(cu_seqlens_q=offsets(case["lengths_q"]), cu_seqlens_k=offsets(case["lengths_k"]))
    else:
        t = [x.transpose(1, 2) for x in (case["q"], case["k"], case["v"], out)]
    if case["window"] is not None:
        kw["window_size"] = case["window"]
    elif case["causal"]:
        kw["mask"] = "causal"
    if case["alibi_slopes"] is not None:
        kw["alibi_slopes"] = case["alibi_slopes"]
    if case["dropout_mask"] is not None:
        kw.update(dropout_mask=case["dropout_mask"], dropout_p=case["dropout_p"])
    r = attnrank.check_kernel(*t, empty_rows="zero", **kw)  # FlashAttention's 0 in rows without a key
    return band(r["candidate"]), r["method"]


def has_empty_row(case):
    pairs = (zip(case["lengths_q"], case["lengths_k"]) if "lengths_q" in case
             else [(case["q"].shape[1], case["k"].shape[1])])
    return any(not bool(local_keep(n_q, n_k, case["causal"], case["window"]).any(dim=1).all()) for n_q, n_k in pairs)


def true_rule(e_out, e_pt):
    """err(out) <= 2 err(out_pt), decided from the bands (divisions rounded outward)."""
    lo = math.nextafter(e_out[0] / e_pt[1], 0.0) if e_pt[1] > 0 else math.inf
    hi = math.nextafter(e_out[1] / e_pt[0], math.inf) if e_pt[0] > 0 else math.inf
    verdict = "passes" if hi <= 2 else "fails" if lo > 2 else "undecided"
    return verdict, (lo, hi)


def judge(name, spec, case, kernels):
    """Rows for one case: per kernel, the float rule and the true rule side by side."""
    import attnrank
    causal = case["causal"]
    out_ref = case.get("out_ref")
    if out_ref is None:
        out_ref = per_sequence(case, lambda q, k, v, var: attention_ref(q, k, v, causal, upcast=True, **var))
    out_pt = case.get("out_pt")
    if out_pt is None:
        out_pt = per_sequence(case, lambda q, k, v, var: attention_ref(q, k, v, causal, upcast=False,
                                                                       reorder_ops=True, **var))
    e_ref, _ = certified_error(attnrank, case, out_ref)
    e_pt, _ = certified_error(attnrank, case, out_pt)
    d_pt = max_diff(out_pt, out_ref)
    rows = []
    for kernel, out in kernels.items():
        e_out, method = certified_error(attnrank, case, out)
        d_out = max_diff(out, out_ref)
        rule = "passes" if d_out <= 2 * d_pt else "fails"
        truth, ratio = true_rule(e_out, e_pt)
        rows.append(dict(case=name, kernel=kernel, **spec, window=case["window"], shape=list(case["q"].shape),
                         empty_rows=has_empty_row(case),
                         err_out=list(e_out), err_pt=list(e_pt), err_ref=list(e_ref), diff_out_ref=d_out,
                         diff_pt_ref=d_pt, rule=rule, true_rule=truth, true_ratio=list(ratio), method=method,
                         measured_ratio=d_out / d_pt if d_pt > 0 else None,
                         rule_admits=None,
                         disagreement=("false pass" if rule == "passes" and truth == "fails" else
                                       "false fail" if rule == "fails" and truth == "passes" else None)))
    for r in rows:
        r["rule_admits"] = rule_admits(r)
    return rows


def run_generated(spec, index, seed, batch):
    """One generated case, start to end (what a Dask task runs): its rows."""
    case = make_case(spec, index, seed, batch)
    name = (f"#{index} {spec['dtype']} {spec['seqlen_q']}x{spec['seqlen_k']} d={spec['d']} {spec['mha_type']}"
            + "".join(f" {f}" for f in ("causal", "local", "alibi") if spec[f])
            + (f" softcap={spec['softcap']:g}" if spec["softcap"] else "")
            + (f" dropout={spec['dropout_p']:g}" if spec["dropout_p"] else "")
            + (" varlen" if spec.get("test") == "varlen" else "")
            + (f" kv_cache={spec['kv_cache']}" if spec.get("kv_cache") else ""))
    causal = case["causal"]
    kernels = {"blocked": per_sequence(case, lambda q, k, v, var: blocked_attention(q, k, v, causal, p_in_dtype=True,
                                                                                     **var)),
               "blocked, dtype accumulator": per_sequence(case, lambda q, k, v, var: blocked_attention(
                   q, k, v, causal, p_in_dtype=True, acc_in_dtype=True, **var))}
    pt = per_sequence(case, lambda q, k, v, var: torch_attention_variant(
        q, k, v, causal, window=var["window"], alibi_slopes=var["alibi_slopes"], softcap=var["softcap"],
        dropout_mask=var["dropout_mask"]))
    if pt is not None:
        kernels["torch SDPA"] = pt
    return dict(case=name, index=index, rows=judge(name, spec, case, kernels))


def saved_cases(root):
    for folder_name, folder, meta in saved_case_folders(root):
        t = {n: load(folder, n) for n in ("q", "k", "v", "out", "out_pt", "out_ref")}
        optional = {n: load(folder, n) for n in ("alibi_slopes", "dropout_mask") if has_saved(folder, n)}
        window = meta.get("window_size")
        window = None if window is None or tuple(window) == (-1, -1) else tuple(int(x) for x in window)
        case = dict(q=t["q"], k=t["k"], v=t["v"], out_pt=t["out_pt"], out_ref=t["out_ref"],
                    causal=bool(meta.get("causal", False)), window=window, alibi_slopes=optional.get("alibi_slopes"),
                    softcap=float(meta.get("softcap", 0.0)), dropout_mask=optional.get("dropout_mask"),
                    dropout_p=float(meta.get("dropout_p", 0.0)))
        sq, sk = t["q"].shape[1], t["k"].shape[1]
        h, hk = t["q"].shape[2], t["k"].shape[2]
        spec = dict(seqlen_q=sq, seqlen_k=sk, d=t["q"].shape[-1], causal=case["causal"], local=window is not None,
                    alibi=case["alibi_slopes"] is not None, mha_type="mha" if h == hk else "mqa" if hk == 1 else "gqa",
                    dtype=str(t["q"].dtype).removeprefix("torch."), softcap=case["softcap"],
                    dropout_p=case["dropout_p"])
        yield folder_name, spec, case, {meta.get("kernel", "saved"): t["out"]}


def span(values):
    return f"{min(values):.3g} .. {max(values):.3g}" if values else ""


def rule_admits(r):
    """The largest true ratio err(kernel) / err(out_pt) the rule can accept with this out_pt and
    out_ref: a kernel passes when max |out - out_ref| <= 2 d_pt, which one whose error is up to
    2 d_pt + err(out_ref) can meet."""
    return (2 * r["diff_pt_ref"] + r["err_ref"][1]) / r["err_pt"][0] if r["err_pt"][0] > 0 else math.inf


FEATURES = ("causal", "local", "alibi", "softcap", "dropout", "mqa", "gqa")


def features_of(r):
    """The variants a case exercises ("plain": none of them)."""
    present = [f for f in ("causal", "local", "alibi") if r[f]]
    present += ["softcap"] if r["softcap"] else []
    present += ["dropout"] if r["dropout_p"] else []
    present += [r["mha_type"]] if r["mha_type"] != "mha" else []
    return present or ["plain"]


def summary(records):
    """Per kernel and dtype: what the rule and the true rule conclude; then, for the blocked
    kernel, the true ratios and how far the rule's 2x reaches, per variant."""
    rows = [r for rec in records for r in rec.get("rows", [])]
    empty = len({r["case"] for r in rows if r["empty_rows"]})
    lines = ["| kernel | dtype | cases | rule passes | true rule passes | true rule fails | undecided | "
             "false passes | false fails | true ratio |", "|---|---|---|---|---|---|---|---|---|---|"]
    for kernel, dtype in sorted(dict.fromkeys((r["kernel"], r["dtype"]) for r in rows)):
        rs = [r for r in rows if r["kernel"] == kernel and r["dtype"] == dtype]
        count = lambda key, value: sum(r[key] == value for r in rs)  # noqa: E731
        lines.append(f"| {kernel} | {dtype} | {len(rs)} | {count('rule', 'passes')} | "
                     f"{count('true_rule', 'passes')} | {count('true_rule', 'fails')} | "
                     f"{count('true_rule', 'undecided')} | {count('disagreement', 'false pass')} | "
                     f"{count('disagreement', 'false fail')} | {span([v for r in rs for v in r['true_ratio']])} |")
    lines += ["", f"{empty} of {len(records)} case(s) have query rows that attend to no key (FlashAttention's "
              "output 0 there, checked exactly).", "",
              "The blocked kernel per variant (a case counts under each variant it has):", "",
              "| variant | cases | err(out) | err(out_pt) | true ratio | rule admits up to (x err(out_pt)) | "
              "rule admits up to (x err(out)) |", "|---|---|---|---|---|---|---|"]
    blocked = [r for r in rows if r["kernel"] == "blocked"]
    for feature in ("plain",) + FEATURES:
        rs = [r for r in blocked if feature in features_of(r)]
        if rs:
            lines.append(f"| {feature} | {len(rs)} | {span([r['err_out'][1] for r in rs])} | "
                         f"{span([r['err_pt'][1] for r in rs])} | {span([v for r in rs for v in r['true_ratio']])} | "
                         f"{max(r['rule_admits'] for r in rs):.3g} | "
                         f"{max(r['rule_admits'] * r['err_pt'][0] / r['err_out'][1] for r in rs):.3g} |")
    return "\n".join(lines)


def details(rows):
    lines = ["| case | kernel | err(out) | err(out_pt) | err(out_ref) | measured ratio | true ratio | rule | true rule |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = "0/0" if r["measured_ratio"] is None else f"{r['measured_ratio']:.3g}"
        lines.append(f"| {r['case']} | {r['kernel']} | {r['err_out'][1]:.3g} | {r['err_pt'][1]:.3g} | "
                     f"{r['err_ref'][1]:.3g} | {m} | [{r['true_ratio'][0]:.3g}, {r['true_ratio'][1]:.3g}] | "
                     f"{r['rule']} | {r['true_rule']} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", choices=("quick", "sample", "full"), default="quick")
    parser.add_argument("--test", choices=("output", "varlen"), default="output",
                        help="which test's grid: test_flash_attn_output or test_flash_attn_varlen_output")
    parser.add_argument("--cases", type=int, default=24, help="cases of --grid sample and quick (default 24)")
    parser.add_argument("--batch", type=int, default=None, help="batch size (FlashAttention's 4; quick: 1)")
    parser.add_argument("--saved", help="a folder of cases saved from a GPU run (see the usage)")
    parser.add_argument("--scheduler", help="a Dask scheduler's address: the cases run on its workers")
    parser.add_argument("--local-cluster", type=int, metavar="WORKERS",
                        help="start a local Dask cluster of this many single-threaded worker processes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every row to this file")
    parser.add_argument("--details", action="store_true", help="print one table row per kernel and case too")
    args = parser.parse_args()
    if args.cases < 1:
        parser.error(f"--cases must be at least 1 (got {args.cases})")
    if args.batch is not None and args.batch < 1:
        parser.error(f"--batch must be at least 1 (got {args.batch})")
    print(f"seed {args.seed}; PyTorch {torch.__version__}")
    start = time.perf_counter()
    records = []
    if args.saved:
        for name, spec, case, kernels in saved_cases(args.saved):
            records.append(dict(case=name, rows=judge(name, spec, case, kernels)))
    else:
        grid = full_grid(args.test)
        indexed = [(grid[i], i) for i in chosen_cases(grid, args.grid, args.cases, args.seed)]
        batch = args.batch or (1 if args.grid == "quick" else 4)
        if args.scheduler or args.local_cluster:
            import distributed
            cluster = None
            if args.local_cluster:
                cluster = distributed.LocalCluster(n_workers=args.local_cluster, threads_per_worker=1,
                                                   processes=True, dashboard_address=None)
            with distributed.Client(args.scheduler or cluster) as client:
                # The workers import this folder's modules (common) and attnrank from their own path.
                client.run(lambda: sys.path.insert(0, HERE) if HERE not in sys.path else None)
                futures = [client.submit(run_generated, spec, i, args.seed, batch, pure=False) for spec, i in indexed]
                for n, future in enumerate(distributed.as_completed(futures), 1):
                    records.append(future.result())
                    print(f"  {n}/{len(futures)} cases: {time.perf_counter() - start:.0f} s", file=sys.stderr)
            if cluster is not None:
                cluster.close()
            records.sort(key=lambda rec: rec["index"])  # the grid's order (indexed is sorted)
        else:
            for n, (spec, i) in enumerate(indexed, 1):
                records.append(run_generated(spec, i, args.seed, batch))
                print(f"  {n}/{len(indexed)} {records[-1]['case']}: {time.perf_counter() - start:.0f} s",
                      file=sys.stderr)
    print(summary(records))
    rows = [r for rec in records for r in rec.get("rows", [])]
    disagreeing = [r for r in rows if r["disagreement"] or r["true_rule"] == "undecided"]
    if disagreeing:
        print("\nWhere the rule and the true rule disagree (or the true rule is undecided):\n")
        print(details(disagreeing))
    if args.details:
        print()
        print(details(rows))
    print(f"\n{len(records)} cases in {time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "torch": torch.__version__, "grid": args.grid, "test": args.test,
                       "records": records}, f,
                      indent=1)


if __name__ == "__main__":
    main()
