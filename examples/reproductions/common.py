"""Shared pieces of the reproductions (docs/reproductions.md): the attention
implementations being judged, torch-version shims, and a small SVG plotter.

Run the scripts with Debian's Python and the built module on the path:
    PYTHONPATH=build/python /usr/bin/python3 examples/reproductions/<script>.py --help
"""
import math
import os

import numpy as np
import torch

F = torch.nn.functional


def low_precision_ops(dtype):
    """matmul and softmax "in ``dtype``" on this CPU. Each op rounds its result to ``dtype``.
    PyTorch has no float16 GEMM on some CPUs (1.13: "addmm_impl_cpu_ not implemented for
    'Half'"); there the op computes in float32 from the float16 operands and rounds its result
    to float16, which is what cuBLAS does for float16 tensors (float32 accumulation). The
    second value names what ran."""
    try:
        a = torch.ones(2, 2, dtype=dtype)
        torch.matmul(a, a)
        torch.softmax(a, dim=-1)
        return torch.matmul, (lambda x: torch.softmax(x, dim=-1)), "native"
    except RuntimeError:
        def matmul(a, b):
            return torch.matmul(a.float(), b.float()).to(dtype)

        def softmax(x):
            return torch.softmax(x.float(), dim=-1).to(dtype)
        return matmul, softmax, "float32 ops rounded to float16 (no CPU half GEMM in this PyTorch)"


def attention_ref(q, k, v, causal, upcast, reorder_ops=False):
    """FlashAttention's reference, (B, S, H, d) layout: with ``upcast`` float32 arithmetic on the
    inputs' values and the output rounded back to their dtype (out_ref); without it every op in
    the inputs' dtype (out_pt, "PyTorch in low precision"), scaling K instead of Q when
    ``reorder_ops`` (to estimate the error of reordering, as the tests do)."""
    dtype_og = q.dtype
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    matmul, softmax, _ = low_precision_ops(q.dtype)
    d = q.shape[-1]
    qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, S, d)
    if reorder_ops:
        scores = matmul(qh, (kh / math.sqrt(d)).transpose(-1, -2))
    else:
        scores = matmul(qh / math.sqrt(d), kh.transpose(-1, -2))
    if causal:
        n, m = scores.shape[-2:]
        keep = torch.ones(n, m, dtype=torch.bool).tril(m - n)  # bottom-right aligned, as FlashAttention
        scores = scores.masked_fill(~keep, float("-inf"))
    attn = softmax(scores).to(v.dtype)
    return matmul(attn, vh).transpose(1, 2).to(dtype_og)


def torch_attention(q, k, v, causal):
    """PyTorch's own CPU attention (scaled_dot_product_attention; 1.13's private one) in the
    inputs' dtype, (B, S, H, d) layout; None when this PyTorch cannot run it in that dtype."""
    qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
    try:
        if hasattr(F, "scaled_dot_product_attention"):
            out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
        else:
            out = F._scaled_dot_product_attention(qh, kh, vh, None, 0.0, False, causal)[0]
    except RuntimeError:
        return None
    return out.transpose(1, 2)


def certified(attnrank, q, k, v, out, causal, reference=None):
    """attnrank.check_kernel on (B, S, H, d) tensors (FlashAttention's layout)."""
    t = [x.transpose(1, 2) for x in (q, k, v, out)]
    ref = None if reference is None else reference.transpose(1, 2)
    return attnrank.check_kernel(*t, ref, mask="causal" if causal else None)


def doublings(first, last):
    """first, 2 first, 4 first, ... up to last: the sizes a sweep runs over."""
    sizes = []
    while first <= last:
        sizes.append(first)
        first *= 2
    return sizes


def max_diff(a, b):
    """max |a - b| as FlashAttention's tests compute it, but in float64 (exact for inputs of
    float32 or narrower: the difference of two such numbers is a double)."""
    return float((a.double() - b.double()).abs().max())


def svg_plot(path, series, *, xlabel, ylabel, title, logx=True, logy=True, xticks=None):
    """A small line plot: ``series`` is [(label, xs, ys, colour)], ys may be (lo, hi) pairs (a
    band, drawn as its upper end with the lower as a second thin line). No plotting library."""
    W, H, L, R, T, B = 720, 400, 80, 230, 40, 56
    tx = (lambda x: math.log10(x)) if logx else (lambda x: x)
    ty = (lambda y: math.log10(y)) if logy else (lambda y: y)
    xs = [tx(x) for _, X, _, _ in series for x in X]
    ys = [ty(y) for _, _, Y, _ in series for yy in Y for y in (yy if isinstance(yy, tuple) else (yy,))]
    x0, x1 = min(xs), max(xs)
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys)) if logy else max(ys)
    if not logy:
        y0 = 0
    if y1 == y0:
        y1 = y0 + 1

    def px(x):
        return L + (tx(x) - x0) / ((x1 - x0) or 1) * (W - L - R)

    def py(y):
        return T + (1 - (ty(y) - y0) / (y1 - y0)) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="12"><rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{(L + W - R) / 2}" y="{H - 14}" text-anchor="middle">{xlabel}</text>',
           f'<text x="18" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 18 '
           f'{(T + H - B) / 2})">{ylabel}</text>']
    for x in xticks or sorted({x for _, X, _, _ in series for x in X}):
        out.append(f'<line x1="{px(x):.1f}" y1="{H - B}" x2="{px(x):.1f}" y2="{H - B + 5}" stroke="black"/>'
                   f'<text x="{px(x):.1f}" y="{H - B + 18}" text-anchor="middle">{x:g}</text>')
    ticks = range(int(y0), int(y1) + 1) if logy else np.linspace(y0, y1, 5)
    for e in ticks:
        y = 10.0 ** e if logy else e
        label = f"1e{int(e)}" if logy else f"{y:g}"
        out.append(f'<line x1="{L - 5}" y1="{py(y):.1f}" x2="{W - R}" y2="{py(y):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{label}</text>')
    for n, (label, X, Y, colour) in enumerate(series):
        ends = [(yy if isinstance(yy, tuple) else (yy, yy)) for yy in Y]
        for k, width in ((1, 2), (0, 1)):
            pts = " ".join(f"{px(x):.1f},{py(e[k]):.1f}" for x, e in zip(X, ends))
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="{width}"/>')
        for x, e in zip(X, ends):
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(e[1]):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<rect x="{W - R + 12}" y="{T + 18 * n}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{W - R + 30}" y="{T + 18 * n + 10}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def blocked_attention(q, k, v, causal, block=64):
    """A FlashAttention-style kernel in torch, (B, S, H, d) layout: keys in blocks with a running
    max and sum (online softmax), float32 accumulation, the output in the inputs' dtype.
    Differentiable, so autograd gives it a backward pass to test."""
    dtype = q.dtype
    qh, kh, vh = (x.transpose(1, 2).float() for x in (q, k, v))
    n, d = qh.shape[-2:]
    m = torch.full(qh.shape[:-1] + (1,), -float("inf"))
    l = torch.zeros_like(m)
    acc = torch.zeros(qh.shape[:-1] + (vh.shape[-1],))
    for j0 in range(0, kh.shape[-2], block):
        s = qh @ kh[..., j0:j0 + block, :].transpose(-1, -2) / math.sqrt(d)
        if causal:
            keep = torch.arange(n)[:, None] + (kh.shape[-2] - n) >= torch.arange(j0, j0 + s.shape[-1])[None, :]
            s = s.masked_fill(~keep, -float("inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        correction = torch.exp(m - m_new)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ vh[..., j0:j0 + block, :]
        m = m_new
    return (acc / l).to(dtype).transpose(1, 2)


def load(folder, name):
    """Tensor ``name`` of a case folder saved from a GPU run: NAME.pt (torch.save) or NAME.npy."""
    for ext in (".pt", ".npy"):
        path = os.path.join(folder, name + ext)
        if os.path.exists(path):
            return torch.load(path) if ext == ".pt" else torch.from_numpy(np.load(path))
    raise SystemExit(f"{folder}: no {name}.pt or {name}.npy")
