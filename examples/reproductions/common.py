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


def local_keep(n_q, n_k, causal=False, window=None):
    """FlashAttention's causal mask and sliding window (``construct_local_mask``), bottom-right
    aligned (query i at key position i + n_k - n_q): the (n_q, n_k) boolean array of the keys
    each query may attend to. ``window`` is (left, right), -1 unbounded; causal makes right 0."""
    left, right = window if window is not None else (-1, -1)
    if causal:
        right = 0
    p = torch.arange(n_q)[:, None] + (n_k - n_q)
    col = torch.arange(n_k)[None, :]
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if right >= 0:
        keep &= col <= p + right
    if left >= 0:
        keep &= col >= p - left
    return keep


def alibi_bias(slopes, n_q, n_k):
    """FlashAttention's ALiBi bias -slope |i + n_k - n_q - j| (``attn_bias_from_alibi_slopes``),
    float32, shape (B, H, n_q, n_k) for slopes of shape (B, H)."""
    distance = (torch.arange(n_q)[:, None] + (n_k - n_q) - torch.arange(n_k)[None, :]).abs().float()
    return -slopes.float()[:, :, None, None] * distance


def attention_ref(q, k, v, causal, upcast, reorder_ops=False, *, window=None, alibi_slopes=None, softcap=0.0,
                  dropout_mask=None, dropout_p=0.0):
    """FlashAttention's reference (``attention_ref`` of its tests), (B, S, H, d) layout: with
    ``upcast`` float32 arithmetic on the inputs' values and the output rounded back to their dtype
    (out_ref); without it every op in the inputs' dtype (out_pt, "PyTorch in low precision"),
    scaling K instead of Q when ``reorder_ops`` (to estimate the error of reordering, as the tests
    do). Its variants as there: K and V with fewer heads (GQA/MQA: repeated), the causal mask and
    ``window`` (left, right) aligned bottom-right, softcap c tanh(s / c) before the mask and the
    ALiBi bias (``alibi_slopes`` (B, H)), dropout with the given keep-mask (B, H, S_q, S_k) and the
    1 / (1 - p) scale applied to V."""
    dtype_og = q.dtype
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    matmul, softmax, _ = low_precision_ops(q.dtype)
    d = q.shape[-1]
    groups = q.shape[2] // k.shape[2]
    qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, S, d)
    kh, vh = kh.repeat_interleave(groups, dim=1), vh.repeat_interleave(groups, dim=1)
    if reorder_ops:
        scores = matmul(qh, (kh / math.sqrt(d)).transpose(-1, -2))
    else:
        scores = matmul(qh / math.sqrt(d), kh.transpose(-1, -2))
    def rounded(op, x):  # an elementwise op in x's dtype: computed in float32, rounded once (a GPU's way)
        return op(x.float()).to(x.dtype)
    if softcap > 0:
        scores = rounded(lambda x: x / softcap, scores)
        scores = rounded(torch.tanh, scores)
        scores = rounded(lambda x: x * softcap, scores)
    n, m = scores.shape[-2:]
    keep = local_keep(n, m, causal, window)
    scores = scores.masked_fill(~keep, float("-inf"))
    if alibi_slopes is not None:
        bias = alibi_bias(alibi_slopes, n, m).to(scores.dtype)
        scores = rounded(lambda x: x + bias.float(), scores)
    attn = softmax(scores).to(v.dtype)
    # A query row without a key: FlashAttention's attention_ref sets its weights to 0 (no NaN).
    attn = attn.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
    if dropout_mask is not None:
        attn = attn.masked_fill(~dropout_mask.bool(), 0.0)
        vh = rounded(lambda x: x * (1.0 / (1.0 - dropout_p)), vh)
    return matmul(attn, vh).transpose(1, 2).to(dtype_og)


def torch_attention(q, k, v, causal):
    """PyTorch's own CPU attention (scaled_dot_product_attention; 1.13's private one) in the
    inputs' dtype, (B, S, H, d) layout; None when this PyTorch cannot run it in that dtype."""
    return sdpa(*(x.transpose(1, 2) for x in (q, k, v)), None, causal)


def sdpa(qh, kh, vh, attn_mask, causal):
    """PyTorch's scaled_dot_product_attention (1.13's private one) on (B, H, S, d) tensors, the
    result in (B, S, H, d); None when this PyTorch cannot run it in their dtype."""
    try:
        if hasattr(F, "scaled_dot_product_attention"):
            out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=attn_mask, is_causal=causal)
        else:
            out = F._scaled_dot_product_attention(qh, kh, vh, attn_mask, 0.0, False, causal)[0]
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


def blocked_attention(q, k, v, causal, block=64, *, window=None, alibi_slopes=None, softcap=0.0,
                      dropout_mask=None, dropout_p=0.0, p_in_dtype=False, acc_in_dtype=False):
    """A FlashAttention-style kernel in torch, (B, S, H, d) layout: keys in blocks with a running
    max and sum (online softmax), float32 accumulation, the output in the inputs' dtype.
    Differentiable, so autograd gives it a backward pass to test. The variants as FlashAttention
    computes them: K/V heads shared by groups of query heads, the causal mask and ``window``
    bottom-right, softcap then ALiBi on the float32 scores, dropout applied to P after the running
    sum (lse is before dropout) with 1 / (1 - p) at the end. With ``p_in_dtype`` the
    probabilities are rounded to the inputs' dtype before the P V product, as FlashAttention's
    second GEMM (in float16 or bfloat16) does; with ``acc_in_dtype`` the output accumulator is
    rounded to the dtype after every block too (a kernel that keeps it in registers of the input
    type: a precision bug FlashAttention avoids)."""
    dtype = q.dtype
    groups = q.shape[2] // k.shape[2]
    qh, kh, vh = (x.transpose(1, 2).float() for x in (q, k, v))
    kh, vh = kh.repeat_interleave(groups, dim=1), vh.repeat_interleave(groups, dim=1)
    n, d = qh.shape[-2:]
    n_k = kh.shape[-2]
    keep_all = local_keep(n, n_k, causal, window)
    bias = alibi_bias(alibi_slopes, n, n_k) if alibi_slopes is not None else None
    m = torch.full(qh.shape[:-1] + (1,), -float("inf"))
    l = torch.zeros_like(m)
    acc = torch.zeros(qh.shape[:-1] + (vh.shape[-1],))
    for j0 in range(0, n_k, block):
        j1 = min(j0 + block, n_k)
        s = qh @ kh[..., j0:j1, :].transpose(-1, -2) / math.sqrt(d)
        if softcap > 0:
            s = torch.tanh(s / softcap) * softcap
        if bias is not None:
            s = s + bias[..., j0:j1]
        s = s.masked_fill(~keep_all[:, j0:j1], -float("inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # a row with no key yet
        p = torch.exp(s - base)
        correction = torch.exp(m - base)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        if dropout_mask is not None:
            p = p * dropout_mask[..., j0:j1].float()
        if p_in_dtype:
            p = p.to(dtype).float()
        acc = acc * correction + p @ vh[..., j0:j1, :]
        if acc_in_dtype:
            acc = acc.to(dtype).float()
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)  # a row without a key: 0, as FlashAttention's kernel
    if dropout_mask is not None:
        out = out / (1.0 - dropout_p)
    return out.to(dtype).transpose(1, 2)


def torch_attention_variant(q, k, v, causal, *, window=None, alibi_slopes=None, softcap=0.0, dropout_mask=None):
    """PyTorch's own CPU attention for a FlashAttention variant, in the inputs' dtype: the causal
    mask, window and ALiBi bias as one float attn_mask (bottom-right, as FlashAttention), K/V heads
    repeated for GQA. None where PyTorch has no such attention (softcap, a given dropout mask) or
    cannot run it in this dtype."""
    if softcap > 0 or dropout_mask is not None:
        return None
    groups = q.shape[2] // k.shape[2]
    qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
    kh, vh = kh.repeat_interleave(groups, dim=1), vh.repeat_interleave(groups, dim=1)
    n, n_k = qh.shape[-2], kh.shape[-2]
    bias = torch.zeros(1, 1, n, n_k) if alibi_slopes is None else alibi_bias(alibi_slopes, n, n_k)
    bias = bias.masked_fill(~local_keep(n, n_k, causal, window), float("-inf")).to(q.dtype)
    return sdpa(qh, kh, vh, bias, False)


def load(folder, name):
    """Tensor ``name`` of a case folder saved from a GPU run: NAME.pt (torch.save) or NAME.npy."""
    for ext in (".pt", ".npy"):
        path = os.path.join(folder, name + ext)
        if os.path.exists(path):
            return torch.load(path) if ext == ".pt" else torch.from_numpy(np.load(path))
    raise SystemExit(f"{folder}: no {name}.pt or {name}.npy")


def has_saved(folder, name):
    """Whether a case folder holds tensor ``name`` (NAME.pt or NAME.npy)."""
    return any(os.path.exists(os.path.join(folder, name + ext)) for ext in (".pt", ".npy"))


def saved_case_folders(root):
    """The case folders of a GPU run saved under ``root``, in name order: (name, folder, meta),
    meta being the folder's case.json ({} without one)."""
    import json
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isdir(folder):
            continue
        meta = {}
        if os.path.exists(os.path.join(folder, "case.json")):
            with open(os.path.join(folder, "case.json")) as f:
                meta = json.load(f)
        yield name, folder, meta

