"""The backward pass: attnrank.check_kernel's gradient and logsumexp bands against an mpmath
oracle at 60 digits, assert_attention_grads_close and assert_attention_kernel on correct and
broken kernels, and FlashAttention's rule with its floor. Seeded (ATTNRANK_PY_SEED)."""
import os

import mpmath
import numpy as np
import pytest

import attnrank
from attnrank.testing import assert_attention_grads_close, assert_attention_kernel

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))
torch = pytest.importorskip("torch")


def rand(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def band(part, key):
    return float(part[key + "_lower"]), float(part[key + "_upper"])


def mp_forward(q, k, v, scale, causal):
    """O, P and lse of one head in mpmath (inputs taken exactly)."""
    n, m = len(q), len(k)
    S = [[scale * mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(q[i], k[j]))
          for j in range(m)] for i in range(n)]
    lse, P = [], []
    for i in range(n):
        keys = [j for j in range(m) if not causal or j <= i]
        lse.append(mpmath.log(mpmath.fsum(mpmath.exp(S[i][j]) for j in keys)))
        P.append([mpmath.exp(S[i][j] - lse[i]) if j in keys else mpmath.mpf(0) for j in range(m)])
    O = [[mpmath.fsum(P[i][j] * mpmath.mpf(float(v[j][l])) for j in range(m)) for l in range(len(v[0]))]
         for i in range(n)]
    return O, P, lse


def mp_dq_by_differences(q, k, v, dout, scale, causal):
    """dQ by central differences of <dout, O(q)> at 60 digits: independent of the backward formulas."""
    h = mpmath.mpf(10) ** -25
    out = []
    for i in range(len(q)):
        row = []
        for c in range(len(q[0])):
            vals = []
            for sign in (1, -1):
                qq = [[mpmath.mpf(float(x)) for x in r] for r in q]
                qq[i][c] += sign * h
                O, _, _ = mp_forward_mp(qq, k, v, scale, causal)
                vals.append(mpmath.fsum(O[a][b] * mpmath.mpf(float(dout[a][b])) for a in range(len(O))
                                        for b in range(len(O[0]))))
            row.append((vals[0] - vals[1]) / (2 * h))
        out.append(row)
    return out


def mp_forward_mp(q, k, v, scale, causal):
    n, m = len(q), len(k)
    S = [[scale * mpmath.fsum(q[i][c] * mpmath.mpf(float(k[j][c])) for c in range(len(q[0]))) for j in range(m)]
         for i in range(n)]
    out = []
    for i in range(n):
        keys = [j for j in range(m) if not causal or j <= i]
        z = mpmath.fsum(mpmath.exp(S[i][j]) for j in keys)
        out.append([mpmath.fsum(mpmath.exp(S[i][j]) / z * mpmath.mpf(float(v[j][l])) for j in keys)
                    for l in range(len(v[0]))])
    return out, None, None


@pytest.mark.parametrize("causal", [False, True])
def test_bands_contain_the_true_errors_of_float32_gradients_against_mpmath_at_60_digits(causal):
    mpmath.mp.dps = 60
    n, d = 5, 3
    q, k, v, dout = (rand((n, d), SEED + i) for i in range(4))
    q32 = [x.astype(np.float32).astype(np.float64) for x in (q, k, v, dout)]
    q, k, v, dout = q32
    scale = mpmath.mpf(1) / mpmath.sqrt(d)
    O, P, lse = mp_forward(q, k, v, scale, causal)
    D = [mpmath.fsum(O[i][l] * mpmath.mpf(float(dout[i][l])) for l in range(d)) for i in range(n)]
    dV = [[mpmath.fsum(P[i][j] * mpmath.mpf(float(dout[i][l])) for i in range(n)) for l in range(d)] for j in range(n)]
    dQ = mp_dq_by_differences(q, k, v, dout, scale, causal)
    assert D  # the D term is inside the difference quotient: nothing of the backward formulas is reused
    cand = {"dq": np.array([[float(x) for x in r] for r in dQ], dtype=np.float32),
            "dv": np.array([[float(x) for x in r] for r in dV], dtype=np.float32),
            "lse": np.array([float(x) for x in lse], dtype=np.float32)}
    cand["dq"][1, 2] += np.float32(1e-3)  # a planted error of known size
    exact = {"dq": dQ, "dv": dV, "lse": [[x] for x in lse]}
    r = attnrank.check_kernel(q, k, v, dout=dout, mask="causal" if causal else None, **cand)
    for key, values in cand.items():
        true = max(abs(mpmath.mpf(float(a)) - b) for a, b in
                   zip(np.asarray(values, dtype=np.float64).reshape(-1), (x for row in exact[key] for x in row)))
        lo, hi = band(r[key]["candidate"], "max_abs_error")
        assert lo <= float(true) * (1 + 1e-12) and float(true) <= hi * (1 + 1e-12), (key, lo, float(true), hi)
    assert band(r["dq"]["candidate"], "max_abs_error")[0] >= 0.9e-3


def test_grads_close_passes_float32_autograd_and_fails_bfloat16_at_1e_4_with_bands_and_the_worst_entry():
    q, k, v, dout = (torch.from_numpy(rand((1, 2, 32, 8), SEED + i, np.float32)) for i in range(4))

    def grads(dtype):
        leaves = [x.to(dtype).detach().requires_grad_(True) for x in (q, k, v)]
        out = torch.softmax(leaves[0] @ leaves[1].transpose(-1, -2) / 8 ** 0.5, -1) @ leaves[2]
        out.backward(dout.to(dtype))
        return [x.grad for x in leaves]

    check = assert_attention_grads_close(*grads(torch.float32), q, k, v, dout)
    assert set(check) >= {"dq", "dk", "dv", "backward"}
    with pytest.raises(AssertionError) as failure:
        assert_attention_grads_close(*grads(torch.bfloat16), q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                     dout.bfloat16(), max_error=1e-4)
    message = str(failure.value)
    assert "EXCEEDED (proven)" in message and "max |dq - exact|" in message and "largest proven error at" in message


def test_the_rule_with_its_floor_on_an_exact_reference():
    # dout = 0: every exact gradient is 0, and a reference of zeros is exact (error 0).
    q, k, v = (rand((16, 4), SEED + i) for i in range(3))
    dout = np.zeros((16, 4))
    zero = np.zeros((16, 4))
    near = np.full((16, 4), 1e-6)
    with pytest.raises(AssertionError, match="ratio max_ratio 2: EXCEEDED"):
        assert_attention_grads_close(None, None, near, q, k, v, dout, reference=(None, None, zero), max_ratio=2)
    assert_attention_grads_close(None, None, near, q, k, v, dout, reference=(None, None, zero), max_ratio=2,
                                 ratio_atol=1e-5)
    with pytest.raises(AssertionError, match="EXCEEDED"):
        assert_attention_grads_close(None, None, near * 100, q, k, v, dout, reference=(None, None, zero), max_ratio=2,
                                     ratio_atol=1e-5)


def kernel(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1) @ v


class DqTooLarge(torch.autograd.Function):
    """A correct forward with a backward whose dQ is 5x too large (the FlashAttention-4 B200 bug's shape)."""

    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        return kernel(q, k, v)

    @staticmethod
    def backward(ctx, g):
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
            dq, dk, dv = torch.autograd.grad(kernel(*leaves), leaves, g)
        return 5 * dq, dk, dv


def test_assert_attention_kernel_runs_forward_and_backward_and_catches_a_wrong_dq():
    q, k, v = (torch.from_numpy(rand((2, 24, 8), SEED + i, np.float32)) for i in range(3))
    checks = assert_attention_kernel(kernel, q, k, v, seed=SEED)
    assert set(checks) >= {"out", "dq", "dk", "dv"}
    with pytest.raises(AssertionError) as failure:
        assert_attention_kernel(DqTooLarge.apply, q, k, v, seed=SEED, reference=kernel)
    message = str(failure.value)
    assert "(dq)" in message and "EXCEEDED (proven)" in message and f"seed={SEED}" in message
    assert "dk" not in message.split("\n")[0]


def test_lse_shapes_and_bad_input():
    q, k, v = (rand((2, 3, 6, 4), SEED + i) for i in range(3))
    s = np.einsum("bhid,bhjd->bhij", q, k) / 2
    lse = np.log(np.exp(s).sum(-1))
    r = attnrank.check_kernel(q, k, v, lse=lse.astype(np.float32))
    assert float(r["lse"]["candidate"]["max_abs_error_upper"]) < 1e-6
    with pytest.raises(ValueError, match="one entry per query row"):
        attnrank.check_kernel(q, k, v, lse=lse[..., :5])
    with pytest.raises(ValueError, match="need --dout|dout"):
        attnrank.check_kernel(q, k, v, dq=q)
    with pytest.raises(ValueError, match="reference"):
        assert_attention_grads_close(None, q, None, q, k, v, q, reference=(q, None, None))


def test_grouped_query_attention_from_the_shapes_forward_and_backward():
    # Four query heads on two K/V heads (GQA): autograd through repeat_interleave sums dK and dV
    # over each K/V head's query heads, which is the exact gradient attnrank encloses.
    g = torch.Generator().manual_seed(SEED)
    q = torch.randn(1, 4, 20, 8, generator=g)
    k, v = (torch.randn(1, 2, 20, 8, generator=g) for _ in range(2))

    def gqa(q, k, v):
        return kernel(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))

    checks = assert_attention_kernel(gqa, q, k, v, seed=SEED)
    assert checks["dk"]["candidate"]["worst"]["head"] in (0, 1)
    with pytest.raises(ValueError, match="divides Q's"):
        attnrank.check_kernel(q, k[:, :1].expand(1, 3, 20, 8).numpy(), v[:, :1].expand(1, 3, 20, 8).numpy(),
                              gqa(q, k, v).detach())


def windowed(q, k, v, left, right, bottom_right=True):
    """softmax over FlashAttention's window (left, right) (-1: unbounded), queries aligned at the
    bottom-right (query i at key i + N_k - N_q) or the top-left."""
    n, m = q.shape[-2], k.shape[-2]
    p = torch.arange(n)[:, None] + (m - n if bottom_right else 0)
    j = torch.arange(m)[None, :]
    keep = torch.ones(n, m, dtype=torch.bool)
    if left >= 0:
        keep &= j >= p - left
    if right >= 0:
        keep &= j <= p + right
    s = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(~keep, -float("inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("window", [(-1, 0), (3, 1), (0, 2)])
def test_windows_with_fewer_queries_than_keys_forward_and_backward(window):
    g = torch.Generator().manual_seed(SEED)
    q = torch.randn(2, 6, 8, generator=g)
    k, v = (torch.randn(2, 11, 8, generator=g) for _ in range(2))
    left, right = window
    causal = window == (-1, 0)
    kwargs = {"causal": True} if causal else {"window_size": window}
    assert_attention_kernel(lambda q, k, v: windowed(q, k, v, left, right), q, k, v, seed=SEED, **kwargs)
    # The same kernel judged in PyTorch's top-left alignment: proven wrong.
    out = windowed(q, k, v, left, right).detach()
    from attnrank.testing import assert_attention_close
    with pytest.raises(AssertionError, match="EXCEEDED"):
        assert_attention_close(out, q, k, v, alignment="top-left", max_error=1e-4, **kwargs)


def test_a_window_that_leaves_a_query_without_keys_is_refused():
    q = torch.randn(9, 4)
    k = v = torch.randn(5, 4)
    with pytest.raises(ValueError, match="allows no key"):
        attnrank.check_kernel(q, k, v, windowed(q, k, v, -1, 0, bottom_right=False), mask="causal")
