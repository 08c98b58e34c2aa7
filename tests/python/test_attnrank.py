"""Tests of the attnrank Python module (python/attnrank, docs/python.md), run by ctest
(python_test) with PYTHONPATH=build/python under Debian's /usr/bin/python3.

Every random input comes from SEED (ATTNRANK_PY_SEED, default 20261202), which pytest
prints in its header (conftest.py)."""
import concurrent.futures
import json
import os
import subprocess
import tempfile
import threading
import time
from fractions import Fraction

import numpy as np
import pytest

import attnrank

CLI = os.environ.get("ATTNRANK_CLI")


def _saved(array):
    """``array`` written to a fresh .npy file (for the command line); its path."""
    path = os.path.join(tempfile.mkdtemp(prefix="attnrank-py-"), "A.npy")
    np.save(path, array)
    return path

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))
SOURCE = os.path.join(os.path.dirname(__file__), "..", "..")


def pattern(n, rng):
    a = rng.random((n, n)) + 0.1
    return a / a.sum(axis=1, keepdims=True)


def test_rank_and_det_are_exact_for_every_input_kind():
    m = [[Fraction(1, 3), Fraction(2, 3)], [Fraction(1, 2), Fraction(1, 2)]]
    assert attnrank.det(m)["det"] == "-1/6"
    assert attnrank.det(np.array(m, dtype=object))["det"] == "-1/6"
    assert attnrank.det([["1/3", "2/3"], ["0.5", "0.5"]])["det"] == "-1/6"
    r = attnrank.rank(np.eye(3, dtype=np.int64))
    assert r["rank_lower"] == r["rank_upper"] == 3 and r["mode"] == "exact"
    # float32 0.1 is the dyadic rational it stores: det of [[0.1, 0], [0, 1]] is exactly that.
    d = attnrank.det(np.diag([np.float32(0.1), np.float32(1)]))["det"]
    assert Fraction(d) == Fraction(float(np.float32(0.1)))
    assert Fraction(d) != Fraction(1, 10)


def test_strided_and_fortran_arrays_read_as_numpy_sees_them():
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((6, 6))
    for view in (a[::2, ::3], np.asfortranarray(a), a.T, a[::-1]):
        if view.shape[0] != view.shape[1]:
            continue
        exact = Fraction(attnrank.det(view)["det"])
        # the same matrix through exact Fractions
        assert exact == Fraction(attnrank.det([[Fraction(float(v)) for v in row] for row in view])["det"])


def test_bad_input_raises_value_error_with_the_message():
    with pytest.raises(ValueError, match="not a finite number"):
        attnrank.rank(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"shape \(2, 2, 2\) has 3 dimensions; pick one matrix"):
        attnrank.rank(np.zeros((2, 2, 2)))
    assert attnrank.rank(np.zeros(3))["rank_upper"] == 0  # a 1-D array is one row, as a 1-D .npy file
    with pytest.raises(ValueError, match="is not a number"):
        attnrank.det([["1", "x"], ["0", "1"]])
    with pytest.raises(ValueError, match="not 'causal' or 'none'"):
        attnrank.reach(np.full((2, 2), 0.5), 1, mask="upper")
    with pytest.raises(ValueError, match="complex"):
        attnrank.rank(np.eye(2, dtype=complex))


def test_reach_gives_the_cli_answer():
    a = [[Fraction(4, 5), Fraction(1, 10), Fraction(1, 10)],
         [Fraction(1, 10), Fraction(4, 5), Fraction(1, 10)],
         [Fraction(1, 10), Fraction(1, 10), Fraction(4, 5)]]
    assert attnrank.reach(a, 1)["verdict"] == "unreachable"
    assert attnrank.reach(a, 2)["verdict"] == "reachable"
    two = attnrank.reach(a, 2)
    assert isinstance(two["witness_Q"], np.ndarray) and two["witness_Q"].shape == (3, 2)
    assert json.loads(json.dumps(two["certificate"]))["question"] == "free"  # still plain JSON
    causal = np.tril(np.ones((4, 4)))
    causal /= causal.sum(axis=1, keepdims=True)
    r = attnrank.reach(causal, 2, mask="causal")
    assert r["verdict"] in ("reachable", "unreachable", "undecided")
    assert attnrank.reach(causal, 2, mask=np.tril(np.ones((4, 4))))["verdict"] == r["verdict"]


def test_layer_tiers_agree_and_double_gives_arrays():
    rng = np.random.default_rng(SEED)
    x, wq, wk, wv, wo = (rng.standard_normal(s) for s in [(5, 4), (4, 4), (4, 4), (4, 4), (4, 4)])
    d = attnrank.layer(x, wq, wk, wv, wo, 2)
    assert isinstance(d["output"], np.ndarray) and d["output"].shape == (5, 4)
    c = attnrank.layer(x, wq, wk, wv, wo, 2, tier="interval", digits=20)
    certified = np.array([[float(v) for v in row] for row in c["output"]])
    assert np.max(np.abs(certified - d["output"])) < 1e-12


def test_layer_keeps_small_weights_by_default():
    """The default writes 17 significant digits: a weight of 1e-11 is 1e-11, not 0.000000,
    and the certified strings read back within 1e-15 relative of the double tier's arrays."""
    x = 3.0 * np.vstack([np.eye(4), [[1, 1, 0, 0]]])
    w = 2.0 * np.eye(4)
    d = attnrank.layer(x, w, w, w, w, 2)
    c = attnrank.layer(x, w, w, w, w, 2, tier="interval")
    assert c["notation"] == "significant" and c["digits"] == 17
    certified = np.array([[[float(v) for v in row] for row in head] for head in c["A"]])
    assert certified.min() > 0 and certified.min() < 1e-9
    assert np.allclose(certified, d["A"], rtol=1e-12, atol=0)
    fixed = attnrank.layer(x, w, w, w, w, 2, tier="interval", digits=6)
    assert fixed["notation"] == "decimals" and "0.000000" in np.array(fixed["A"]).ravel()
    with pytest.raises(ValueError, match="not both"):
        attnrank.layer(x, w, w, w, w, 2, digits=3, significant=5)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_certified_layer_contains_torch_multihead_attention(torch):
    """A real nn.MultiheadAttention: attnrank's certified output of the same exact inputs is
    within torch's own float64 rounding of torch's output, and one head's pattern is a pattern
    a head of width d_k produces (within 1e-9, certified)."""
    torch.manual_seed(SEED)
    embed, heads, n = 8, 2, 6
    mha = torch.nn.MultiheadAttention(embed, heads, bias=False, batch_first=True).double()
    x = torch.randn(1, n, embed, dtype=torch.float64)
    with torch.no_grad():
        out, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)
    w = attnrank.from_torch(mha)
    assert w["heads"] == heads and w["wq"].shape == (embed, embed)
    c = attnrank.layer(x[0], w["wq"], w["wk"], w["wv"], w["wo"], w["heads"], tier="interval", digits=25)
    certified = np.array([[float(v) for v in row] for row in c["output"]])
    assert np.max(np.abs(certified - out[0].numpy())) < 1e-12
    head0 = weights[0, 0].numpy()
    r = attnrank.reach(head0, embed // heads, epsilon=1e-9)
    assert r["epsilon_verdict"] == "within"


def test_from_torch_refuses_biases(torch):
    mha = torch.nn.MultiheadAttention(4, 2, bias=True)
    with torch.no_grad():
        mha.in_proj_bias.fill_(0.5)
    with pytest.raises(ValueError, match="bias"):
        attnrank.from_torch(mha)


def _exact_attention_mpmath(q, k, v, causal):
    """softmax(q k^T / sqrt(d)) v of one head, every input read as the exact binary value it
    stores, in mpmath at 60 digits (so within 1e-50 of the exact real output)."""
    import mpmath

    mpmath.mp.dps = 60
    n, d = q.shape
    scale = 1 / mpmath.sqrt(d)
    out = []
    for i in range(n):
        keys = range(i + 1) if causal else range(k.shape[0])
        s = [scale * mpmath.fsum(mpmath.mpf(float(q[i, t])) * mpmath.mpf(float(k[j, t])) for t in range(d)) for j in keys]
        top = max(s)
        e = [mpmath.exp(x - top) for x in s]
        total = mpmath.fsum(e)
        out.append([mpmath.fsum(e[jj] * mpmath.mpf(float(v[j, c])) for jj, j in enumerate(keys)) / total
                    for c in range(v.shape[1])])
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_check_kernel_bounds_the_true_error_of_a_float32_output(causal):
    """A float32 attention computed by NumPy: its true error, measured in mpmath, lies inside
    attnrank's certified bounds, with and without a causal mask."""
    import mpmath

    rng = np.random.default_rng(SEED)
    h, n, d = 2, 12, 8
    q, k, v = (rng.standard_normal((h, n, d)).astype(np.float32) for _ in range(3))
    s = np.einsum("hid,hjd->hij", q, k) / np.float32(np.sqrt(d))
    if causal:
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, np.float32(-np.inf))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    o32 = (p / p.sum(axis=-1, keepdims=True)) @ v  # float32 throughout
    assert o32.dtype == np.float32
    result = attnrank.check_kernel(q, k, v, o32, mask="causal" if causal else None)
    c = result["candidate"]
    true_error = mpmath.mpf(0)
    worst = None
    for head in range(h):
        exact = _exact_attention_mpmath(q[head], k[head], v[head], causal)
        for i in range(n):
            for j in range(d):
                e = abs(mpmath.mpf(float(o32[head, i, j])) - exact[i][j])
                if e > true_error:
                    true_error, worst = e, (head, i, j)
    assert mpmath.mpf(c["max_abs_error_lower"]) <= true_error <= mpmath.mpf(c["max_abs_error_upper"])
    assert true_error > 0
    assert mpmath.mpf(c["max_abs_error_upper"]) < true_error * (1 + mpmath.mpf("1e-3"))  # tight: double widths ~1e-15
    assert (c["worst"]["head"], c["worst"]["row"], c["worst"]["column"]) == worst
    assert result["mask"] == ("causal" if causal else "none")


def test_check_kernel_float64_reference_falls_back_to_mpfi_and_takes_torch_tensors(torch):
    rng = np.random.default_rng(SEED + 1)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 2, 16, 8))) for _ in range(3))
    def attention(q, k, v):  # softmax(q k^T / sqrt(d)) v in the inputs' dtype
        return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v

    ref = attention(q, k, v)  # float64
    cand = attention(q.float(), k.float(), v.float())
    r = attnrank.check_kernel(q, k, v, cand, ref)
    assert r["method"] == "mpfi"  # float64's error is below the double enclosures' width
    lo, hi = float(r["ratio_lower"]), float(r["ratio_upper"])
    assert 1 < lo <= hi < 1.05 * lo
    assert r["shape"] == [1, 2, 16, 8]
    with pytest.raises(ValueError, match="candidate"):
        attnrank.check_kernel(q, k, v, cand[..., :4])


def test_check_kernel_reports_a_float16_overflow_instead_of_refusing_it():
    """A float16 kernel whose scores overflow produces NaN; attnrank reports where, with an
    infinite error, while a NaN in Q is still refused as input."""
    rng = np.random.default_rng(SEED + 2)
    q, k, v = (rng.standard_normal((2, 8, 4)) for _ in range(3))
    q[1, 3] *= 1e3  # large scores: float16's exp(s - max) stays finite, its raw exp(s) does not
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.einsum("hid,hjd->hij", q, k).astype(np.float16) / np.float16(2)
        p = np.exp(s)  # no max subtraction: the bug under test
        o16 = (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float16)
    bad = ~np.isfinite(o16)
    assert bad.any()
    r = attnrank.check_kernel(q, k, v, o16)
    c = r["candidate"]
    assert c["nonfinite"] == int(bad.sum())
    assert c["max_abs_error_lower"] == c["max_abs_error_upper"] == "inf"
    first = np.argwhere(bad)[0]  # the first in C order
    assert (c["worst"]["head"], c["worst"]["row"], c["worst"]["column"]) == tuple(int(x) for x in first)
    q[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="not a finite number"):
        attnrank.check_kernel(q, k, v, o16)


def _spin_rate(stop, seconds=None):
    """Iterations per second of a pure-Python loop until `stop` is set (or for `seconds`)."""
    n, start = 0, time.perf_counter()
    end = start + seconds if seconds else None
    while not stop.is_set() and (end is None or time.perf_counter() < end):
        n += 1
    return n / (time.perf_counter() - start)


def test_other_python_threads_run_while_an_analysis_computes():
    """The GIL is released while C++ works: a Python loop in the main thread keeps most of
    its idle speed while a certified rank runs in another thread (with the GIL held it
    would stall at about 1%). A throughput ratio, not a speed target: 0.2 leaves room for
    a loaded machine and for the analysis's own second thread."""
    rng = np.random.default_rng(SEED)
    m = rng.standard_normal((700, 700))
    idle = _spin_rate(threading.Event(), seconds=0.3)
    done = threading.Event()
    result = {}

    def work():
        result["rank"] = attnrank.rank(m, mode="certified")
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    busy = _spin_rate(done)
    worker.join()
    assert result["rank"]["rank_lower"] == 700
    assert busy / idle > 0.2, f"the main thread ran at {busy / idle:.3f} of its idle speed"


def test_two_analyses_in_two_threads_give_the_answers_of_one():
    """No global state: reach, rank and det run side by side and answer as they do alone."""
    rng = np.random.default_rng(SEED)
    targets = [pattern(6, rng) for _ in range(4)]
    alone = [attnrank.reach(t, 2)["verdict"] for t in targets] + [attnrank.det(np.eye(3) * 2)["det"]]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(attnrank.reach, t, 2) for t in targets] + [pool.submit(attnrank.det, np.eye(3) * 2)]
        together = [f.result()["verdict"] for f in futures[:-1]] + [futures[-1].result()["det"]]
    assert together == alone


def _schema(kind):
    with open(os.path.join(SOURCE, "docs", "schema", f"{kind}.schema.json")) as f:
        return json.load(f)


def _plain(node):
    """A result with its NumPy arrays as lists: the JSON document it came from."""
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, np.ndarray):
        return node.tolist()
    return node


def test_results_are_the_documents_of_the_one_json_writer():
    """Python's dicts are the CLI's JSON documents (same writer): each validates against its
    schema in docs/schema/, and the numeric matrices come as float64 arrays."""
    jsonschema = pytest.importorskip("jsonschema")
    a = [[Fraction(4, 5), Fraction(1, 10), Fraction(1, 10)], [Fraction(1, 10), Fraction(4, 5), Fraction(1, 10)],
         [Fraction(1, 10), Fraction(1, 10), Fraction(4, 5)]]
    causal = np.tril(np.ones((4, 4)))
    causal /= causal.sum(axis=1, keepdims=True)
    results = [attnrank.reach(a, 1), attnrank.reach(a, 1, epsilon=0.1), attnrank.reach(causal, 2, mask="causal"),
               attnrank.width(a, 0.4), attnrank.rank(a), attnrank.rank(a, "certified"), attnrank.rank(a, "numeric"),
               attnrank.det(a), attnrank.det(a, "certified"), attnrank.svd(a), attnrank.svd(a, 2, gaps=True),
               attnrank.check_certificate(a, attnrank.reach(a, 2)["certificate"])]
    for r in results:
        kind = r["schema"].split("/")[1]
        jsonschema.Draft202012Validator(_schema(kind)).validate(_plain(r))
    assert isinstance(results[1]["witness_Q"], np.ndarray) and results[1]["witness_Q"].dtype == np.float64
    assert "rank_lower" not in results[6] and results[6]["approx_rank_lower"] == 3  # not proven: not named so


def test_svd_default_gives_every_singular_value():
    s = attnrank.svd(np.diag([3.0, 2.0, 1.0]))
    assert s["top"] == 3 and len(s["singular_values"]) == 3
    for v, exact in zip(s["singular_values"], (3, 2, 1)):
        assert Fraction(v["lower"]) <= exact <= Fraction(v["upper"])


def test_certificates_round_trip_and_a_wrong_one_is_rejected():
    a = np.full((3, 3), 1 / 3)
    r = attnrank.reach(a, 1)
    cert = json.loads(json.dumps(r["certificate"]))  # as written to a file and read back
    assert attnrank.check_certificate(a, cert)["valid"] is True
    with pytest.raises(ValueError, match="certificate"):
        attnrank.check_certificate(np.array([[0.5, 0.5, 0], [0.2, 0.3, 0.5], [0.1, 0.2, 0.7]]) + 0.1, cert)


def test_the_default_band_is_cheap_and_refine_only_narrows_it():
    rng = np.random.default_rng(SEED)
    a = pattern(12, rng)
    cheap = attnrank.reach(a, 2)
    assert not cheap["refinement"]["ran"]
    refined = attnrank.reach(a, 2, refine=True, time_limit=0)
    assert refined["refinement"]["ran"] and refined["refinement"]["time_limit"] is None
    assert refined["refinement"]["search_flops"] == attnrank._attnrank.full_search_flops
    assert float(refined["error_lower"]) >= float(cheap["error_lower"])
    assert float(refined["error_upper"]) <= float(cheap["error_upper"])
    # epsilon inside the cheap band: the optimiser runs by itself, refine=False keeps it off
    lo, hi = float(cheap["error_lower"]), float(cheap["error_upper"])
    middle = (lo + hi) / 2
    assert attnrank.reach(a, 2, epsilon=middle)["refinement"]["ran"]
    assert not attnrank.reach(a, 2, epsilon=middle, refine=False)["refinement"]["ran"]
    w = attnrank.width(a, 0.05, refine=False)
    assert not w["refinement"]["ran"]
    # the default is the command line's: the optimiser only where the cheap bracket is open
    default = attnrank.width(a, 0.05)
    cli = json.loads(subprocess.run([CLI, "width", _saved(a), "--epsilon", "0.05", "--json"], capture_output=True,
                                    text=True, check=True).stdout) if CLI else None
    is_open = w["width_upper"] is None or w["width_upper"] > w["width_lower"]
    if not is_open:
        assert not default["refinement"]["ran"]
    if cli is not None:
        assert cli["refinement"]["reason"] == default["refinement"]["reason"]
    wr = attnrank.width(a, 0.05, refine=True, time_limit=0)
    assert wr["width_lower"] == w["width_lower"]
    if w["width_upper"] is not None:
        assert wr["width_upper"] <= w["width_upper"]
    for bad in (-1, float("nan")):
        with pytest.raises(ValueError, match="^time limit .* is not a number of seconds >= 0"):
            attnrank.reach(a, 2, time_limit=bad)
    for none in (0, float("inf")):  # the full search without a limit, as --time-limit 0
        r = attnrank.reach(a, 2, epsilon=middle, time_limit=none)["refinement"]
        assert r["time_limit"] is None and r["search_flops"] == attnrank._attnrank.full_search_flops
    # the default: no clock, the fixed work
    r = attnrank.reach(a, 2, epsilon=middle)["refinement"]
    assert r["time_limit"] is None and r["search_flops"] == attnrank._attnrank.default_search_flops
    assert attnrank.reach(a, 2, epsilon=middle, time_limit=5)["refinement"]["time_limit"] == 5


def test_import_without_numpy_works_for_lists_and_fractions():
    """NumPy hidden from the import system: lists of rows in, lists of floats out."""
    import subprocess
    import sys
    code = "\n".join([
        "import sys",
        "class Hide:",
        "    def find_spec(self, name, path=None, target=None):",
        "        if name == 'numpy' or name.startswith('numpy.'):",
        "            raise ImportError('numpy is hidden')",
        "sys.meta_path.insert(0, Hide())",
        "import attnrank",
        "from fractions import Fraction as F",
        "a = [[F(4, 5), F(1, 10), F(1, 10)], [F(1, 10), F(4, 5), F(1, 10)], [F(1, 10), F(1, 10), F(4, 5)]]",
        "r = attnrank.reach(a, 2)",
        "assert r['verdict'] == 'reachable', r['verdict']",
        "assert isinstance(r['witness_Q'], list) and isinstance(r['witness_Q'][0][0], float)",
        "assert attnrank.rank([[1, 2], [2, 4]])['rank_lower'] == 1",
        "assert attnrank.det([['1/3', 0], [0, 3]])['det'] == '1'",
        "assert attnrank.svd([[3, 0], [0, 4]])['singular_values'][0]['upper'] is not None",
        "try:",
        "    attnrank.scan([[[1.0]]])",
        "except ValueError as e:",
        "    assert 'NumPy' in str(e), e",
        "else:",
        "    raise AssertionError('an array path without NumPy must say it needs NumPy')",
        "assert 'numpy' not in sys.modules",
        "print('ok')",
    ])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_version_is_the_commands():
    import subprocess
    import sys
    cli = os.environ.get("ATTNRANK_CLI")
    if cli:
        out = subprocess.run([cli, "--version"], capture_output=True, text=True).stdout
        assert out.strip() == f"attnrank {attnrank.__version__}"
    r = subprocess.run([sys.executable, "-m", "attnrank", "reach", "diag:3:0.8", "--dk", "1", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "unreachable"
    bad = subprocess.run([sys.executable, "-m", "attnrank", "reach", "diag:3:0.8", "--dk", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and "d_k" in bad.stderr
