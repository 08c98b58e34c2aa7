"""Certified assertions for attention-kernel test suites (pytest-friendly).

``assert_attention_close(out, q, k, v)`` passes only when it is *proven* that the
kernel's output ``out`` is within tolerance of the exact attention
softmax(scale q k^T) v of the very numbers in ``q``, ``k``, ``v``: the bounds come
from attnrank's certified enclosure (attnrank.check_kernel), not from a float32
reference with an error of its own. It raises ``AssertionError`` (what pytest
reports as a failed test) with the certified error band, the worst entry and,
with a ``reference``, the certified ratio of the two true errors. See
docs/kernels.md ("In a test suite").
"""

import numpy as _np

from . import _from_torch, _is_torch, check_kernel as _check_kernel

__all__ = ["assert_attention_close", "default_tolerance"]

# torch.testing.assert_close's defaults (rtol, atol) by dtype, applied to the max:
# max |out - exact| <= atol + rtol max |exact|.
_DEFAULT_TOLERANCE = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _dtype_name(x):
    """float16, bfloat16, float32, float64 (or NumPy's name) for an array or tensor."""
    dtype = x.dtype if hasattr(x, "dtype") else _np.asarray(x).dtype
    return str(dtype).removeprefix("torch.")


def default_tolerance(dtype):
    """(rtol, atol) used when no criterion is given: torch.testing.assert_close's for ``dtype``
    ("float16", "bfloat16", "float32", "float64", or a NumPy/torch dtype)."""
    name = str(dtype).removeprefix("torch.")
    if name not in _DEFAULT_TOLERANCE:
        raise ValueError(f"no default tolerance for dtype {name}: pass max_error (and rtol) or reference")
    return _DEFAULT_TOLERANCE[name]


def _to_bhsd(x, layout, name):
    """``x`` in attnrank's (..., N, d) layout: FlashAttention's (B, N, H, d) has its sequence
    and head axes swapped (a view; nothing is converted or rounded)."""
    if layout == "bhsd":
        return x
    if layout != "bshd":
        raise ValueError(f"layout: '{layout}' is not 'bhsd' (PyTorch's SDPA) or 'bshd' (FlashAttention's)")
    ndim = x.dim() if _is_torch(x) else _np.asarray(x).ndim
    if ndim not in (3, 4):
        raise ValueError(f"{name}: layout 'bshd' needs (N, H, d) or (B, N, H, d), not {ndim} dimensions")
    axes = (-3, -2)
    return x.transpose(*axes) if _is_torch(x) else _np.swapaxes(_np.asarray(x), *axes)


def _entry(x, where):
    """out's value at the worst entry (attnrank's layout) in out's own dtype: the shortest
    decimal that reads back to that value (float64 to 17 digits, never through float32)."""
    if _is_torch(x):
        x = _from_torch(x)[0]
    index = tuple(where.get(key) for key in ("batch", "head") if key in where) + (where["row"], where["column"])
    return str(_np.asarray(x)[index])


def _place(where):
    parts = [f"{key} {where[key]}" for key in ("batch", "head", "row", "column") if key in where]
    return ", ".join(parts) + " (0-based, (B, H, N, d) layout)"


def _verdict_line(label, verdict, rule):
    says = {"within": "proven within", "exceeded": "EXCEEDED (proven)",
            "undecided": "NOT PROVEN (the certified bounds straddle it; fallback='always' or more bits narrow them)"}
    return f"  {label} {rule}: {says[verdict]}"


def assert_attention_close(out, q, k, v, *, causal=False, mask=None, scale=None, max_error=None, max_ratio=None,
                           reference=None, rtol=None, layout="bhsd", fallback="auto", bits=None):
    """Asserts, with proof, that ``out`` is close to the exact attention of ``q``, ``k``, ``v``.

    Arrays are NumPy arrays or torch tensors (any device; float16, bfloat16, float32, float64),
    of shape (N, d), (H, N, d) or (B, H, N, d) -- or FlashAttention's (B, N, H, d) with
    ``layout="bshd"`` -- read exactly (a bfloat16 tensor is the dyadic rationals it stores).
    ``causal`` is key j <= query i; ``mask`` an N x N bool or 0/1 array (True: may attend);
    ``scale`` defaults to 1/sqrt(d).

    Criteria (each given one must be proven):
      * ``max_error`` (with ``rtol``): max |out - exact| <= max_error + rtol max |exact|;
      * ``max_ratio`` (needs ``reference``): the error of ``out`` <= max_ratio x the error of
        ``reference``, both true errors -- FlashAttention's "at most 2x the error of PyTorch's
        low-precision attention" rule is ``max_ratio=2`` with that output as ``reference``.
      * Neither: ``max_ratio=2`` with a reference, otherwise torch.testing's (rtol, atol) for
        ``out``'s dtype, on the max (``default_tolerance``).

    Raises AssertionError when a criterion is proven violated, or is not proven (the bounds
    straddle it); the message holds the certified bands. Returns the check (the dict of
    ``attnrank.check_kernel``, with the verdicts) when every criterion is proven."""
    if causal and mask is not None:
        raise ValueError("pass causal=True or mask, not both")
    if max_ratio is not None and reference is None:
        raise ValueError("max_ratio needs a reference output (its true error is what the ratio divides by)")
    if rtol is not None and max_error is None:
        raise ValueError("rtol needs max_error (the tolerance is max_error + rtol max |exact|)")
    for label, value in (("max_error", max_error), ("max_ratio", max_ratio), ("rtol", rtol)):
        if value is not None and not (float(value) >= 0 and float(value) != float("inf")):
            raise ValueError(f"{label}: {value!r} is not a non-negative finite number")
    if max_error is None and max_ratio is None:
        if reference is not None:
            max_ratio = 2.0
        else:
            rtol, max_error = default_tolerance(_dtype_name(out))
    arrays = [_to_bhsd(x, layout, name) for x, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
    ref = None if reference is None else _to_bhsd(reference, layout, "reference")
    check = _check_kernel(*arrays, ref, mask="causal" if causal else mask, scale=scale, fallback=fallback,
                          bits=bits, max_error=max_error, rtol=rtol, max_ratio=max_ratio)
    verdicts = [check.get("max_error_verdict"), check.get("max_ratio_verdict")]
    if all(v in (None, "within") for v in verdicts):
        return check
    c = check["candidate"]
    lines = ["attention output not proven close to the exact softmax(scale q k^T) v:"]
    if c["nonfinite"]:
        lines.append(f"  {c['nonfinite']} entries of out are NaN or infinite; the first at {_place(c['worst'])}")
    lines.append(f"  max |out - exact|               in [{c['max_abs_error_lower']}, {c['max_abs_error_upper']}]"
                 " (certified)")
    lines.append(f"  max |out - exact| / max |exact| in [{c['max_rel_error_lower']}, {c['max_rel_error_upper']}]")
    if not c["nonfinite"]:
        lines.append(f"  largest proven error at {_place(c['worst'])}: out = {_entry(arrays[3], c['worst'])}")
    if max_error is not None:
        rule = f"max_error {max_error:g}" + (f" + rtol {rtol:g} x max |exact|" if rtol else "")
        lines.append(_verdict_line("tolerance", check["max_error_verdict"], rule))
    if reference is not None:
        r = check["reference"]
        if r["nonfinite"]:
            lines.append(f"  reference: {r['nonfinite']} entries are NaN or infinite; the first at {_place(r['worst'])}")
            lines.append("  its error is infinite, so error(out) / error(reference) is not defined (band [0, inf])")
            if max_ratio is not None:
                lines.append(f"  ratio max_ratio {max_ratio:g}: NOT JUDGED (the reference is not finite; "
                             "fix the reference, or use max_error)")
        else:
            lines.append(f"  reference: max |reference - exact| in [{r['max_abs_error_lower']}, "
                         f"{r['max_abs_error_upper']}]")
            lines.append(f"  error(out) / error(reference)    in [{check['ratio_lower']}, {check['ratio_upper']}]")
            if max_ratio is not None:
                lines.append(_verdict_line("ratio", check["max_ratio_verdict"], f"max_ratio {max_ratio:g}"))
    method = "the certified double tier" if check["method"] == "double" else f"MPFI at {check['bits']} bits"
    lines.append(f"  exact output enclosed by {method}, widths <= {check['enclosure_width']}")
    if "fallback_skipped" in check:
        lines.append(f"  note: {check['fallback_skipped']}")
    raise AssertionError("\n".join(lines))
