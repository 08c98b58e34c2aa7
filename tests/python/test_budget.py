"""The certified error budget of a precision profile (attention/error_budget.hpp, docs/kernels.md):
no correct kernel of a profile -- emulated in NumPy with the profile's rounding at every step,
block sizes 16-256, one-pass and two-pass, split-KV with the logsumexp merge, blocks in either
order -- may exceed its budget, over FlashAttention-like shapes and extreme inputs (logits near
the exponent's range, near-ties, outlier channels, one dominant key); planted bugs are caught.

Random inputs come from SEED (ATTNRANK_PY_SEED, default 20261202), printed on failure."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import attnrank
from attnrank.testing import assert_attention_close

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "reproductions"))
import emulated_kernels as ek  # noqa: E402
from precision_budget import inputs  # noqa: E402

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))
CLI = os.environ.get("ATTNRANK_CLI")
FORMAT = {"fa2-bf16": ("bfloat16", "bfloat16"), "fa2-fp16": ("float16", "float16"),
          "fa3-fp8": ("float8_e4m3fn", "bfloat16"), "fp32": ("float32", "float32")}
INPUT_ROUND = {"fa2-bf16": ek.to_bf16, "fa2-fp16": ek.to_fp16, "fa3-fp8": ek.to_bf16, "fp32": ek.keep}


def heads(rng, kind, n, d, round_input):
    """q, k, v of one head (n x d), of a kind the budget must hold on (the reproduction's kinds)."""
    return inputs(rng, kind, n, d, round_input)


def budget_check(q, k, v, out, lse, profile, causal):
    return attnrank.check_kernel(q[None], k[None], v[None], out[None], lse=lse[None], profile=profile, causal=causal)


CASES = [  # (profile, kind, n, d, causal)
    (p, kind, n, d, causal)
    for p in ("fa2-bf16", "fa2-fp16", "fa3-fp8", "fp32")
    for kind, n, d, causal in (("normal", 113, 64, False), ("normal", 256, 128, True),
                               ("large logits", 128, 64, True), ("near ties", 200, 32, False),
                               ("outlier channels", 160, 64, False), ("one dominant key", 96, 64, True))
]


@pytest.mark.parametrize("profile,kind,n,d,causal", CASES)
def test_no_correct_kernel_exceeds_its_budget(profile, kind, n, d, causal):
    rng = np.random.default_rng([SEED, CASES.index((profile, kind, n, d, causal))])
    q, k, v = heads(rng, kind, n, d, INPUT_ROUND[profile])
    p_format, out_format = FORMAT[profile]
    variants = [dict(block=b) for b in (16, 64, 256)] + [dict(block=32, reverse=True), dict(two_pass=True),
                                                            dict(block=64, splits=3), dict(block=16, splits=7)]
    for variant in variants:
        out, lse = ek.attention(q, k, v, causal=causal, p_format=p_format, out_format=out_format, **variant)
        check = budget_check(q, k, v, out, lse, profile, causal)
        for tensor in ("out", "lse"):
            b = check["budget"][tensor]
            assert b["verdict"] == "within", (SEED, profile, kind, variant, tensor, b)
            assert float(b["usage_upper"]) <= 1


def test_the_budget_catches_planted_bugs():
    """The bugs that change the arithmetic's result beyond what the profile allows are proven
    outside the bf16 profile's budget on most of these inputs (the full rates are the
    reproduction's, docs/reproductions.md, section 6)."""
    rng = np.random.default_rng([SEED, 74])
    caught = {bug: 0 for bug in ek.BUGS}
    for trial in range(6):
        causal = trial % 2 == 1
        q, k, v = heads(rng, ["normal", "large logits", "outlier channels"][trial % 3], 128, 64, ek.to_bf16)
        for bug in ek.BUGS:
            out, lse = ek.attention(q, k, v, causal=causal, block=32, bug=bug)
            check = budget_check(q, k, v, out, lse, "fa2-bf16", causal)
            caught[bug] += check["budget"]["out"]["verdict"] == "exceeded"
    for bug in ("no_rescale", "p_in_fp8", "dropout_without_rescale"):
        assert caught[bug] >= 4, (SEED, caught)


def test_profiles_by_name_dict_and_file_and_the_refusals(tmp_path):
    rng = np.random.default_rng([SEED, 3])
    q, k, v = heads(rng, "normal", 48, 16, ek.to_bf16)
    out, lse = ek.attention(q, k, v)
    named = budget_check(q, k, v, out, lse, "fa2-bf16", False)
    assert named["budget"]["profile"]["name"] == "fa2-bf16"
    assert named["verdicts"]["out"]["budget"] == "within" and named["verdict"] == "within"
    custom = dict(named["budget"]["profile"], name="mine", min_block=64)
    by_dict = budget_check(q, k, v, out, lse, custom, False)
    assert by_dict["budget"]["profile"]["name"] == "mine"
    # fewer rescales: a budget no larger than the named profile's
    assert float(by_dict["budget"]["out"]["max_budget"]) <= float(named["budget"]["out"]["max_budget"])
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"base": "fa2-bf16", "splits": 1}))
    assert budget_check(q, k, v, out, lse, str(path), False)["budget"]["profile"]["splits"] == 1
    for bad, message in ((dict(custom, splits=0), "splits: needs an integer >= 1"),
                         ({"probabilities": "bfloat8"}, "probabilities: format 'bfloat8'"),
                         ({"exp_relative": 0.5}, "exp_relative: 0.5 is not a unit roundoff"),
                         ({"colour": 1}, "'colour' is not a field"),
                         ("fa9", "neither a profile's name")):
        with pytest.raises(ValueError, match=message):
            budget_check(q, k, v, out, lse, bad, False)
    with pytest.raises(ValueError, match="does not model a softcap yet"):
        attnrank.check_kernel(q[None], k[None], v[None], out[None], profile="fa2-bf16", softcap=30.0)
    with pytest.raises(ValueError, match="judges the output or the logsumexp"):
        attnrank.check_kernel(q[None], k[None], v[None], profile="fa2-bf16", dq=q[None], dout=out[None])


def test_extremes_never_give_a_false_budget():
    """Inputs near the float32 range and subnormal: the budget stays an upper bound (+inf where
    the output may overflow its format), never NaN; a correct kernel stays within it."""
    rng = np.random.default_rng([SEED, 5])
    q, k, v = heads(rng, "normal", 32, 8, ek.keep)
    for scale_v in (1e-44, 1e-40, 1e-38, 1e-30, 1e30, 1e37, 3e38):
        vv = (v / np.abs(v).max() * np.float32(scale_v)).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            out, lse = ek.attention(q, k, vv, p_format="float32", out_format="float32")
        if not np.isfinite(out).all():
            continue
        for profile in ("fp32", "torch-math-fp32"):  # flushed to zero, and IEEE's gradual underflow
            b = budget_check(q, k, vv, out, lse, profile, False)["budget"]["out"]
            assert b["verdict"] in ("within", "undecided"), (scale_v, profile, b)
            assert b["max_budget"] != "nan"


@pytest.mark.skipif(not CLI, reason="ATTNRANK_CLI (the attnrank binary) is not set")
def test_the_command_line_gives_the_same_budget(tmp_path):
    rng = np.random.default_rng([SEED, 9])
    q, k, v = heads(rng, "normal", 40, 16, ek.to_bf16)
    out, lse = ek.attention(q, k, v, causal=True)
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse)):
        np.save(tmp_path / f"{name}.npy", x[None])
    run = subprocess.run([CLI, "check-kernel", "--q", str(tmp_path / "q.npy"), "--k", str(tmp_path / "k.npy"),
                          "--v", str(tmp_path / "v.npy"), "--candidate", str(tmp_path / "out.npy"),
                          "--lse", str(tmp_path / "lse.npy"), "--mask", "causal", "--profile", "fa2-bf16", "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    cli = json.loads(run.stdout)
    python = budget_check(q, k, v, out, lse, "fa2-bf16", True)
    assert cli["budget"] == python["budget"]
    bad = subprocess.run([CLI, "check-kernel", "--q", str(tmp_path / "q.npy"), "--k", str(tmp_path / "k.npy"),
                          "--v", str(tmp_path / "v.npy"), "--candidate", str(tmp_path / "out.npy"),
                          "--profile", "fa9"], capture_output=True, text=True)
    assert bad.returncode == 2 and not bad.stdout and "neither a profile's name" in bad.stderr


def test_assert_attention_close_with_a_profile():
    rng = np.random.default_rng([SEED, 11])
    q, k, v = heads(rng, "normal", 64, 32, ek.to_bf16)
    out, lse = ek.attention(q, k, v, causal=True)
    check = assert_attention_close(out, q, k, v, causal=True, profile="fa2-bf16", lse=lse)
    assert check["verdicts"]["out"]["budget"] == "within"
    bad, _ = ek.attention(q, k, v, causal=True, block=16, bug="no_rescale")
    with pytest.raises(AssertionError, match="EXCEEDED budget"):
        assert_attention_close(bad, q, k, v, causal=True, profile="fa2-bf16")


def test_the_error_in_ulps_and_max_ulps():
    """A float32 output rounded from the exact one is within half an ulp of its dtype everywhere
    (certified, to the enclosure's width); one entry 3 ulps off is proven beyond 2 ulps, counted
    in its bin, and fails max_ulps=2 (exit 3 from the command line), but passes max_ulps=4."""
    rng = np.random.default_rng([SEED, 13])
    q, k, v = (rng.standard_normal((2, 24, 8)).astype(np.float32) for _ in range(3))
    s = np.einsum("hid,hjd->hij", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    exact = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    out = exact.astype(np.float32)
    ulps = attnrank.check_kernel(q, k, v, out)["candidate"]["ulps"]
    assert ulps["format"] == "float32"
    assert float(ulps["max_upper"]) < 0.5001 and ulps["histogram"]["at_most_1"] + ulps["histogram"]["at_most_half"] == out.size
    bad = out.copy()
    bad[1, 5, 3] = np.nextafter(np.nextafter(np.nextafter(bad[1, 5, 3], np.float32(np.inf)), np.float32(np.inf)),
                                np.float32(np.inf))
    check = attnrank.check_kernel(q, k, v, bad, max_ulps=2)
    assert float(check["candidate"]["ulps"]["max_lower"]) > 2
    assert check["candidate"]["ulps"]["histogram"]["at_most_4"] == 1
    assert check["max_ulps_verdict"] == "exceeded" and check["verdicts"]["out"]["max_ulps"] == "exceeded"
    assert attnrank.check_kernel(q, k, v, bad, max_ulps=4)["max_ulps_verdict"] == "within"
    with pytest.raises(ValueError, match="max_ulps judges the output"):
        attnrank.check_kernel(q, k, v, dq=q, dout=out, max_ulps=1)
    if CLI:
        import tempfile
        with tempfile.TemporaryDirectory() as work:
            for name, x in (("q", q), ("k", k), ("v", v), ("out", bad)):
                np.save(os.path.join(work, f"{name}.npy"), x)
            run = subprocess.run([CLI, "check-kernel", *[a for n in ("q", "k", "v") for a in (f"--{n}", os.path.join(work, f"{n}.npy"))],
                                  "--candidate", os.path.join(work, "out.npy"), "--max-ulps", "2"],
                                 capture_output=True, text=True)
            assert run.returncode == 3 and "ulps of float32" in run.stdout, run.stdout + run.stderr
