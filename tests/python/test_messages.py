"""One owner per message: the same invalid input gives the same message from the CLI
and from Python (the library words it; each adapter only shows it), with one index
convention (NumPy's, 0-based and labelled: "A[1, 2] (0-based)") and values in decimal.

Each case is an array (saved as A.npy for the CLI, passed as it is to Python), the CLI's
arguments and the Python call. The CLI names the array by its path and Python by its
argument name ("A" for a target, "M" for rank, det and svd), so the path is read as that
name before the messages are compared.
"""
import os
import re
import subprocess

import numpy as np
import pytest

import attnrank

CLI = os.environ.get("ATTNRANK_CLI")

pytestmark = pytest.mark.skipif(not CLI, reason="ATTNRANK_CLI (the attnrank binary) is not set")

causal = np.tril(np.full((3, 3), 1.0))
causal /= causal.sum(axis=1, keepdims=True)
uniform = np.full((3, 3), 1 / 3)
negative = uniform.copy()
negative[1, 2] = -0.25
zero_row = uniform.copy()
zero_row[2] = 0.0
nan_entry = uniform.copy()
nan_entry[1, 2] = np.nan
logits = np.array([[2.5, -1.0, 0.5], [0.0, 1.0, -3.0], [1.0, 1.0, 1.0]])

# name: (array, CLI arguments after the file, Python call on the array A, text both must hold)
CASES = {
    "negative weight": (negative, ["reach", "--dk", "1"], lambda A: attnrank.reach(A, 1),
                        "A[1, 2] (0-based) is -0.25: attention weights cannot be negative"),
    "logits, not probabilities": (logits, ["reach", "--dk", "1"], lambda A: attnrank.reach(A, 1),
                                  "A[0, 1] (0-based) is -1: attention weights cannot be negative"),
    "all-zero row": (zero_row, ["reach", "--dk", "1"], lambda A: attnrank.reach(A, 1),
                     "A[2, :] (0-based) is all zeros"),
    "nan weight": (nan_entry, ["reach", "--dk", "1"], lambda A: attnrank.reach(A, 1),
                   "A[1, 2] (0-based) is nan: not a finite number"),
    "not square": (uniform[:2], ["reach", "--dk", "1"], lambda A: attnrank.reach(A, 1),
                   "the target must be square"),
    "epsilon above 1": (uniform, ["reach", "--dk", "1", "--epsilon", "1.5"],
                        lambda A: attnrank.reach(A, 1, epsilon=1.5), "epsilon 1.5 is outside [0, 1]"),
    "negative time limit": (uniform, ["reach", "--dk", "1", "--epsilon", "0.1", "--time-limit", "-1"],
                            lambda A: attnrank.reach(A, 1, epsilon=0.1, time_limit=-1),
                            "time limit -1 is not a number of seconds >= 0"),
    "width: epsilon above 1": (uniform, ["width", "--epsilon", "2"], lambda A: attnrank.width(A, 2.0),
                               "epsilon 2 is outside [0, 1]"),
    "width: max_dk beyond n": (uniform, ["width", "--epsilon", "0.1", "--max-dk", "4"],
                               lambda A: attnrank.width(A, 0.1, max_dk=4), "max_dk 4 is out of range"),
    "weight where the causal mask blocks": (uniform, ["reach", "--dk", "1", "--mask", "causal"],
                                            lambda A: attnrank.reach(A, 1, mask="causal"),
                                            "A[0, 1] (0-based) is 0.3333333333333333 at a masked position"),
    "bits outside the certified mode": (uniform, ["rank", "--bits", "128"],
                                        lambda A: attnrank.rank(A, "exact", bits=128),
                                        "bits belongs to the certified mode"),
    "svd: top beyond the matrix": (uniform, ["svd", "--top", "4"], lambda A: attnrank.svd(A, 4),
                                   "top 4 is out of range: M is 3 x 3"),
    "det of a non-square matrix": (uniform[:2], ["det"], lambda A: attnrank.det(A),
                                   "the determinant needs a square matrix"),
}


def cli_message(tmp_path, array, args):
    path = str(tmp_path / "A.npy")
    np.save(path, array)
    done = subprocess.run([CLI, args[0], path] + args[1:], capture_output=True, text=True)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith("attnrank: ")
    name = "M" if args[0] in ("rank", "det", "svd") else "A"
    return first[len("attnrank: "):].replace(path, name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_and_python_say_the_same(tmp_path, name):
    array, args, call, expected = CASES[name]
    from_cli = cli_message(tmp_path, array, args)
    with pytest.raises(ValueError) as raised:
        call(array)
    from_python = str(raised.value)
    assert expected in from_cli
    assert from_python == from_cli


def test_messages_show_no_rationals_or_one_based_places(tmp_path):
    """Every message of the catalogue above prints values as decimals (no p/q fractions,
    e.g. -9054133/131072 for a float) and places 0-based (no "row 3, column 4")."""
    for name, (array, args, _, _) in CASES.items():
        message = cli_message(tmp_path, array, args)
        assert not re.search(r"-?\d+/\d+|row \d+, column \d+", message), (name, message)
