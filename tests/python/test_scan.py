"""attnrank.scan (python/attnrank, docs/scan.md): planted heads of known width are
found within that width, locally on threads and on a real Dask LocalCluster with two
worker processes, and both give the CLI's answer for every head.

Random inputs come from SEED (ATTNRANK_PY_SEED, default 20261202)."""
import json
import os
import subprocess
import sys

import warnings

import numpy as np
import pytest

import attnrank

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))
CLI = os.environ.get("ATTNRANK_CLI")


def planted(rng, layers, heads, n, widths):
    """A (layers, heads, n, n) stack: head (l, h) is softmax(Q K^T / sqrt(r)), Q, K of width r."""
    out = np.empty((layers, heads, n, n))
    for t, r in enumerate(widths):
        q, k = rng.standard_normal((n, r)), rng.standard_normal((n, r))
        s = q @ k.T / np.sqrt(r)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[t // heads, t % heads] = e / e.sum(axis=1, keepdims=True)
    return out


def check_planted(results, widths, shape):
    assert [h["index"] for h in results] == [list(i) for i in np.ndindex(*shape)]
    for h, r in zip(results, widths):
        assert h["width_lower"] <= h["width_upper"] <= r, (h, r)


def test_planted_heads_locally_and_from_torch():
    rng = np.random.default_rng(SEED)
    widths = list(rng.integers(1, 4, size=6))
    stack = planted(rng, 2, 3, 24, widths)
    results = attnrank.scan(stack, epsilon=1e-9, max_dk=6, jobs=2)
    check_planted(results, widths, (2, 3))
    torch = pytest.importorskip("torch")
    again = attnrank.scan(torch.from_numpy(stack), epsilon=1e-9, max_dk=6)  # read exactly, as the array
    assert [h["width_upper"] for h in again] == [h["width_upper"] for h in results]


def test_bad_slices_raise_value_error_naming_them():
    rng = np.random.default_rng(SEED)
    stack = planted(rng, 1, 2, 5, [1, 1])
    stack[0, 1, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"\[0,1\]\[2, 3\] \(0-based\)"):
        attnrank.scan(stack)
    with pytest.raises(ValueError, match="not square"):
        attnrank.scan(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="epsilon"):
        attnrank.scan(stack[:, :1], epsilon=2)


def _answers(rows):
    """Everything a scan says of its heads but the time it took."""
    return [{k: v for k, v in h.items() if k != "seconds"} for h in rows]


def test_every_dtype_and_layout_gives_the_answer_of_its_doubles(tmp_path):
    # float32 is read in place (a memory-mapped stack too), the rest as float64: the
    # same values give the same answers, in any order or stride.
    rng = np.random.default_rng(SEED)
    exact32 = planted(rng, 2, 2, 12, [1, 2, 3, 2]).astype(np.float32)
    doubles = _answers(attnrank.scan(exact32.astype(np.float64), d_k=2, epsilon=0.01, time_limit=None))
    path = tmp_path / "stack.npy"
    np.save(path, exact32)
    mapped = np.load(path, mmap_mode="r")
    fortran = np.asfortranarray(exact32)
    strided = np.ascontiguousarray(np.swapaxes(exact32, -1, -2)).swapaxes(-1, -2)  # a transposed view
    for stack in (exact32, mapped, fortran, strided):
        assert _answers(attnrank.scan(stack, d_k=2, epsilon=0.01, time_limit=None)) == doubles
    half = exact32.astype(np.float16)
    assert _answers(attnrank.scan(half, d_k=2, time_limit=None)) == \
        _answers(attnrank.scan(half.astype(np.float64), d_k=2, time_limit=None))


@pytest.mark.skipif(not CLI, reason="ATTNRANK_CLI (the attnrank command) is not set")
def test_the_same_answer_as_the_command_line(tmp_path):
    rng = np.random.default_rng(SEED)
    stack = planted(rng, 2, 2, 10, [1, 2, 3, 1])
    path = tmp_path / "stack.npy"
    np.save(path, stack)
    doc = json.loads(subprocess.run([CLI, "scan", str(path), "--dk", "2", "--epsilon", "0.01", "--json",
                                     "--time-limit", "0"], check=True, capture_output=True, text=True).stdout)
    mine = attnrank.scan(stack, d_k=2, epsilon=0.01, time_limit=None)
    for a, b in zip(doc["heads"], mine):
        a.pop("seconds"), b.pop("seconds")
        assert a == b


def test_planted_heads_on_a_dask_local_cluster_with_two_worker_processes(tmp_path):
    distributed = pytest.importorskip("distributed", reason="python3-distributed (Dask) is not installed: "
                                      "scripts/install-deps --test installs it")
    rng = np.random.default_rng(SEED)
    widths = list(rng.integers(1, 4, size=10))
    stack = planted(rng, 2, 5, 24, widths)
    path = tmp_path / "stack.npy"
    np.save(path, stack.astype(np.float32))
    mapped = np.load(path, mmap_mode="r")
    bad = stack.copy()
    bad[1, 3, 4, 5] = -0.25
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        # 10 tasks: more than the four the client sends ahead of the results
        results = attnrank.scan(stack, epsilon=1e-9, max_dk=6, client=client)
        # float32, memory-mapped, 4 heads per task (the last task 2)
        from_file = attnrank.scan(mapped, epsilon=1e-9, max_dk=6, client=client, heads_per_task=4)
        with pytest.raises(ValueError, match="negative"):  # a worker's error, raised here
            attnrank.scan(bad, epsilon=1e-9, max_dk=6, client=client)
        workers = client.run(lambda: os.getpid())
    assert len(set(workers.values())) == 2  # two processes really ran
    check_planted(results, widths, (2, 5))
    local = attnrank.scan(stack, epsilon=1e-9, max_dk=6)
    assert [h["width_upper"] for h in results] == [h["width_upper"] for h in local]
    assert _answers(from_file) == _answers(attnrank.scan(mapped, epsilon=1e-9, max_dk=6))


def test_the_traps_are_named():
    """Causal heads without the causal mask, and weights a float16 save turned into zeros: each
    head says why (the note), with its zero count and smallest weight; logits are refused."""
    rng = np.random.default_rng(SEED)
    stack = planted(rng, 1, 3, 8, [2, 2, 2])
    causal = np.tril(stack)
    causal /= causal.sum(axis=-1, keepdims=True)
    # Python warns each note once, with its heads, where the command line prints it (InputWarning)
    with pytest.warns(attnrank.InputWarning) as warned:
        rows = attnrank.scan(causal)
    assert [str(w.message) for w in warned] == [f"3 heads ([0, 0], [0, 1], [0, 2]): {rows[0]['note']}"]
    for h in rows:
        assert h["zero_entry"] and h["zero_entries"] == 8 * 7 // 2
        assert "with the causal mask (mask = causal)" in h["note"]
        assert h["smallest_weight"] == causal[tuple(h["index"])][causal[tuple(h["index"])] > 0].min()
    with warnings.catch_warnings():
        warnings.simplefilter("error", attnrank.InputWarning)  # no note, no warning
        assert all("note" not in h and h["zero_entries"] == 0 for h in attnrank.scan(causal, mask="causal"))
    squashed = causal.copy()
    squashed[0, 1, 5, 0] = 0  # what a float16 save does to a weight below 6e-8
    with pytest.warns(attnrank.InputWarning, match=r"^1 head \(\[0, 1\]\): .*float16"):
        heads = attnrank.scan(squashed, mask="causal")
    assert [h["zero_entries"] for h in heads] == [0, 1, 0]
    assert "float16" in heads[1]["note"] and "note" not in heads[0]
    with pytest.raises(ValueError, match=r"is -2\.5: attention weights cannot be negative.*softmax first"):
        attnrank.scan(np.where(np.eye(8, dtype=bool), -2.5, 1.0)[None])


def test_the_default_scan_reads_no_clock():
    """Two default scans, one of them beside two busy processes, give the same heads but for
    `seconds`: the optimiser's default is a fixed amount of work, not a time limit."""
    rng = np.random.default_rng(SEED + 73)
    stack = planted(rng, 1, 2, 24, [3, 5]) * 0.9 + 0.1 / 24  # smoothed: the cheap band leaves them open
    first = attnrank.scan(stack, d_k=2, epsilon=0.01, jobs=1)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        second = attnrank.scan(stack, d_k=2, epsilon=0.01, jobs=1)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert any(h["refined"] for h in first), "the optimiser did not run: the test proves nothing"
    strip = [[{k: v for k, v in h.items() if k != "seconds"} for h in rows] for rows in (first, second)]
    assert strip[0] == strip[1]
    assert all(not h["time_limit_reached"] for h in first)
