"""FlashAttention's variants (softcap, ALiBi, sinks) in attnrank.check_kernel and the pytest
helpers. The oracles are independent of attnrank's code: FlashAttention's reference definitions
written here in torch float64 (attention_ref's order: scale, softcap, ALiBi bias, mask, softmax;
a sink as an extra logit column, the convention of FlashAttention-4 and TransformerEngine), its
autograd for the gradients, and mpmath at 50 digits for one exact output. Seeded
(ATTNRANK_PY_SEED)."""
import os

import mpmath
import numpy as np
import pytest

import attnrank
from attnrank.testing import assert_attention_close, assert_attention_kernel

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261205"))
torch = pytest.importorskip("torch")


def reference(q, k, v, *, softcap=0.0, slopes=None, sinks=None, causal=False, top_left=False):
    """FlashAttention's attention_ref for (B, H, N, d) float tensors, in their dtype."""
    nq, nk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    offset = 0 if top_left else nk - nq
    if slopes is not None:
        slopes_bh = slopes if slopes.dim() == 2 else slopes[None, :].expand(q.shape[0], -1)
        s = s - slopes_bh[:, :, None, None] * (i + offset - j).abs().to(s.dtype)
    if causal:
        s = s.masked_fill(j > i + offset, float("-inf"))
    if sinks is not None:
        sink_column = sinks[None, :, None, None].expand(s.shape[0], -1, nq, 1).to(s.dtype)
        p = torch.softmax(torch.cat([s, sink_column], dim=-1), dim=-1)[..., :nk]
    else:
        p = torch.softmax(s, dim=-1)
    return p @ v


def upper(part, key="max_abs_error"):
    return float(part[key + "_upper"])


def gen(shape, seed, dtype=torch.float64):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape)).to(dtype)


@pytest.mark.parametrize("variant", ["softcap", "alibi", "alibi_per_batch", "sinks", "all", "all_causal"])
def test_float64_reference_is_exact_to_rounding(variant):
    """The float64 reference of each variant is within 1e-13 of attnrank's exact function: the
    conventions (order, alignment, where the sink enters) agree with FlashAttention's."""
    B, H, nq, nk, d = 2, 3, 5, 9, 8
    q, k, v = (gen((B, H, n, d), SEED + i) for i, n in enumerate((nq, nk, nk)))
    slopes = torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)
    if variant == "alibi_per_batch":
        slopes = torch.tensor([[0.5, 0.25, 0.125], [1.0, 2.0 ** -8, 0.0]], dtype=torch.float64)
    sinks = torch.tensor([1.5, -2.0, 0.0], dtype=torch.float64)
    kw, ours = {}, {}
    if variant in ("softcap", "all", "all_causal"):
        kw["softcap"] = ours["softcap"] = 0.7
    if variant.startswith("alibi") or variant.startswith("all"):
        kw["slopes"], ours["alibi_slopes"] = slopes, slopes.numpy()
    if variant in ("sinks", "all", "all_causal"):
        kw["sinks"], ours["sinks"] = sinks, sinks.numpy()
    causal = variant == "all_causal"
    out = reference(q, k, v, causal=causal, **kw)
    check = attnrank.check_kernel(q, k, v, out, mask="causal" if causal else None, **ours)
    assert upper(check["candidate"]) < 1e-13
    # The plain check of the same output sees the variant's difference: the options take effect.
    if variant != "alibi_per_batch":
        plain = attnrank.check_kernel(q, k, v, out, mask="causal" if causal else None)
        assert float(plain["candidate"]["max_abs_error_lower"]) > 1e-4


def test_alibi_alignment_top_left_is_pytorch():
    B, H, nq, nk, d = 1, 2, 4, 7, 4
    q, k, v = (gen((B, H, n, d), SEED + 10 + i) for i, n in enumerate((nq, nk, nk)))
    slopes = torch.tensor([0.5, 0.25], dtype=torch.float64)
    out = reference(q, k, v, slopes=slopes, top_left=True)
    good = attnrank.check_kernel(q, k, v, out, alibi_slopes=slopes, alignment="top-left")
    bad = attnrank.check_kernel(q, k, v, out, alibi_slopes=slopes)
    assert upper(good["candidate"]) < 1e-13
    assert float(bad["candidate"]["max_abs_error_lower"]) > 1e-3
    assert good["alibi_alignment"] == "top-left" and bad["alibi_alignment"] == "bottom-right"


def test_mpmath_oracle_contains_the_error_of_a_float32_variant():
    """One head, softcap 15 (FA3's), ALiBi and a sink: the bands contain the error of a float32
    output against the exact output computed by mpmath at 50 digits."""
    mpmath.mp.dps = 50
    nq, nk, d, c, slope, sink = 3, 5, 4, 15.0, 0.25, 0.75
    q, k, v = (gen((n, d), SEED + 20 + i, torch.float32) for i, n in enumerate((nq, nk, nk)))
    out = reference(q[None, None].double(), k[None, None].double(), v[None, None].double(), softcap=c,
                    slopes=torch.tensor([slope], dtype=torch.float64), sinks=torch.tensor([sink], dtype=torch.float64))
    out32 = out[0, 0].float()
    qm, km, vm = ([[mpmath.mpf(float(x)) for x in row] for row in t.tolist()] for t in (q, k, v))
    worst = mpmath.mpf(0)
    for i in range(nq):
        x = [mpmath.mpf(c) * mpmath.tanh(mpmath.fsum(a * b for a, b in zip(qm[i], km[j])) / 2 / c)
             - slope * abs(i + nk - nq - j) for j in range(nk)]
        den = mpmath.exp(sink) + mpmath.fsum(mpmath.exp(t) for t in x)
        for col in range(d):
            exact = mpmath.fsum(mpmath.exp(x[j]) / den * vm[j][col] for j in range(nk))
            worst = max(worst, abs(mpmath.mpf(float(out32[i, col])) - exact))
    check = attnrank.check_kernel(q, k, v, out32, softcap=c, alibi_slopes=[slope], sinks=[sink])
    lo, hi = float(check["candidate"]["max_abs_error_lower"]), upper(check["candidate"])
    assert lo <= float(worst) * (1 + 1e-12) and float(worst) <= hi * (1 + 1e-12)
    assert hi - lo <= 1e-3 * hi


@pytest.mark.parametrize("variant", ["softcap", "alibi", "sinks", "all"])
def test_gradients_against_torch_autograd(variant):
    """dq, dk, dv and lse of torch's float64 autograd through the reference are within 1e-12 of
    attnrank's exact gradients: the softcap's derivative and the sink's share agree."""
    B, H, nq, nk, d = 1, 2, 6, 6, 4
    q, k, v = (gen((B, H, n, d), SEED + 30 + i).requires_grad_(True) for i, n in enumerate((nq, nk, nk)))
    dout = gen((B, H, nq, d), SEED + 40)
    kw, ours = {}, {}
    if variant in ("softcap", "all"):
        kw["softcap"] = ours["softcap"] = 1.0
    if variant in ("alibi", "all"):
        kw["slopes"] = torch.tensor([0.5, 0.0625], dtype=torch.float64)
        ours["alibi_slopes"] = kw["slopes"].numpy()
    if variant in ("sinks", "all"):
        kw["sinks"] = torch.tensor([0.3, 2.0], dtype=torch.float64)
        ours["sinks"] = kw["sinks"].numpy()
    out = reference(q, k, v, causal=True, **kw)
    out.backward(dout)
    check = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out.detach(), mask="causal", dout=dout,
                                  dq=q.grad, dk=k.grad, dv=v.grad, **ours)
    for key in ("candidate",):
        assert upper(check[key]) < 1e-13
    for key in ("dq", "dk", "dv"):
        assert upper(check[key]["candidate"]) < 1e-12, key
    # A gradient taken without the softcap's derivative is caught.
    if variant == "softcap":
        q2, k2, v2 = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        reference(q2, k2, v2, causal=True).backward(dout)
        wrong = attnrank.check_kernel(q2.detach(), k2.detach(), v2.detach(), mask="causal", dout=dout, dq=q2.grad, **ours)
        assert float(wrong["dq"]["candidate"]["max_abs_error_lower"]) > 1e-4


def online_softmax_kernel(q, k, v, softcap=0.0, slopes=None, sinks=None, block=4):
    """A blocked online-softmax kernel (FlashAttention's algorithm) in float32 with the variants."""
    nq, nk = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=torch.float32)
    den = torch.zeros(q.shape[:-1] + (1,), dtype=torch.float32)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=torch.float32)
    if sinks is not None:  # the sink is a logit of its own: it starts the running max and sum
        m = sinks.float()[None, :, None, None].expand_as(m).clone()
        den = torch.ones_like(den)
    i = torch.arange(nq)[:, None]
    for start in range(0, nk, block):
        kb, vb = k[..., start:start + block, :], v[..., start:start + block, :]
        s = (q @ kb.transpose(-1, -2)) * scale
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        if slopes is not None:
            j = torch.arange(start, start + kb.shape[-2])[None, :]
            s = s - slopes.float()[None, :, None, None] * (i + nk - nq - j).abs().float()
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        correction = torch.exp(m - m_new)
        den = den * correction + p.sum(-1, keepdim=True)
        acc = acc * correction + p @ vb
        m = m_new
    return acc / den


def test_assert_attention_kernel_passes_a_variant_kernel_and_catches_a_wrong_order():
    B, H, n, d = 1, 2, 8, 8
    q, k, v = (gen((B, H, n, d), SEED + 50 + i, torch.float32) for i in range(3))
    slopes = torch.tensor([0.5, 0.25])
    sinks = torch.tensor([1.0, -1.0])
    kernel = lambda q, k, v: online_softmax_kernel(q, k, v, softcap=5.0, slopes=slopes, sinks=sinks)
    checks = assert_attention_kernel(kernel, q, k, v, seed=SEED, max_error=1e-5, grad_max_error=1e-4,
                                     softcap=5.0, alibi_slopes=slopes, sinks=sinks)
    assert set(checks) >= {"out", "dq", "dk", "dv"}
    # The kernel without its sink is proven wrong.
    with pytest.raises(AssertionError, match="not proven close"):
        assert_attention_close(online_softmax_kernel(q, k, v, softcap=5.0, slopes=slopes), q, k, v,
                               max_error=1e-5, softcap=5.0, alibi_slopes=slopes, sinks=sinks)


def test_bad_variants_are_value_errors():
    q = np.zeros((2, 4, 3))
    with pytest.raises(ValueError, match="softcap -1"):
        attnrank.check_kernel(q, q, q, q, softcap=-1.0)
    with pytest.raises(ValueError, match=r"ALiBi slopes.*shape \(3, 1\).*H = 2"):
        attnrank.check_kernel(q, q, q, q, alibi_slopes=[0.5, 0.25, 0.125])
    with pytest.raises(ValueError, match=r"sinks: shape \(1, 2\) has 2 dimensions; it needs \(H,\)"):
        attnrank.check_kernel(q[None], q[None], q[None], q[None], sinks=np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"alibi_slopes: .*it needs \(H,\) or \(B, H\)"):
        attnrank.check_kernel(q, q, q, q, alibi_slopes=np.zeros((1, 1, 2)))
    with pytest.raises(ValueError, match="not finite"):
        attnrank.check_kernel(q, q, q, q, sinks=[0.0, float("nan")])


def test_a_mask_per_head():
    """PyTorch's boolean attn_mask of shape (B, H, N_q, N_k) and (H, N_q, N_k): each head under its
    own pattern; the same output under the first head's mask for all is proven wrong."""
    B, H, nq, nk, d = 2, 3, 4, 6, 4
    q, k, v = (gen((B, H, n, d), SEED + 60 + i) for i, n in enumerate((nq, nk, nk)))
    rng = np.random.default_rng(SEED)
    allowed = torch.from_numpy(rng.random((B, H, nq, nk)) < 0.6)
    allowed[..., 0] = True  # every query row allows a key
    s = (q @ k.transpose(-1, -2) / d ** 0.5).masked_fill(~allowed, float("-inf"))
    out = torch.softmax(s, -1) @ v
    check = attnrank.check_kernel(q, k, v, out, mask=allowed)
    assert check["mask"] == "per-head" and upper(check["candidate"]) < 1e-13
    one = attnrank.check_kernel(q, k, v, out, mask=allowed[0, 0])
    assert float(one["candidate"]["max_abs_error_lower"]) > 1e-3
    # (H, N_q, N_k) serves every batch.
    shared = allowed[0]
    out2 = torch.softmax((q @ k.transpose(-1, -2) / d ** 0.5).masked_fill(~shared, float("-inf")), -1) @ v
    assert upper(attnrank.check_kernel(q, k, v, out2, mask=shared)["candidate"]) < 1e-13
    with pytest.raises(ValueError, match=r"per-head masks mask has shape \(2, 4, 6\)"):
        attnrank.check_kernel(q, k, v, out, mask=allowed[:, 0])
    with pytest.raises(ValueError, match="not both"):
        attnrank.check_kernel(q, k, v, out, mask=allowed, window_size=(1, 0))


def test_an_additive_bias_with_masked_entries():
    """PyTorch's float attn_mask: added to the scores after the softcap; -inf entries mask their
    keys (alone, with causal, with a per-head boolean mask). Forward and autograd gradients."""
    B, H, nq, nk, d = 1, 2, 5, 5, 4
    q, k, v = (gen((B, H, n, d), SEED + 70 + i).requires_grad_(True) for i, n in enumerate((nq, nk, nk)))
    bias = gen((H, nq, nk), SEED + 80)
    bias[0, 1, 2] = float("-inf")
    bias[1, 3, 0] = float("-inf")
    dout = gen((B, H, nq, d), SEED + 81)
    s = 2.0 * torch.tanh(q @ k.transpose(-1, -2) / d ** 0.5 / 2.0) + bias
    causal = torch.ones(nq, nk, dtype=torch.bool).tril()
    out = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
    out.backward(dout)
    check = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out.detach(), mask="causal", softcap=2.0,
                                  attn_bias=bias, dout=dout, dq=q.grad, dk=k.grad, dv=v.grad)
    assert check["mask"] == "causal and the bias's -inf entries" and check["bias"] == "attn_bias"
    assert upper(check["candidate"]) < 1e-13
    for key in ("dq", "dk", "dv"):
        assert upper(check[key]["candidate"]) < 1e-12, key
    # Without the bias the same output is far off; a (N_q, N_k) bias serves every head.
    assert float(attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out.detach(), mask="causal",
                                       softcap=2.0)["candidate"]["max_abs_error_lower"]) > 1e-3
    shared = bias[1]
    out2 = torch.softmax(q.detach() @ k.detach().transpose(-1, -2) / d ** 0.5 + shared, -1) @ v.detach()
    assert upper(attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out2, attn_bias=shared)["candidate"]) < 1e-13
    with pytest.raises(ValueError, match=r"\[0, 1\] \(0-based\) is inf"):
        bad = shared.clone()
        bad[0, 1] = float("inf")
        attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out2, attn_bias=bad)
    with pytest.raises(ValueError, match="allows no key"):
        empty = shared.clone()
        empty[2, :] = float("-inf")
        attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out2, attn_bias=empty)


def fp8_e4m3_values(codes):
    """OCP E4M3 ("fn") decoded from its fields, written here: bias 7, subnormals m 2^-9."""
    codes = np.asarray(codes, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 0xF, codes & 0x7
    return sign * np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7))


def test_fp8_codes_with_descales():
    """uint8 codes read as float8_e4m3fn (subnormals and 448 included), FlashAttention-3's
    descales applied exactly: a float64 reference of the decoded values is within 1e-13; the
    same codes read as integers, or without the descales, are far off."""
    B, H, H_kv, n, d = 1, 4, 2, 6, 8
    rng = np.random.default_rng(SEED)
    codes = {name: rng.integers(0, 256, (B, h, n, d)).astype(np.uint8) for name, h in (("q", H), ("k", H_kv), ("v", H_kv))}
    for c in codes.values():
        c[(c & 0x7F) == 0x7F] = 0x01  # no NaN codes; the smallest subnormal instead
    codes["q"][0, 0, 0, 0] = 0x7E  # 448, the largest
    descale = {"q": np.array([[0.015625, 0.5]], dtype=np.float32), "k": np.array([[0.25, 1.0]], dtype=np.float32),
               "v": np.array([[2.0, 0.125]], dtype=np.float32)}
    vals = {}
    for name, c in codes.items():
        x = fp8_e4m3_values(c)
        f = descale[name][0].astype(np.float64)
        vals[name] = x * (np.repeat(f, H // H_kv) if name == "q" else f)[None, :, None, None]
    kk, vv = (np.repeat(vals[x], H // H_kv, axis=1) for x in ("k", "v"))
    s = vals["q"] @ np.swapaxes(kk, -1, -2) / np.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    out = (p / p.sum(-1, keepdims=True)) @ vv
    kw = dict(fp8_format="e4m3", q_descale=descale["q"], k_descale=descale["k"], v_descale=descale["v"])
    check = attnrank.check_kernel(codes["q"], codes["k"], codes["v"], out, **kw)
    assert upper(check["candidate"]) < 1e-12 * max(1.0, float(np.abs(out).max()))
    assert check["fp8_format"] == "e4m3" and check["descaled"] == ["q", "k", "v"]
    as_integers = attnrank.check_kernel(codes["q"], codes["k"], codes["v"], out, q_descale=descale["q"],
                                        k_descale=descale["k"], v_descale=descale["v"])
    assert float(as_integers["candidate"]["max_abs_error_lower"]) > 1e-3
    no_descale = attnrank.check_kernel(codes["q"], codes["k"], codes["v"], out, fp8_format="e4m3")
    assert float(no_descale["candidate"]["max_abs_error_lower"]) > 1e-3
    with pytest.raises(ValueError, match="not exactly a double"):
        attnrank.check_kernel(codes["q"], codes["k"], codes["v"], out, fp8_format="e4m3",
                              q_descale=np.array([[0.1, 0.1]]))  # a double, not a float32: products round
    with pytest.raises(ValueError, match="not uint8 codes"):
        attnrank.check_kernel(vals["q"], kk, vv, out, fp8_format="e4m3")
    with pytest.raises(ValueError, match="'e3m4' is not e4m3"):
        attnrank.check_kernel(codes["q"], codes["k"], codes["v"], out, fp8_format="e3m4")
    with pytest.raises(ValueError, match=r"q_descale .*has shape \(3, 1\) but K"):
        attnrank.check_kernel(codes["q"], codes["k"], codes["v"], out, fp8_format="e4m3", q_descale=[1.0, 1.0, 1.0])


@pytest.mark.skipif(not os.environ.get("ATTNRANK_CLI"), reason="ATTNRANK_CLI (the attnrank command) is not set")
def test_fp8_safetensors_through_the_cli(tmp_path):
    """A GPU run's safetensors file with F8_E4M3 q, k, v (written by hand: Debian has no
    safetensors package) and a float32 output: --from reads the codes exactly."""
    import json
    import subprocess
    rng = np.random.default_rng(SEED + 1)
    n, d = 5, 4
    codes = {name: rng.integers(0, 0x7E, (1, n, d)).astype(np.uint8) for name in ("q", "k", "v")}
    x = {name: fp8_e4m3_values(c) for name, c in codes.items()}
    s = x["q"] @ np.swapaxes(x["k"], -1, -2) / np.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    out = ((p / p.sum(-1, keepdims=True)) @ x["v"]).astype(np.float32)
    header, blobs, offset = {}, b"", 0
    for name, array, dtype in [(k, c, "F8_E4M3") for k, c in codes.items()] + [("out", out, "F32")]:
        data = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs += data
        offset += len(data)
    text = json.dumps(header).encode()
    path = tmp_path / "run.safetensors"
    path.write_bytes(len(text).to_bytes(8, "little") + text + blobs)
    r = subprocess.run([os.environ["ATTNRANK_CLI"], "check-kernel", "--from", str(path), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert float(doc["candidate"]["max_abs_error_upper"]) < 1e-6  # float32 rounding of the output


@pytest.mark.parametrize("dropout_p", [0.1, 0.5])
def test_dropout_with_the_kernels_keep_mask(dropout_p):
    """FlashAttention's dropout: O = (P o Z) V / (1 - p) with the kernel's keep-mask Z; torch
    float64 autograd's gradients through it agree; without the 1 / (1 - p) it is proven wrong."""
    B, H, nq, nk, d = 2, 2, 5, 7, 4
    q, k, v = (gen((B, H, n, d), SEED + 90 + i).requires_grad_(True) for i, n in enumerate((nq, nk, nk)))
    dout = gen((B, H, nq, d), SEED + 95)
    keep = torch.from_numpy(np.random.default_rng(SEED).random((B, H, nq, nk)) >= dropout_p)
    p = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, -1)
    out = (p * keep / (1 - dropout_p)) @ v
    out.backward(dout)
    check = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out.detach(), dropout_mask=keep,
                                  dropout_p=dropout_p, dout=dout, dq=q.grad, dk=k.grad, dv=v.grad)
    assert check["dropout_p"] == str(dropout_p)
    assert upper(check["candidate"]) < 1e-13
    for key in ("dq", "dk", "dv"):
        assert upper(check[key]["candidate"]) < 1e-12, key
    unscaled = ((p * keep) @ v).detach()
    wrong = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), unscaled, dropout_mask=keep, dropout_p=dropout_p)
    assert float(wrong["candidate"]["max_abs_error_lower"]) > 1e-3
    with pytest.raises(ValueError, match="needs the kernel's dropout mask"):
        attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out.detach(), dropout_p=dropout_p)
    with pytest.raises(ValueError, match=r"dropout_p 1 is not in \[0, 1\)"):
        attnrank.check_kernel(q.detach(), k.detach(), v.detach(), out.detach(), dropout_mask=keep, dropout_p=1.0)


def gqa_reference(q, k, v, *, sinks, softcap=0.0, causal=False):
    """The reference with K/V heads repeated for grouped queries (FlashAttention's MQA/GQA)."""
    group = q.shape[1] // k.shape[1]
    return reference(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), sinks=sinks, softcap=softcap,
                     causal=causal)


@pytest.mark.parametrize("batches,heads,kv_heads,causal,softcap", [(1, 1, 1, False, 0.0), (3, 2, 2, True, 0.0),
                                                                    (2, 4, 1, False, 30.0), (2, 4, 2, True, 1.0)])
def test_sink_gradient_against_torch_autograd(batches, heads, kv_heads, causal, softcap):
    """A learnable (H,) sink's autograd gradient (summed over the batches) is within rounding of
    attnrank's exact dsinks; one batch's share alone, or the sign flipped, is proven wrong."""
    nq, nk, d = 5, 7, 4
    q = gen((batches, heads, nq, d), SEED + 60)
    k, v = (gen((batches, kv_heads, nk, d), SEED + 61 + i) for i in range(2))
    dout = gen((batches, heads, nq, d), SEED + 63)
    sinks = torch.linspace(-1.5, 2.5, heads, dtype=torch.float64).requires_grad_(True)
    gqa_reference(q, k, v, sinks=sinks, softcap=softcap, causal=causal).backward(dout)
    kw = dict(mask="causal" if causal else None, softcap=softcap, sinks=sinks.detach(), dout=dout)
    check = attnrank.check_kernel(q, k, v, dsinks=sinks.grad, **kw)
    assert upper(check["dsinks"]["candidate"], "max_rel_error") < 1e-13
    assert set(check) >= {"dsinks", "backward"} and "dq" not in check
    # The first batch's share only (a kernel that forgot to sum over the batch).
    s1 = sinks.detach().clone().requires_grad_(True)
    gqa_reference(q[:1], k[:1], v[:1], sinks=s1, softcap=softcap, causal=causal).backward(dout[:1])
    if batches > 1:
        wrong = attnrank.check_kernel(q, k, v, dsinks=s1.grad, **kw)
        assert float(wrong["dsinks"]["candidate"]["max_abs_error_lower"]) > 1e-6
    flipped = attnrank.check_kernel(q, k, v, dsinks=-sinks.grad, **kw)
    assert float(flipped["dsinks"]["candidate"]["max_abs_error_lower"]) > 1e-6


def test_sink_gradient_of_packed_sequences_and_the_helper():
    """Packed sequences: the sink's gradient sums over the sequences; the float32 kernel's passes
    the pytest helper with float32's tolerance, a wrong one fails it naming dsinks and its head."""
    H, d, lengths = 2, 4, (3, 6)
    sinks = torch.tensor([0.5, -1.0], dtype=torch.float32, requires_grad=True)
    qs, ks, vs, dos = [], [], [], []
    for b, n in enumerate(lengths):
        q, k, v = (gen((1, H, n, d), SEED + 70 + 4 * b + i, torch.float32) for i in range(3))
        dout = gen((1, H, n, d), SEED + 73 + 4 * b, torch.float32)
        reference(q, k, v, sinks=sinks, causal=True).backward(dout)
        qs.append(q); ks.append(k); vs.append(v); dos.append(dout)
    packed = lambda parts: torch.cat([p[0].transpose(0, 1) for p in parts], 0)  # (total, H, d)
    cu = torch.tensor([0, lengths[0], sum(lengths)], dtype=torch.int32)
    from attnrank.testing import assert_attention_grads_close
    checks = assert_attention_grads_close(None, None, None, packed(qs), packed(ks), packed(vs), packed(dos),
                                          causal=True, sinks=sinks.detach(), dsinks=sinks.grad,
                                          cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert upper(checks["dsinks"]["candidate"]) < 1e-5
    wrong = sinks.grad.clone()
    wrong[1] += 1e-2
    with pytest.raises(AssertionError, match=r"(?s)dsinks.*largest proven error at head 1 \(0-based\)"):
        assert_attention_grads_close(None, None, None, packed(qs), packed(ks), packed(vs), packed(dos), causal=True,
                                     sinks=sinks.detach(), dsinks=wrong, cu_seqlens_q=cu, cu_seqlens_k=cu)


def test_sink_gradient_misuse_is_a_value_error():
    q = np.zeros((2, 4, 3))
    with pytest.raises(ValueError, match="dsinks needs the sinks"):
        attnrank.check_kernel(q, q, q, dout=q, dsinks=[0.0, 0.0])
    with pytest.raises(ValueError, match="need --dout|need dout"):
        attnrank.check_kernel(q, q, q, sinks=[0.0, 0.0], dsinks=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"holds 3 values .* but Q .* has H = 2"):
        attnrank.check_kernel(q, q, q, dout=q, sinks=[0.0, 0.0], dsinks=[0.0, 0.0, 0.0])


def flash_reference_with_empty_rows(q, k, v, sinks=None):
    """FlashAttention's bottom-right causal attention when N_q > N_k: a query row without a key
    has the output 0, lse +inf (the sink with one) and no gradient. Written without NaN: such a
    row's scores are set to 0 and its weights multiplied by 0."""
    nq, nk = q.shape[-2], k.shape[-2]
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    allowed = j <= i + nk - nq
    has_key = allowed.any(-1)[:, None]
    s = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(~allowed, float("-inf"))
    if sinks is not None:  # the sink's column keeps every row's softmax finite
        column = sinks[None, :, None, None].expand(s.shape[0], -1, nq, 1).to(s.dtype)
        full = torch.cat([s, column], -1)
        p = torch.softmax(full, -1)[..., :nk]
        lse = torch.logsumexp(full, -1)
    else:
        s = torch.where(has_key, s, torch.zeros_like(s))
        p = torch.softmax(s, -1) * has_key
        lse = torch.where(has_key[:, 0], torch.logsumexp(s, -1), torch.full_like(s[..., 0], float("inf")))
    return p @ v, lse


@pytest.mark.parametrize("with_sink", [False, True])
def test_rows_without_a_key_have_flashattentions_zero(with_sink):
    """empty_rows="zero": causal bottom-right with N_q > N_k leaves rows without a key; torch's
    float64 autograd of FlashAttention's convention agrees with attnrank's exact values to
    1e-13 (output, dq, dk, dv, lse, dsinks); refused by default; garbage in such a row and a
    finite lse there are proven wrong; PyTorch math's NaN rows are reported, not skipped."""
    B, H, nq, nk, d = 1, 2, 6, 3, 4
    q, k, v = (gen((B, H, n, d), SEED + 80 + i).requires_grad_(True) for i, n in enumerate((nq, nk, nk)))
    dout = gen((B, H, nq, d), SEED + 83)
    sinks = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True) if with_sink else None
    out, lse = flash_reference_with_empty_rows(q, k, v, sinks)
    out.backward(dout)
    if with_sink:
        assert (lse[0, :, :3] == sinks.detach()[:, None]).all()  # exactly the sink
    else:
        assert torch.isinf(lse[0, 0, :3]).all() and (lse[0, 0, :3] > 0).all()
    kw = dict(mask="causal", dout=dout, dq=q.grad, dk=k.grad, dv=v.grad, lse=lse.detach())
    if with_sink:
        kw.update(sinks=sinks.detach(), dsinks=sinks.grad)
    args = (q.detach(), k.detach(), v.detach(), out.detach())
    with pytest.raises(ValueError, match="allows no key"):
        attnrank.check_kernel(*args, **kw)
    check = attnrank.check_kernel(*args, empty_rows="zero", **kw)
    assert check["empty_rows"] == {"convention": "zero", "rows": 2 * 3}
    assert upper(check["candidate"]) < 1e-13
    for key in ("dq", "dk", "dv", "lse") + (("dsinks",) if with_sink else ()):
        assert upper(check[key]["candidate"]) < 1e-12, key
    garbage = out.detach().clone()
    garbage[0, 1, 2, 3] = 0.25
    wrong_lse = lse.detach().clone()
    wrong_lse[0, 0, 0] = 0.0  # finite where the exact value is +inf (or off the sink)
    sink_kw = {"sinks": sinks.detach()} if with_sink else {}
    bad = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), garbage, mask="causal", lse=wrong_lse,
                                empty_rows="zero", **sink_kw)
    assert float(bad["candidate"]["max_abs_error_lower"]) > 0.2
    assert bad["candidate"]["worst"] == {"batch": 0, "head": 1, "row": 2, "column": 3}
    if with_sink:  # the sink's value, 0.5, missed by 0.5
        assert float(bad["lse"]["candidate"]["max_abs_error_lower"]) > 0.49
    else:
        assert bad["lse"]["candidate"]["infinity_missed"] == 1 and bad["lse"]["candidate"]["max_abs_error_lower"] == "inf"
    nan_rows = out.detach().clone()
    nan_rows[:, :, :3] = float("nan")  # what PyTorch's math backend returns there
    reported = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), nan_rows, mask="causal", empty_rows="zero",
                                     **sink_kw)
    assert reported["candidate"]["nonfinite"] == 2 * 3 * d


def test_assert_attention_close_with_empty_rows():
    B, H, nq, nk, d = 1, 1, 5, 2, 4
    q, k, v = (gen((B, H, n, d), SEED + 90 + i, torch.float32) for i, n in enumerate((nq, nk, nk)))
    out, _ = flash_reference_with_empty_rows(q, k, v)
    checks = assert_attention_close(out, q, k, v, causal=True, empty_rows="zero", max_error=1e-6)
    assert checks["empty_rows"]["rows"] == 3
    with pytest.raises(ValueError, match="allows no key"):
        assert_attention_close(out, q, k, v, causal=True, max_error=1e-6)
