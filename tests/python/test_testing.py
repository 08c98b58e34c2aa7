"""attnrank.testing.assert_attention_close: passes on correct outputs, fails with certified
numbers on wrong ones, reads float16 and bfloat16 exactly, and judges FlashAttention's
ratio rule with true errors. Seeded (ATTNRANK_PY_SEED, printed in pytest's header)."""
import os
import re

import numpy as np
import pytest

import attnrank
from attnrank.testing import assert_attention_close, assert_attention_kernel, default_tolerance

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))


def inputs(shape, dtype=np.float32, seed=SEED):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(3))


def attention(q, k, v, causal=False, dtype=np.float32):
    """softmax(q k^T / sqrt(d)) v computed in ``dtype`` from the inputs' values."""
    q, k, v = (x.astype(dtype) for x in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) / dtype(np.sqrt(q.shape[-1]))
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def band(message, label):
    """The certified [lower, upper] that the message prints after ``label``."""
    m = re.search(re.escape(label) + r"\s+in \[([^,]+), ([^\]]+)\]", message)
    assert m, message
    return float(m.group(1)), float(m.group(2))


def test_a_correct_float32_causal_output_passes_and_one_entry_off_by_1e3_fails():
    q, k, v = inputs((1, 2, 64, 16))
    out = attention(q, k, v, causal=True)
    check = assert_attention_close(out, q, k, v, causal=True)
    assert check["max_error_verdict"] == "within"
    assert float(check["candidate"]["max_abs_error_upper"]) < 1e-5
    bad = out.copy()
    bad[0, 1, 40, 5] += np.float32(1e-3)
    with pytest.raises(AssertionError) as info:
        assert_attention_close(bad, q, k, v, causal=True)
    message = str(info.value)
    lo, hi = band(message, "max |out - exact|")
    assert 0.99e-3 < lo <= hi < 1.01e-3  # the true error, proven: the perturbation plus float32's own
    assert "batch 0, head 1, row 40, column 5" in message
    assert "EXCEEDED (proven)" in message
    # Without the mask the same output is far off: the causal question is not the full one.
    with pytest.raises(AssertionError):
        assert_attention_close(out, q, k, v)


def test_an_explicit_max_error_is_judged_both_ways():
    q, k, v = inputs((48, 8))
    out = attention(q, k, v)
    err = float(attnrank.check_kernel(q, k, v, out)["candidate"]["max_abs_error_upper"])
    assert_attention_close(out, q, k, v, max_error=2 * err)
    with pytest.raises(AssertionError, match="EXCEEDED"):
        assert_attention_close(out, q, k, v, max_error=err / 4)


def test_bfloat16_tensors_are_read_exactly():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(2, 40, 16, generator=g).to(torch.bfloat16) for _ in range(3))
    # A bfloat16 kernel: float32 arithmetic on the bfloat16 values, the output rounded to bfloat16.
    s = (q.float() @ k.float().transpose(-1, -2)) / 4.0
    out = (torch.softmax(s, dim=-1) @ v.float()).to(torch.bfloat16)
    check = assert_attention_close(out, q, k, v)
    assert check["candidate"]["dtype"] == "bfloat16"
    # Exactness: the float32 copies hold the same numbers, so the bounds are the same.
    same = attnrank.check_kernel(q.float().numpy(), k.float().numpy(), v.float().numpy(), out.float().numpy())
    for key in ("max_abs_error_lower", "max_abs_error_upper"):
        assert check["candidate"][key] == same["candidate"][key]
    # Rounding to bfloat16 costs up to half an ulp (2^-9 relative): proven above float32's error.
    assert float(check["candidate"]["max_abs_error_lower"]) > 1e-4
    with pytest.raises(AssertionError):
        assert_attention_close(out, q, k, v, max_error=1e-5)


def test_float16_inputs_and_flashattention_ratio_rule():
    q, k, v = inputs((2, 96, 32), np.float16)
    # The candidate: float32 arithmetic, output rounded to float16 (a fused kernel);
    # the reference: float16 throughout (FlashAttention's out_pt, "PyTorch in low precision").
    out = attention(q, k, v, dtype=np.float32).astype(np.float16)
    out_pt = attention(q, k, v, dtype=np.float16)
    check = assert_attention_close(out, q, k, v, reference=out_pt)  # max_ratio = 2 by default
    assert check["max_ratio_verdict"] == "within"
    assert check["candidate"]["dtype"] == "float16"
    assert float(check["ratio_upper"]) <= 2
    # The rule the other way round fails, and says why with the certified ratio.
    with pytest.raises(AssertionError) as info:
        assert_attention_close(out_pt, q, k, v, reference=out, max_ratio=1.0)
    message = str(info.value)
    lo, hi = band(message, "error(out) / error(reference)")
    assert 1.0 < lo <= hi
    assert "max_ratio 1" in message


def test_flashattention_layout_and_scale():
    q, k, v = inputs((1, 3, 50, 8))
    out = attention(q, k, v)
    fa = [np.ascontiguousarray(np.swapaxes(x, 1, 2)) for x in (q, k, v, out)]  # (B, N, H, d)
    a = assert_attention_close(out, q, k, v)
    b = assert_attention_close(fa[3], *fa[:3], layout="bshd")
    assert a["candidate"] == b["candidate"]
    with pytest.raises(AssertionError):
        assert_attention_close(out, q, k, v, scale=0.5)  # the output is for 1/sqrt(8)


def test_the_user_layout_in_check_kernel_and_in_the_messages():
    """layout="bshd" in check_kernel reads FlashAttention's (B, N, H, d) as the transposed
    (B, H, N, d) question (the same bounds), and a failure names the worst entry in the layout
    the caller passed: batch, row, head, column for bshd."""
    q, k, v = inputs((2, 3, 20, 8))
    out = attention(q, k, v)
    out[1, 2, 7, 5] += 1e-2  # batch 1, head 2, row 7, column 5
    fa = [np.ascontiguousarray(np.swapaxes(x, 1, 2)) for x in (q, k, v, out)]  # (B, N, H, d)
    ours = attnrank.check_kernel(q, k, v, out)
    theirs = attnrank.check_kernel(*fa, layout="bshd")
    assert ours["candidate"] == theirs["candidate"]
    assert ours["candidate"]["worst"]["row"] == 7 and ours["candidate"]["worst"]["head"] == 2
    with pytest.raises(AssertionError) as failure:
        assert_attention_close(fa[3], *fa[:3], layout="bshd", max_error=1e-4)
    assert "batch 1, row 7, head 2, column 5 (0-based, (B, N, H, d) layout)" in str(failure.value)
    with pytest.raises(AssertionError) as failure:
        assert_attention_close(out, q, k, v, max_error=1e-4)
    assert "batch 1, head 2, row 7, column 5 (0-based, (B, H, N, d) layout)" in str(failure.value)
    with pytest.raises(ValueError, match="layout: 'sbhd' is not"):
        attnrank.check_kernel(*fa, layout="sbhd")


def test_assert_attention_kernel_in_flashattentions_layout():
    torch = pytest.importorskip("torch")

    def kernel(q, k, v):  # (B, N, H, d) in, (B, N, H, d) out
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        p = torch.softmax(qt @ kt.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        return (p @ vt).transpose(1, 2)

    q, k, v = (torch.from_numpy(x.astype(np.float64)) for x in inputs((1, 16, 2, 8)))
    checks = assert_attention_kernel(kernel, q, k, v, layout="bshd", max_error=1e-12, grad_max_error=1e-12)
    assert set(checks) >= {"out", "dq", "dk", "dv"}


def test_an_enclosure_too_wide_for_the_tolerance_is_not_a_pass():
    q, k, v = inputs((64, 16), np.float64)
    out = attention(q, k, v, dtype=np.float64)  # float64's error is below the double enclosure's width
    with pytest.raises(AssertionError, match="NOT PROVEN"):
        assert_attention_close(out, q, k, v, max_error=1e-17, fallback="never")
    check = assert_attention_close(out, q, k, v, max_error=1e-11, fallback="never")
    assert check["method"] == "double"


def test_nonfinite_outputs_fail_and_misuse_is_a_value_error():
    q, k, v = inputs((16, 4))
    out = attention(q, k, v)
    out[3, 2] = np.nan
    with pytest.raises(AssertionError, match="1 entries of out are NaN or infinite; the first at row 3, column 2"):
        assert_attention_close(out, q, k, v, max_error=1.0)
    with pytest.raises(ValueError, match="max_ratio needs a reference"):
        assert_attention_close(out, q, k, v, max_ratio=2)
    with pytest.raises(ValueError, match="not both"):
        assert_attention_close(out, q, k, v, causal=True, mask=np.ones((16, 16), dtype=bool))
    with pytest.raises(ValueError, match="layout"):
        assert_attention_close(out, q, k, v, layout="nhd")
    with pytest.raises(ValueError, match="non-negative"):
        assert_attention_close(out, q, k, v, max_error=-1)
    with pytest.raises(ValueError, match="no default tolerance"):
        default_tolerance("int8")
    with pytest.raises(ValueError):  # shapes that do not fit name the tensor
        assert_attention_close(out[:, :3], q, k, v)


def test_v_near_the_largest_double_is_never_certified_wrong():
    # The outside audit's case: a constant column of 1e308, so the exact output is 1e308
    # exactly, and a candidate at half of it (true error 5e307 > rtol x 1e308 = 1e307).
    q = np.array([[0.5, -1.0], [1.0, 0.25], [-0.75, 2.0], [0.0, 1.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5]])
    v = np.full((4, 1), 1e308)
    with pytest.raises(AssertionError, match="EXCEEDED"):
        assert_attention_close(v * 0.5, q, k, v, max_error=0.0, rtol=0.1)
    for fallback in ("never", "auto", "always"):
        c = attnrank.check_kernel(q, k, v, v * 0.5, fallback=fallback)["candidate"]
        assert float(c["max_abs_error_lower"]) <= 5e307 <= float(c["max_abs_error_upper"])
        assert float(c["max_rel_error_lower"]) <= 0.5 <= float(c["max_rel_error_upper"])
    # V near DBL_MAX with both signs, 300 keys: the band still holds the true error.
    rng = np.random.default_rng(49)
    print("seed 49")
    q, k = rng.normal(size=(300, 4)), rng.normal(size=(300, 4))
    v = rng.uniform(-1, 1, size=(300, 2)) * 1.5e308
    exact = attnrank.check_kernel(q, k, v, np.zeros((300, 2)), fallback="always")
    c = attnrank.check_kernel(q, k, v, np.zeros((300, 2)))["candidate"]
    assert float(c["max_abs_error_lower"]) <= float(exact["candidate"]["max_abs_error_upper"])
    assert float(c["max_abs_error_upper"]) >= float(exact["candidate"]["max_abs_error_lower"])


def test_the_failure_message_prints_out_in_its_own_dtype():
    torch = pytest.importorskip("torch")
    q, k, v = (torch.tensor(x, dtype=torch.float64) for x in inputs((8, 4)))
    out = torch.tensor(attention(q.numpy(), k.numpy(), v.numpy(), dtype=np.float64))
    out[2, 1] = 0.123456789012
    with pytest.raises(AssertionError, match=r"out = 0\.123456789012\b"):
        assert_attention_close(out, q, k, v, max_error=1e-9)


def test_a_reference_with_nan_is_named_and_its_ratio_band_is_honest():
    q, k, v = inputs((16, 4))
    out = attention(q, k, v)
    ref = out.copy()
    ref[1, 1] = np.nan
    check = attnrank.check_kernel(q, k, v, out, ref)
    assert float(check["ratio_lower"]) == 0 and check["ratio_upper"] == "inf"  # nothing proven, and it says so
    with pytest.raises(AssertionError, match="reference: 1 entries are NaN or infinite") as failure:
        assert_attention_close(out, q, k, v, reference=ref, max_ratio=2)
    assert "NOT JUDGED (the reference is not finite" in str(failure.value)
    assert "straddle" not in str(failure.value)


def test_nan_in_both_the_output_and_the_reference_is_a_clear_failure():
    """A kernel whose output is NaN beside a reference that is NaN too: the ratio of two
    infinite errors proves nothing, so the verdict is undecided and the assertion fails
    naming both (it was an internal error: 'exceeded' was claimed without a proof)."""
    q, k, v = inputs((16, 4))
    out = np.full_like(attention(q, k, v), np.nan)
    ref = out.copy()
    check = attnrank.check_kernel(q, k, v, out, ref, max_ratio=2)
    assert check["candidate"]["nonfinite"] == out.size and check["reference"]["nonfinite"] == ref.size
    with pytest.raises(AssertionError) as failure:
        assert_attention_close(out, q, k, v, reference=ref, max_ratio=2)
    message = str(failure.value)
    assert "NaN or infinite" in message and "reference" in message


def test_check_kernel_takes_flashattentions_names():
    """causal=True is mask="causal" and softmax_scale is scale, as in FlashAttention's calls;
    both spellings at once must agree."""
    q, k, v = inputs((16, 4))
    out = attention(q, k, v)
    by_ours = attnrank.check_kernel(q, k, v, out, mask="causal", scale=0.3)
    by_theirs = attnrank.check_kernel(q, k, v, out, causal=True, softmax_scale=0.3)
    for key in ("max_abs_error_lower", "max_abs_error_upper"):
        assert by_ours["candidate"][key] == by_theirs["candidate"][key]
    with pytest.raises(ValueError, match="give one of them"):
        attnrank.check_kernel(q, k, v, out, causal=True, mask=np.ones((16, 16)))
    with pytest.raises(ValueError, match="give one of them"):
        attnrank.check_kernel(q, k, v, out, scale=0.5, softmax_scale=0.3)


def test_integer_arguments_are_checked_before_the_binding():
    a = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    stack = np.stack([a, a])
    for call, match in ((lambda: attnrank.scan(stack, jobs=-1), "jobs: -1 is out of range"),
                        (lambda: attnrank.scan(stack, epsilon=0.1, max_dk=0), "max_dk 0 is out of range"),
                        (lambda: attnrank.width(a, 0.1, max_dk=0), "max_dk 0 is out of range"),
                        (lambda: attnrank.width(a, 0.1, max_dk=2.5), "max_dk: 2.5 is not an integer"),
                        (lambda: attnrank.reach(a, "2"), "d_k: '2' is not an integer"),
                        (lambda: attnrank.reach(a, 1, bits=-3), "bits: -3 is out of range"),
                        (lambda: attnrank.reach(a, 1, seed=-1), "seed: -1 is out of range"),
                        (lambda: attnrank.det(a, digits=0), "digits: 0 is out of range")):
        with pytest.raises(ValueError, match=match):
            call()
    assert attnrank.width(a, 0.5, max_dk=np.int64(2))["max_d_k"] == 2


def logsumexp(q, k, scale=None, dtype=np.float64):
    """The logsumexp of each query row of scale q k^T, (B, H, N), computed in ``dtype``."""
    q, k = q.astype(dtype), k.astype(dtype)
    s = np.einsum("...id,...jd->...ij", q, k) * dtype(scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    m = s.max(axis=-1)
    return m + np.log(np.exp(s - m[..., None]).sum(axis=-1))


def test_the_logsumexp_in_the_helpers():
    """lse= is checked beside out: a float32 lse rounded from the exact one passes by float32's
    default tolerance; one entry off fails, named in (B, H, N); lse_max_error judges it both ways;
    a reference lse gives the ratio rule; every verdict is in check["verdicts"]."""
    q, k, v = inputs((2, 3, 24, 8))
    out = attention(q, k, v)
    lse = logsumexp(q, k).astype(np.float32)
    check = assert_attention_close(out, q, k, v, lse=lse)
    assert check["verdicts"]["out"] == {"max_error": "within"}
    assert check["verdicts"]["lse"] == {"max_error": "within"}
    assert check["verdict"] == "within"
    bad = lse.copy()
    bad[1, 2, 5] += 1e-3
    with pytest.raises(AssertionError) as failure:
        assert_attention_close(out, q, k, v, lse=bad)
    message = str(failure.value)
    assert message.startswith("attention logsumexp not proven close")
    assert "batch 1, head 2, row 5 (0-based, (B, H, N) layout)" in message
    assert assert_attention_close(out, q, k, v, lse=bad, lse_max_error=2e-3)["verdicts"]["lse"]["max_error"] == "within"
    # the ratio rule against a reference's lse, with the output's
    ref_out = attention(q, k, v, dtype=np.float32)
    check = assert_attention_close(out, q, k, v, reference=ref_out, lse=lse, reference_lse=lse, ratio_atol=1e-6)
    assert check["verdicts"]["lse"] == {"max_ratio": "within"}
    with pytest.raises(ValueError, match="reference_lse is given but lse is not"):
        assert_attention_close(out, q, k, v, reference_lse=lse)
    with pytest.raises(ValueError, match="lse_rtol needs lse_max_error"):
        assert_attention_close(out, q, k, v, lse=lse, lse_rtol=1e-3)
    # softmax_scale is FlashAttention's name for scale
    lse2 = logsumexp(q, k, 0.5).astype(np.float32)
    check = assert_attention_close(attention(q * np.float32(np.sqrt(8) * 0.5), k, v), q, k, v, softmax_scale=0.5,
                                   lse=lse2, max_error=1e-5)
    assert check["verdict"] == "within"


def test_a_kernel_returning_out_and_lse_and_packed_sequences():
    torch = pytest.importorskip("torch")

    def kernel(q, k, v):  # returns (out, lse) as FlashAttention's with return_softmax_lse
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1)

    q, k, v = (torch.from_numpy(x.astype(np.float64)) for x in inputs((1, 2, 16, 8)))
    checks = assert_attention_kernel(kernel, q, k, v, max_error=1e-12, grad_max_error=1e-12, lse_max_error=1e-12)
    assert set(checks["verdicts"]) == {"out", "lse", "dq", "dk", "dv"}
    assert checks["verdict"] == "within" and "lse" in checks

    def broken(q, k, v):
        out, lse = kernel(q, k, v)
        return out, lse + 1e-6

    with pytest.raises(AssertionError, match="logsumexp not proven close"):
        assert_attention_kernel(broken, q, k, v, max_error=1e-12, grad_max_error=1e-12, lse_max_error=1e-9)
    with pytest.raises(ValueError, match="return out, or \\(out, lse\\)"):
        assert_attention_kernel(lambda q, k, v: (kernel(q, k, v)[0],), q, k, v)

    # packed sequences (total, H, d): two sequences of 5 and 11 tokens, the kernel closes over the offsets
    cu = torch.tensor([0, 5, 16], dtype=torch.int32)
    qp, kp, vp = (torch.from_numpy(x.astype(np.float64)) for x in inputs((16, 2, 8), seed=SEED + 1))

    def varlen(q, k, v):
        outs = []
        for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
            qs, ks, vs = (x[a:b].transpose(0, 1) for x in (q, k, v))  # (H, n, d)
            p = torch.softmax(qs @ ks.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
            outs.append((p @ vs).transpose(0, 1))
        return torch.cat(outs)

    checks = assert_attention_kernel(varlen, qp, kp, vp, cu_seqlens_q=cu, cu_seqlens_k=cu, max_error=1e-12,
                                     grad_max_error=1e-12)
    assert checks["verdict"] == "within"


def test_a_reference_far_from_exact_is_warned_about():
    """A reference that shares a kernel's bug makes the ratio pass; the library notes a
    reference proven outside its dtype's default tolerance, and Python warns."""
    q, k, v = inputs((1, 2, 16, 8))
    out = attention(q, k, v)
    ref = out.copy()
    ref[0, 1, 3, 2] += 0.05
    with pytest.warns(attnrank.InputWarning, match="the reference out's own error is at least"):
        check = attnrank.check_kernel(q, k, v, out, ref, max_ratio=2)
    assert check["notes"] and "may share the kernel's bug" in check["notes"][0]
    with pytest.warns(attnrank.InputWarning, match="may share the kernel's bug"):
        assert_attention_close(out, q, k, v, reference=ref)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "notes" not in attnrank.check_kernel(q, k, v, out, attention(q, k, v), max_ratio=2, ratio_atol=1e-6)


def test_shapes_that_fit_the_other_layout_say_so():
    q, k, v = inputs((1, 3, 16, 8))
    kv = [x[:, :, :12] for x in (k, v)]  # 12 keys, 16 queries: only one reading fits
    fa = [np.ascontiguousarray(np.swapaxes(x, 1, 2)) for x in (q, *kv)]  # (B, N, H, d)
    with pytest.raises(ValueError, match="pass layout='bshd' if that is their layout"):
        attnrank.check_kernel(*fa, attention(q, *kv).swapaxes(1, 2).copy())
    with pytest.raises(ValueError, match="pass layout='bhsd' \\(the default\\)"):
        attnrank.check_kernel(q, *kv, attention(q, *kv), layout="bshd")
    with pytest.raises(ValueError) as plain:  # shapes that fit neither: no hint
        attnrank.check_kernel(q, k[:, :2, :, :5], v)
    assert "layout=" not in str(plain.value)
