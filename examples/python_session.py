#!/usr/bin/python3
"""A session with the attnrank Python module (docs/python.md).

Run after the build with  PYTHONPATH=build/python /usr/bin/python3 examples/python_session.py
It builds a PyTorch multi-head attention layer, checks torch's output against attnrank's
certified one, and asks whether one head's attention pattern needs its full width.
"""
from fractions import Fraction

import numpy as np
import torch

import attnrank

SEED = 7
print(f"seed {SEED}")
torch.manual_seed(SEED)

# The tutorial's target A (0.8 on the diagonal), exactly.
A = [[Fraction(4, 5) if i == j else Fraction(1, 10) for j in range(3)] for i in range(3)]
print("tutorial target: d_k = 1:", attnrank.reach(A, 1)["verdict"], "/ d_k = 2:", attnrank.reach(A, 2)["verdict"])

# A real layer: 2 heads of width 4 on 6 tokens, in float64, without biases.
mha = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True).double()
x = torch.randn(1, 6, 8, dtype=torch.float64)
with torch.no_grad():
    out, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)

w = attnrank.from_torch(mha)  # transposed into attnrank's layout: Q = X W^Q
certified = attnrank.layer(x[0], w["wq"], w["wk"], w["wv"], w["wo"], w["heads"], tier="interval", digits=20)
exact_out = np.array([[float(v) for v in row] for row in certified["output"]])
print("max |torch - exact| over the output:", f"{np.max(np.abs(out[0].numpy() - exact_out)):.2e}")
print("output[0, 0], 20 certified digits:", certified["output"][0][0])

# Head 0's pattern as torch computed it: which widths reproduce it within 1e-9?
pattern = weights[0, 0].numpy()
for d_k in (1, 2, 4):
    r = attnrank.reach(pattern, d_k, epsilon=1e-9)
    print(f"head 0, d_k = {d_k}: exact {r['verdict']}, within 1e-9: {r['epsilon_verdict']}")
