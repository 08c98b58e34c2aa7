#!/usr/bin/python3
"""Peers for bench/loaded-layer: the (64, 64, 8) double forward pass in NumPy (OpenBLAS)
and in PyTorch (float64), on the CSV inputs `layer_bench --write-inputs` wrote, timed the
way loaded-layer times attnrank: 150 repetitions, each the mean of a loop of >= 10 ms.

Usage: loaded_peers.py DIR LABEL      prints one line per peer: median, p95, max (ms)
Needs Debian's python3-numpy and python3-torch; run with /usr/bin/python3.
"""
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
from layer_peers import loop_means_ms, numpy_forward, read  # noqa: E402


def torch_forward(torch, x, wq, wk, wv, wo, heads):
    q, k, v = x @ wq, x @ wk, x @ wv
    dk, dv = wq.shape[1] // heads, wv.shape[1] // heads
    zs = []
    for h in range(heads):
        s = q[:, h * dk:(h + 1) * dk] @ k[:, h * dk:(h + 1) * dk].T / dk ** 0.5
        zs.append(torch.softmax(s, dim=1) @ v[:, h * dv:(h + 1) * dv])
    return torch.cat(zs, dim=1) @ wo


def repetitions(fn):
    return sorted(loop_means_ms(fn, 150, 0.01))


def line(label, t):
    print(f"{label:44} median {t[len(t) // 2]:7.3f}   p95 {t[int(len(t) * .95)]:7.3f}   max {t[-1]:7.3f}")


def main():
    d, label = sys.argv[1], sys.argv[2]
    m = [np.array(read(f"{d}/{n}.csv"), dtype=float) for n in ("x", "wq", "wk", "wv", "wo")]
    line(f"{label}: NumPy {np.__version__} (OpenBLAS)", repetitions(lambda: numpy_forward(*m, 8)))
    try:
        import torch
    except ImportError:
        print(f"{label}: PyTorch not installed (python3-torch)")
        return
    t = [torch.from_numpy(a) for a in m]
    with torch.no_grad():
        line(f"{label}: PyTorch {torch.__version__} ({torch.get_num_threads()} threads)",
             repetitions(lambda: torch_forward(torch, *t, 8)))


if __name__ == "__main__":
    main()
