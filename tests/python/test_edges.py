"""The edges of input, both front ends: the same bad value gets the same refusal from the
command line and from Python (the library words it: attnrank/io/value_cells.hpp and
binary_array.hpp), each naming its own place -- a text file's line and column, an array's
0-based index. A Python float is an .npy element, a str, int or Fraction a text file's cell,
None an empty cell. Each row of the table in docs/python.md ("Bad input") is a test here.

Random cells come from SEED (ATTNRANK_PY_SEED, default 20261202), printed by conftest.py."""
import json
import math
import os
import random
import re
import subprocess
import warnings
from fractions import Fraction

import numpy as np
import pytest

import attnrank

CLI = os.environ.get("ATTNRANK_CLI")
SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))

pytestmark = pytest.mark.skipif(not CLI, reason="ATTNRANK_CLI (the attnrank binary) is not set")


def run_cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)


def cli_refusal(*args):
    """The CLI's message for args, after checking it refused them as bad input."""
    done = run_cli(*args)
    assert done.returncode == 2, (args, done.returncode, done.stderr)
    assert done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith("attnrank: ")
    return first[len("attnrank: "):]


def python_refusal(call):
    with pytest.raises(ValueError) as raised:
        call()
    return str(raised.value)


def saved(tmp_path, array, name="A.npy"):
    path = str(tmp_path / name)
    np.save(path, array, allow_pickle=array.dtype == object)
    return path


def written(tmp_path, text, name="A.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def text_reason(message, path):
    """(row, column, reason) of a text file's refusal "PATH: line L, column C: why", 0-based."""
    m = re.fullmatch(re.escape(path) + r": line (\d+), column (\d+)(.*)", message)
    assert m, message
    return int(m.group(1)) - 1, int(m.group(2)) - 1, m.group(3)


def value_reason(message, name):
    """(row, column, reason) of a value's refusal "NAME[i, j] (0-based)why"."""
    m = re.fullmatch(re.escape(name) + r"\[(\d+), (\d+)\] \(0-based\)(.*)", message)
    assert m, message
    return int(m.group(1)), int(m.group(2)), m.group(3)


GOOD = [[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]]


def with_cell(value, i=1, j=2):
    rows = [list(r) for r in GOOD]
    rows[i][j] = value
    return rows


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_nonfinite_float_in_a_list_is_refused_as_in_an_npy_file(tmp_path, bad):
    rows = with_cell(bad)
    path = saved(tmp_path, np.array(rows))
    from_cli = cli_refusal("rank", path).replace(path, "M")
    from_python = python_refusal(lambda: attnrank.rank(rows))  # a ValueError, not OverflowError
    assert from_python == from_cli
    assert from_python.startswith("M[1, 2] (0-based) is ") and ": not a finite number" in from_python
    assert ("-inf is a masked score" in from_python) == (bad < 0)  # the logits hint, for -inf only


@pytest.mark.parametrize("cell", ["nan", "inf", "-Infinity", "None", "1/0", "0,5e", "x"])
def test_a_bad_string_in_a_list_is_refused_as_the_same_cell_of_a_text_file(tmp_path, cell):
    rows = with_cell(cell)
    path = written(tmp_path, "\n".join(";".join(str(v) for v in r) for r in rows) + "\n")
    from_cli = text_reason(cli_refusal("rank", path), path)
    from_python = value_reason(python_refusal(lambda: attnrank.rank(rows)), "M")
    assert from_python == from_cli == (1, 2, from_cli[2])


def test_none_is_an_empty_cell(tmp_path):
    rows = np.array(with_cell(None, 1, 1), dtype=object)
    path = written(tmp_path, "0.5;0.25;0.25\n0.25;;0.25\n0.25;0.25;0.5\n")
    from_cli = text_reason(cli_refusal("rank", path), path)
    from_python = value_reason(python_refusal(lambda: attnrank.rank(rows)), "M")
    assert from_cli == (1, 1, ": empty cell (expected a number)")
    assert from_python == from_cli


def test_ragged_rows_name_both_rows(tmp_path):
    rows = [[1, 2, 3], [4, 5]]
    path = written(tmp_path, "1,2,3\n4,5\n")
    from_cli = cli_refusal("rank", path)
    from_python = python_refusal(lambda: attnrank.rank(rows))
    assert from_cli == f"{path}: line 2 has 2 columns, but line 1 has 3 (rows must have equal length)"
    assert from_python == "M: row 1 has 2 entries, but row 0 has 3 (rows must have equal length)"


@pytest.mark.parametrize("one_row", [np.array([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5], [Fraction(1, 5), "3/10", 0.5]])
def test_a_1d_array_or_list_is_one_row_in_both(tmp_path, one_row):
    path = saved(tmp_path, np.array([0.2, 0.3, 0.5]))
    from_cli = json.loads(run_cli("rank", path, "--json").stdout)
    from_python = attnrank.rank(one_row)
    assert from_cli["rank_lower"] == from_python["rank_lower"] == 1
    assert attnrank.exact_matrix(one_row).shape == (1, 3)


@pytest.mark.parametrize("array", [np.array([["1", "2"], ["3", "4"]]), np.array([[1 + 2j, 2], [3, 4]]),
                                   np.array([[b"1", b"2"], [b"3", b"4"]])], ids=["str", "complex", "bytes"])
def test_a_dtype_attnrank_cannot_read_is_refused_in_the_same_words(tmp_path, array):
    path = saved(tmp_path, array)
    from_cli = cli_refusal("rank", path).replace(path, "M")
    from_python = python_refusal(lambda: attnrank.rank(array))
    assert from_python == from_cli
    assert f"dtype '{array.dtype.str}'" in from_python


def test_an_array_of_three_dimensions_says_how_to_pick_a_matrix(tmp_path):
    array = np.full((2, 3, 3), 1 / 3)
    path = saved(tmp_path, array)
    assert python_refusal(lambda: attnrank.rank(array)) == cli_refusal("rank", path).replace(path, "M")


def test_max_size_in_python_and_the_cli(tmp_path):
    wide = np.ones((2, 9000))
    path = saved(tmp_path, wide)
    from_cli = cli_refusal("rank", path).replace(path, "M")
    from_python = python_refusal(lambda: attnrank.rank(wide))
    assert from_python == from_cli
    assert "max_size" in from_python
    assert attnrank.rank(wide, max_size=9000)["rank_upper"] == 1
    assert json.loads(run_cli("--max-size", "9000", "rank", path, "--json").stdout)["rank_upper"] == 1
    assert "max_size" in python_refusal(lambda: attnrank.rank(wide, max_size=0))


def test_the_file_size_cap_is_named_and_raised_by_its_flag(tmp_path):
    path = saved(tmp_path, np.full((20, 20), 0.05))
    message = cli_refusal("--max-file-size", "1KB", "rank", path)
    assert "over the limit of 1000" in message and "max_file_size" in message
    assert run_cli("--max-file-size", "1MB", "rank", path).returncode == 0


def test_work_that_cannot_fit_in_memory_is_refused_up_front():
    message = cli_refusal("--max-size", "200000", "rank", "diag:200000:0.5")
    assert "needs at least" in message and "GB of memory" in message


def test_jobs_take_the_same_range(tmp_path):
    stack = np.full((2, 3, 3), 1 / 3)
    path = saved(tmp_path, stack)
    assert "whole number >= 0" in cli_refusal("scan", path, "--jobs", "-1", "--dk", "1")
    assert "whole number >= 0" in python_refusal(lambda: attnrank.scan(stack, d_k=1, jobs=-1))
    # 0 is every core in both
    assert run_cli("scan", path, "--jobs", "0", "--dk", "1").returncode == 0
    assert len(attnrank.scan(stack, d_k=1, jobs=0)) == 2


def test_rows_not_summing_to_one_are_a_note_in_the_cli_and_a_warning_in_python(tmp_path):
    rows = [[1, 2], [3, 4]]
    path = written(tmp_path, "1,2\n3,4\n")
    done = run_cli("reach", path, "--dk", "1", "--json")
    assert done.returncode == 0
    note = f"attnrank: note: {path}: {attnrank._core.rows_not_normalised_note}"
    assert note in done.stderr.splitlines()
    with pytest.warns(attnrank.InputWarning, match="rows do not sum to 1"):
        attnrank.reach(rows, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", attnrank.InputWarning)
        attnrank.reach([[0.5, 0.5], [0.25, 0.75]], 1)  # rows that sum to 1: no warning


def test_the_kernel_reports_the_same_dtype(tmp_path):
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((8, 4)).astype(np.float32) for _ in range(3))
    s = q.astype(np.float64) @ k.T.astype(np.float64) / 2
    p = np.exp(s - s.max(axis=1, keepdims=True))
    out = ((p / p.sum(axis=1, keepdims=True)) @ v).astype(np.float32)
    paths = [saved(tmp_path, a, f"{n}.npy") for a, n in ((q, "q"), (k, "k"), (v, "v"), (out, "cand"))]
    from_cli = json.loads(run_cli("check-kernel", "--q", paths[0], "--k", paths[1], "--v", paths[2],
                                  "--candidate", paths[3], "--json").stdout)
    from_python = attnrank.check_kernel(q, k, v, out)
    assert from_cli["candidate"]["dtype"] == from_python["candidate"]["dtype"] == "float32"
    assert from_cli["candidate"]["file"] == paths[3] and from_python["candidate"]["file"] == "candidate"


BAD_CELLS = ["nan", "NaN", "-inf", "inf", "Infinity", "None", "null", "true", "1e", "1e+", "--1", "1/0", "0x10",
             "1.2.3", "e5", ".", "+", "(1+2j)", "1e99999", "3/-4", "1//2", "½", "1_000", "-", "∞"]


def test_generated_bad_cells_get_the_same_words_from_both(tmp_path):
    """A property over generated cells: broken numbers and words (from BAD_CELLS, and random
    strings of digits, signs, points, slashes and letters), each put at a random place of a
    random n x n matrix: the CLI reads it from a text file, Python from a list of rows; both
    accept it or both refuse it at the same place for the same reason."""
    rng = random.Random(SEED)
    alphabet = "0123456789+-./eEx "
    for case in range(60):
        if case < len(BAD_CELLS):
            cell = BAD_CELLS[case]
        else:
            cell = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))).strip() or "e"
        n = rng.randint(2, 4)  # a one-cell file of a word would be a header line
        i, j = rng.randrange(n), rng.randrange(n)
        rows = [[str(rng.randint(1, 9)) for _ in range(n)] for _ in range(n)]
        rows[i][j] = cell
        if " " in cell:
            continue  # a space splits a cell of white-space separated text; ';' keeps it whole, as here
        path = written(tmp_path, "\n".join(";".join(r) for r in rows) + "\n", f"case{case}.csv")
        done = run_cli("rank", path)
        try:
            attnrank.rank(rows)
            python_ok = True
        except ValueError as e:
            python_ok, message = False, str(e)
        assert (done.returncode == 0) == python_ok, (SEED, case, cell, done.stderr)
        if not python_ok:
            from_cli = text_reason(done.stderr.splitlines()[0][len("attnrank: "):], path)
            assert value_reason(message, "M") == from_cli, (SEED, case, cell)
