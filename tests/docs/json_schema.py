#!/usr/bin/python3
"""Every command's --json output validates against docs/schema/<type>.schema.json, and
keeps the one JSON vocabulary of docs/cli.md ("JSON: one vocabulary").

usage: json_schema.py ATTNRANK_CLI SOURCE_DIR WORK_DIR      (ctest json_schema_test)

Each run below prints a document whose "schema" key names its type and version
("attnrank/reach/1"); the document must validate against that type's schema (Draft
2020-12, additionalProperties false at the top: a new key needs the schema updated),
and every key in it, at any depth outside the certificates (their own versioned
format), must follow the vocabulary: snake_case (the tutorial's symbols, A or W_Q, keep their
capitals), d_k never dk, bits never
precision_bits, and a <name>_lower key always beside its <name>_upper.
"""
import json
import os
import re
import subprocess
import sys

import jsonschema

cli, source, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
data = os.path.join(source, "examples", "data")
inputs = os.path.join(source, "tests", "cli", "inputs")
we = os.path.join(data, "worked-example")
weights = ["--x", f"{we}/x.csv", "--wq", f"{we}/wq.csv", "--wk", f"{we}/wk.csv", "--wv", f"{we}/wv.csv",
           "--wo", f"{we}/wo.csv", "--heads", "2"]
x4 = os.path.join(work, "x4.csv")
with open(x4, "w") as f:
    f.write("1,0,0,2,1\n0,1,3,0,0\n1,1,0,0,2\n0,2,1,1,0\n")
cert = os.path.join(work, "diag.cert.json")
causal_cert = os.path.join(work, "causal.cert.json")

# An attention kernel's inputs and float32 output, for check-kernel (NumPy from Debian).
import numpy as np

rng = np.random.default_rng(20261202)
kernel = {}
for name in ("q", "k", "v"):
    kernel[name] = rng.standard_normal((2, 8, 4)).astype(np.float32)
s = np.einsum("hid,hjd->hij", kernel["q"], kernel["k"]) / np.float32(2)
p = np.exp(s - s.max(axis=-1, keepdims=True))
kernel["o"] = (p / p.sum(axis=-1, keepdims=True)) @ kernel["v"]
kernel_args = []
for name, a in kernel.items():
    np.save(os.path.join(work, f"kernel-{name}.npy"), a)
    kernel_args += [f"--{'candidate' if name == 'o' else name}", os.path.join(work, f"kernel-{name}.npy")]
# The backward pass in float32 (its values need not be accurate: the schema is what is checked).
grads = {"dout": rng.standard_normal((2, 8, 4)).astype(np.float32)}
pw = p / p.sum(axis=-1, keepdims=True)
grads["dv"] = np.swapaxes(pw, -1, -2) @ grads["dout"]
dpw = grads["dout"] @ np.swapaxes(kernel["v"], -1, -2)
ds = pw * (dpw - (grads["dout"] * kernel["o"]).sum(-1, keepdims=True))
grads["dq"] = (ds @ kernel["k"]) / np.float32(2)
grads["dk"] = (np.swapaxes(ds, -1, -2) @ kernel["q"]) / np.float32(2)
grads["lse"] = np.log(np.exp(s).sum(-1)).astype(np.float32)
np.save(os.path.join(work, "kernel-dsinks.npy"), np.zeros(2, np.float32))  # the sinks' gradient (H,)
for name in ("k", "v"):  # 4 keys for 8 queries: causal bottom-right leaves rows 0..3 without a key
    np.save(os.path.join(work, f"kernel-{name}4.npy"), kernel[name][:, :4])
np.save(os.path.join(work, "kernel-keep.npy"), (rng.random((2, 8, 8)) > 0.25).astype(np.float32))
bias = rng.standard_normal((2, 8, 8))
bias[1, 3, 0] = -np.inf  # a masked key
np.save(os.path.join(work, "kernel-bias.npy"), bias)
for name in ("q", "k", "v"):  # FP8 E4M3 codes (no NaN code 0x7F / 0xFF)
    np.save(os.path.join(work, f"kernel-{name}8.npy"), rng.integers(0, 0x7E, (2, 8, 4)).astype(np.uint8))
fp8_args = [a for name in ("q", "k", "v") for a in (f"--{name}", os.path.join(work, f"kernel-{name}8.npy"))]
backward_args = []
for name, a in grads.items():
    np.save(os.path.join(work, f"kernel-{name}.npy"), a)
    backward_args += [f"--{name}", os.path.join(work, f"kernel-{name}.npy")]
# The same tensors as packed sequences (FlashAttention's varlen layout (total, H, d)), lse (H, total).
varlen_args = []
for name, a in list(kernel.items()) + list(grads.items()):
    packed = np.ascontiguousarray(a if name == "lse" else np.swapaxes(a, 0, 1))
    np.save(os.path.join(work, f"packed-{name}.npy"), packed)
    varlen_args += [f"--{'candidate' if name == 'o' else name}", os.path.join(work, f"packed-{name}.npy")]
varlen_args += ["--cu-seqlens-q", "0,3,8", "--cu-seqlens-k", "0,5,8", "--window", "2,-1"]

# The output variants the schemas must admit: null bounds, per-head masks, hints,
# zero entries, targets past the error bounds' size, the numeric modes.
# A singular value beyond the double range: its upper bound is null (sigma_1 = 3.4e308 > DBL_MAX).
big = os.path.join(work, "big.npy")
np.save(big, np.full((2, 2), 1.7e308))
zero_free = os.path.join(work, "zero-free.csv")  # a zero entry: unreachable for every finite score
with open(zero_free, "w") as f:
    f.write("0.5,0.5,0\n0.2,0.3,0.5\n0.1,0.2,0.7\n")
zero_causal = os.path.join(work, "zero-causal.csv")  # a zero at an allowed position of the causal mask
with open(zero_causal, "w") as f:
    f.write("1,0,0\n0.3,0.7,0\n0,0.5,0.5\n")
band, band_target = os.path.join(work, "band.csv"), os.path.join(work, "band-target.csv")  # a mask that is not nested
with open(band, "w") as f:
    f.write("1,1,0,0\n1,1,1,0\n0,1,1,1\n0,0,1,1\n")
with open(band_target, "w") as f:
    f.write("0.5,0.5,0,0\n0.25,0.5,0.25,0\n0,0.3,0.3,0.4\n0,0,0.6,0.4\n")
rounded = os.path.join(work, "rounded.npy")  # a width-1 head's pattern rounded to doubles: undecided, with a hint
qk = rng.standard_normal((6, 1)) @ rng.standard_normal((1, 6))
e = np.exp(qk - qk.max(axis=1, keepdims=True))
np.save(rounded, e / e.sum(axis=1, keepdims=True))

stack = os.path.join(work, "stack.npy")  # a (2, 2, 5, 5) stack of patterns, one with a zero entry
g = rng.standard_normal((2, 2, 5, 5))
heads = np.exp(g) / np.exp(g).sum(axis=-1, keepdims=True)
heads[1, 1, 0, 2] = 0
np.save(stack, heads)

runs = [
    ["scan", stack], ["scan", stack, "--dk", "2", "--epsilon", "0.05"],
    ["svd", big], ["svd", "diag:3:1", "--gaps"], ["svd", "hilbert:4"],
    ["width", "diag:4:0.7", "--epsilon", "0", "--max-dk", "2", "--no-search"],
    ["layer", *weights, "--tier", "double", "--mask", "causal", "--mask", "none"],
    ["reach", band_target, "--mask", band, "--dk", "2"], ["reach", rounded, "--dk", "2"],
    ["reach", zero_free, "--dk", "1"], ["reach", zero_causal, "--mask", "causal", "--dk", "1"],
    ["reach", "diag:600:0.5", "--dk", "1"],
    ["check-kernel", *kernel_args, "--max-error", "0"],

    ["example"], ["example", "--mask", "causal"],
    ["layer", *weights], ["layer", *weights, "--tier", "double"], ["layer", *weights, "--tier", "mp", "--digits", "10"],
    ["layer", *weights, "--mask", "causal"],
    ["rank", "diag:3:0.8"], ["rank", "hilbert:12", "--mode", "certified"], ["rank", "diag:3:0.8", "--mode", "certified"],
    ["rank", "hilbert:6", "--mode", "numeric"], ["rank", "hilbert:6", "--mode", "numeric", "--top", "3"],
    ["rank", f"{inputs}/pattern-f32.npy"],
    ["det", "diag:3:0.8"], ["det", "hilbert:8", "--mode", "certified"], ["det", "diag:3:0.8", "--mode", "certified"],
    ["reach", "diag:3:0.8", "--dk", "1"], ["reach", "diag:3:0.8", "--dk", "2", "--certificate", cert],
    ["reach", "diag:3:0.8", "--check", cert],
    ["reach", "diag:3:0.8", "--dk", "1", "--epsilon", "0.1"], ["reach", f"{data}/previous-token.csv", "--dk", "2"],
    ["reach", "diag:6:0.7", "--dk", "2"], ["reach", "diag:6:0.7", "--dk", "2", "--refine", "--time-limit", "0"],
    ["reach", f"{data}/causal-8.csv", "--dk", "4"],
    ["reach", f"{data}/causal-8.csv", "--mask", "causal", "--dk", "3"],
    ["reach", f"{data}/causal-8.csv", "--mask", "causal", "--dk", "4", "--epsilon", "0.01", "--certificate", causal_cert],
    ["reach", f"{data}/causal-8.csv", "--mask", "causal", "--check", causal_cert],
    ["reach", "diag:4:0.7", "--dk", "2", "--x", x4], ["reach", "diag:4:0.7", "--dk", "1", "--x", x4, "--epsilon", "0.2"],
    ["svd", "hilbert:5", "--top", "2"], ["svd", "hilbert:5", "--top", "2", "--gaps"],
    ["width", "diag:4:0.7", "--epsilon", "0.05"], ["width", "diag:4:0.7", "--epsilon", "0.05", "--no-search"],
    ["width", f"{data}/causal-8.csv", "--mask", "causal", "--epsilon", "0.01"],
    ["sweep"], ["sweep", "--mask", "causal", "--position", "2"],
    ["appendix"],
    ["check-kernel", *kernel_args], ["check-kernel", *kernel_args, "--mask", "causal", "--max-error", "1000"],
    ["check-kernel", *kernel_args, "--reference", os.path.join(work, "kernel-o.npy"), "--fallback", "never"],
    ["check-kernel", *kernel_args[:6], *backward_args],
    ["check-kernel", *fp8_args, "--candidate", os.path.join(work, "kernel-o.npy"), "--fp8", "e4m3", "--q-descale", "0.5,0.25",
     "--v-descale", "2,2"],
    ["check-kernel", *kernel_args, *backward_args, "--softcap", "30", "--alibi-slopes", "0.5,0.25", "--sinks", "1,-1",
     "--bias", os.path.join(work, "kernel-bias.npy"), "--dropout-mask", os.path.join(work, "kernel-keep.npy"),
     "--dropout-p", "0.25", "--dsinks", os.path.join(work, "kernel-dsinks.npy")],
    ["check-kernel", *kernel_args, *backward_args, "--reference-dq", os.path.join(work, "kernel-dq.npy"),
     "--reference", os.path.join(work, "kernel-o.npy"), "--max-ratio", "2", "--ratio-atol", "1e-6", "--max-error", "1"],
    ["layer", *weights, "--tier", "certified-double"],
    ["check-kernel", *varlen_args],
    ["check-kernel", *kernel_args[:6], "--candidate", os.path.join(work, "kernel-o.npy"), "--lse",
     os.path.join(work, "kernel-lse.npy"), "--profile", "fa2-bf16"],
    # Rows without a key (causal with N_q > N_k): FlashAttention's zero rows, an lse missing its +inf.
    ["check-kernel", "--q", os.path.join(work, "kernel-q.npy"), "--k", os.path.join(work, "kernel-k4.npy"),
     "--v", os.path.join(work, "kernel-v4.npy"), "--candidate", os.path.join(work, "kernel-o.npy"),
     "--lse", os.path.join(work, "kernel-lse.npy"), "--mask", "causal", "--empty-rows", "zero"],
]

schemas = {}
docs = {}
failures = []
seen = set()


def vocabulary(node, path):
    if isinstance(node, list):
        for i, v in enumerate(node):
            vocabulary(v, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        where = f"{path}.{key}"
        if key.startswith("certificate") and not key.endswith("_check"):
            continue  # a certificate: its own versioned format
        # snake_case; a segment may be one of the tutorial's symbols (A, A1, W_Q, K_heads, det_log_A)
        if not all(re.fullmatch(r"[a-z][a-z0-9]*|[0-9]+|[A-Z][0-9]?", part) for part in key.split("_")):
            failures.append(f"{where}: not snake_case")
        # check-kernel's dK (FlashAttention's name), and its verdicts by tensor
        gradient = key == "dk" and (path == "" and "backward" in node or path == ".verdicts")
        if (key == "dk" and not gradient) or key.endswith("_dk_") or key == "precision_bits":
            failures.append(f"{where}: the vocabulary says d_k and bits")
        for end, other in (("_lower", "_upper"), ("_upper", "_lower")):
            if key.endswith(end) and key[: -len(end)] + other not in node:
                failures.append(f"{where}: {key} without {key[:-len(end)] + other}")
        vocabulary(value, where)


for args in runs:
    command = [cli, *args, "--json"]
    r = subprocess.run(command, capture_output=True, text=True)
    name = " ".join(args)
    if r.returncode != 0 and not (r.returncode == 3 and "--max-error" in args):
        failures.append(f"{name}: exit {r.returncode}: {r.stderr.strip()}")
        continue
    doc = json.loads(r.stdout)
    kind = doc.get("schema", "")
    m = re.fullmatch(r"attnrank/([a-z-]+)/1", kind)
    if not m:
        failures.append(f"{name}: schema key {kind!r} is not attnrank/<type>/1")
        continue
    seen.add(m.group(1))
    if m.group(1) not in schemas:
        with open(os.path.join(source, "docs", "schema", f"{m.group(1)}.schema.json")) as f:
            schemas[m.group(1)] = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schemas[m.group(1)])
    for error in jsonschema.Draft202012Validator(schemas[m.group(1)]).iter_errors(doc):
        failures.append(f"{name}: {'/'.join(map(str, error.absolute_path))}: {error.message[:200]}")
    vocabulary(doc, "")
    docs[name] = doc

# Each variant above must really occur, or the schema is not tested on it.
variants = {
    f"svd {big}": lambda d: d["singular_values"][0]["upper"] is None,
    "svd diag:3:1 --gaps": lambda d: d["gaps"][0] is None,
    "svd hilbert:4": lambda d: d["top"] == 4,
    "width diag:4:0.7 --epsilon 0 --max-dk 2 --no-search": lambda d: d["width_upper"] is None,
    f"layer {' '.join(weights)} --tier double --mask causal --mask none": lambda d: d["mask"] == "per-head",
    f"reach {band_target} --mask {band} --dk 2": lambda d: "hint" in d and not d["nested"],
    f"reach {rounded} --dk 2": lambda d: d["verdict"] == "undecided" and "hint" in d,
    f"reach {zero_free} --dk 1": lambda d: d["zero_entry"] == {"row": 1, "column": 3},
    f"reach {zero_causal} --mask causal --dk 1": lambda d: d["zero_entry"] == {"row": 3, "column": 1},
    "reach diag:600:0.5 --dk 1": lambda d: "error_upper" not in d,
    "reach diag:6:0.7 --dk 2": lambda d: not d["refinement"]["ran"],
    "reach diag:6:0.7 --dk 2 --refine --time-limit 0": lambda d: d["refinement"]["ran"] and d["refinement"]["time_limit"] is None,
    "rank hilbert:6 --mode numeric": lambda d: "rank_lower" not in d and "approx_rank_lower" in d,
    "example": lambda d: d["schema"] == "attnrank/example/1",
    f"scan {stack}": lambda d: any(h["zero_entry"] for h in d["heads"]) and "verdict" not in d["heads"][0],
    f"check-kernel {' '.join(kernel_args)} {' '.join(backward_args)} --softcap 30 --alibi-slopes 0.5,0.25 --sinks 1,-1 --bias {os.path.join(work, 'kernel-bias.npy')} --dropout-mask {os.path.join(work, 'kernel-keep.npy')} --dropout-p 0.25 --dsinks {os.path.join(work, 'kernel-dsinks.npy')}":
        lambda d: {"softcap", "alibi_slopes", "alibi_alignment", "sinks", "bias", "dropout_p", "candidate", "dq", "dsinks"} <= set(d)
        and d["dsinks"]["candidate"]["worst"].keys() == {"head"},
    f"check-kernel {' '.join(fp8_args)} --candidate {os.path.join(work, 'kernel-o.npy')} --fp8 e4m3 --q-descale 0.5,0.25 --v-descale 2,2":
        lambda d: d["fp8_format"] == "e4m3" and d["descaled"] == ["q", "v"],
    f"check-kernel {' '.join(kernel_args[:6])} {' '.join(backward_args)}":
        lambda d: "candidate" not in d and {"dq", "dk", "dv", "lse", "backward"} <= set(d),
    f"check-kernel {' '.join(kernel_args)} {' '.join(backward_args)} --reference-dq {work}/kernel-dq.npy "
    f"--reference {work}/kernel-o.npy --max-ratio 2 --ratio-atol 1e-6 --max-error 1":
        lambda d: "reference" in d["dq"] and "max_ratio_verdict" in d["dq"] and "max_error_verdict" in d["dk"],
    f"check-kernel --q {work}/kernel-q.npy --k {work}/kernel-k4.npy --v {work}/kernel-v4.npy --candidate "
    f"{work}/kernel-o.npy --lse {work}/kernel-lse.npy --mask causal --empty-rows zero":
        lambda d: d["empty_rows"] == {"convention": "zero", "rows": 8} and d["lse"]["candidate"]["infinity_missed"] == 8,
    f"check-kernel {' '.join(kernel_args[:6])} --candidate {work}/kernel-o.npy --lse {work}/kernel-lse.npy --profile fa2-bf16":
        lambda d: d["budget"]["profile"]["name"] == "fa2-bf16" and {"out", "lse"} <= set(d["budget"])
        and d["verdicts"]["out"]["budget"] == d["budget"]["out"]["verdict"],
    f"check-kernel {' '.join(varlen_args)}":
        lambda d: d["varlen"]["sequences"] == 2 and "token" in d["candidate"]["worst"] and "token" in d["dk"]["candidate"]["worst"],
    f"scan {stack} --dk 2 --epsilon 0.05": lambda d: all("width_upper" in h and "epsilon_verdict" in h
                                                          for h in d["heads"] if not h["zero_entry"]),
}
for name, holds in variants.items():
    if name not in docs or not holds(docs[name]):
        failures.append(f"{name}: the variant it stands for did not occur")

missing = {f[:-12] for f in os.listdir(os.path.join(source, "docs", "schema")) if f.endswith(".schema.json")} - seen
for m in sorted(missing):
    failures.append(f"docs/schema/{m}.schema.json: no run here produces it")
print(f"json_schema: {len(runs)} runs, {len(seen)} document types")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
