"""docs/python.md's kernel example runs as written on the torch Debian ships (1.13, which
has no scaled_dot_product_attention), and says what it says: the candidate's error bounds
and the ratio are decimal strings, lower <= upper."""
import os
import re

import pytest

torch = pytest.importorskip("torch")

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_the_kernel_example_runs():
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    section = page[page.index("## Checking a kernel"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(code, "docs/python.md (Checking a kernel)", "exec"), scope)
    r = scope["r"]
    lower, upper = (float(r["candidate"][k]) for k in ("max_abs_error_lower", "max_abs_error_upper"))
    assert 0 < lower <= upper < 1e-2  # float16 rounding of the output: about 1e-3 at most
    assert float(r["ratio_lower"]) <= float(r["ratio_upper"])
