#!/usr/bin/python3
"""The worked session of docs/kernels.md: a causal attention computed by NumPy in float32 and
in float16 (the way a kernel test builds its outputs), checked by `attnrank check-kernel`
against the exact attention of the same inputs.

usage: check_kernel_session.py ATTNRANK DIR      (ctest example_kernel_session; seed 0, printed)
"""
import os
import subprocess
import sys

import numpy as np

attnrank, work = os.path.abspath(sys.argv[1]), sys.argv[2]
os.makedirs(work, exist_ok=True)
os.chdir(work)
SEED = 0
print(f"seed {SEED}")
rng = np.random.default_rng(SEED)
B, H, N, d = 1, 4, 256, 64
q, k, v = (rng.standard_normal((B, H, N, d)).astype(np.float32) for _ in range(3))
causal = np.tril(np.ones((N, N), dtype=bool))


def attention(q, k, v):
    """What a reference implementation does, in the inputs' own dtype."""
    s = np.einsum("bhid,bhjd->bhij", q, k) / q.dtype.type(np.sqrt(d))
    s = np.where(causal, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


for name, a in (("q", q), ("k", k), ("v", v)):
    np.save(f"{name}.npy", a)
np.save("out_f32.npy", attention(q, k, v))
np.save("ref_f64.npy", attention(*(x.astype(np.float64) for x in (q, k, v))))
# A float16 kernel sees float16 inputs: its exact output is that of the rounded inputs.
q16, k16, v16 = (x.astype(np.float16) for x in (q, k, v))
for name, a in (("q16", q16), ("k16", k16), ("v16", v16)):
    np.save(f"{name}.npy", a)
np.save("out16_f16.npy", attention(q16, k16, v16))                                     # float16 throughout
np.save("out16_f32.npy", attention(*(x.astype(np.float32) for x in (q16, k16, v16))))  # the usual reference

runs = [
    ["check-kernel", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--mask", "causal",
     "--candidate", "out_f32.npy", "--reference", "ref_f64.npy"],
    ["check-kernel", "--q", "q16.npy", "--k", "k16.npy", "--v", "v16.npy", "--mask", "causal",
     "--candidate", "out16_f16.npy", "--reference", "out16_f32.npy", "--max-error", "1e-3"],
]
for args in runs:
    print("$ attnrank " + " ".join(args))
    r = subprocess.run([attnrank, *args], capture_output=True, text=True)
    print(r.stdout, end="")
    print(f"(exit {r.returncode})\n")
