#!/usr/bin/python3
"""docs/scan.md reproduced: its scan of the tiny model prints the table the page
shows (every column exactly, but the upper bounds on E*, which a search finds: its
path follows the machine's floating-point kernels, so another instruction set finds
other certified bounds; there the page's and the scan's must agree within 2x), the committed model is small, and attnrank layer --state-dict computes
the layer-0 patterns the model itself produced (within float32 rounding: the model
ran in float32). Usage: scan_doc.py path/to/attnrank SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

cli, source = sys.argv[1], sys.argv[2]
os.chdir(source)
failures = []
page = open("docs/scan.md").read().splitlines()
start = next(i for i, l in enumerate(page) if l.startswith("    $ attnrank scan examples/data/tiny-model"))
command = page[start][len("    $ attnrank "):].split()
shown = []
for line in page[start + 1:]:
    if not line.startswith("    "):
        break
    shown.append(line[4:])
with tempfile.TemporaryDirectory() as work:
    argv = [cli, *[os.path.join(work, "scan.svg") if a == "scan.svg" else a for a in command]]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{' '.join(command)}: exit {r.returncode}: {r.stderr}")
    else:
        got = r.stdout.splitlines()
        # "E* at d_k" is "lower .. upper"; every other word must match as printed.
        def split(line):
            words = line.split()
            if ".." not in words or not words[0].startswith("["):
                return words, None
            k = words.index("..")
            return words[:k + 1] + words[k + 2:], float(words[k + 1])
        same = len(got) == len(shown)
        for mine, theirs in zip(got, shown):
            (a, x), (b, y) = split(mine), split(theirs)
            same &= a == b and (x is None) == (y is None) and (x is None or (x <= y <= 2 * x or y <= x <= 2 * y))
        if not same:
            failures.append("docs/scan.md's table differs from the scan:\n" + r.stdout)
    svg = open(os.path.join(work, "scan.svg")).read() if os.path.exists(os.path.join(work, "scan.svg")) else ""
    if svg.count('class="cell"') != 8:
        failures.append("the heatmap does not have one cell per head")
model = "examples/data/tiny-model"
size = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model))
if size > 1 << 20:
    failures.append(f"{model} holds {size} bytes; the committed model must stay well under 1 MB")
r = subprocess.run([cli, "layer", "--x", f"{model}/x0.npy", "--state-dict", f"{model}/tiny-model.safetensors:layers.0.attn",
                    "--heads", "4", "--mask", "causal", "--tier", "double", "--json"], capture_output=True, text=True)
if r.returncode != 0:
    failures.append(f"layer --state-dict: exit {r.returncode}: {r.stderr}")
else:
    patterns = np.load(f"{model}/attention.npy")
    for h, a in enumerate(json.loads(r.stdout)["A"]):
        mine = np.array([[0.0 if v is None else float(v) for v in row] for row in a])
        gap = np.abs(mine - patterns[0, h]).max()
        if not gap < 1e-5:
            failures.append(f"layer 0, head {h}: the weights' pattern is {gap:.3g} from the model's")
for f in failures:
    print("FAIL", f)
print(f"scan_doc: {len(failures)} failures")
sys.exit(1 if failures else 0)
