"""Certified assertions for attention-kernel test suites (pytest-friendly).

``assert_attention_close(out, q, k, v)`` passes only when it is *proven* that the
kernel's output ``out`` is within tolerance of the exact attention
softmax(scale q k^T) v of the very numbers in ``q``, ``k``, ``v``: the bounds come
from attnrank's certified enclosure (attnrank.check_kernel), not from a float32
reference with an error of its own. ``assert_attention_grads_close(dq, dk, dv, q, k,
v, dout)`` does the same for a backward pass against the exact gradients, and
``assert_attention_kernel(fn, q, k, v)`` runs a kernel's forward and backward with
autograd on a seeded dout and asserts both. Each raises ``AssertionError`` (what
pytest reports as a failed test) with the certified error bands, the worst entry
and, with a reference, the certified ratio of the two true errors. See
docs/kernels.md ("In a test suite").
"""

import numpy as _np

from . import _attnrank as _core
from . import _from_torch, _is_torch, _to_bhsd, check_kernel as _check_kernel

__all__ = ["assert_attention_close", "assert_attention_grads_close", "assert_attention_kernel", "default_tolerance"]



def _dtype_name(x):
    """float16, bfloat16, float32, float64 (or NumPy's name) for an array or tensor."""
    dtype = x.dtype if hasattr(x, "dtype") else _np.asarray(x).dtype
    return str(dtype).removeprefix("torch.")


def default_tolerance(dtype):
    """(rtol, atol) used when no criterion is given: torch.testing.assert_close's for ``dtype``
    ("float16", "bfloat16", "float32", "float64", or a NumPy/torch dtype), applied to the max:
    max |out - exact| <= atol + rtol max |exact| (the library's table, which also judges whether
    a reference is itself far from exact)."""
    name = str(dtype).removeprefix("torch.")
    tolerance = _core.default_tolerance(name)
    if tolerance is None:
        raise ValueError(f"no default tolerance for dtype {name}: pass max_error (and rtol) or reference")
    return tolerance


def _entry(x, where):
    """out's value at the worst entry (attnrank's layout) in out's own dtype: the shortest
    decimal that reads back to that value (float64 to 17 digits, never through float32)."""
    if _is_torch(x):
        x = _from_torch(x)[0]
    if "token" in where:  # packed sequences: (total, H, d)
        index = (where["token"], where["head"], where["column"])
    elif "row" not in where:  # dsinks: one entry per head
        index = (where["head"],)
    else:
        index = tuple(where.get(key) for key in ("batch", "head") if key in where) + (where["row"], where["column"])
    x = _np.asarray(x)
    if x.ndim < len(index):  # the logsumexp, (N,), (H, N) or (B, H, N): one entry per row
        index = index[:-1][-x.ndim:]
    return str(x[index])


def _place(where, layout="bhsd"):
    """The worst entry's place in the layout the caller passed: (B, H, N, d) or FlashAttention's
    (B, N, H, d), whose indices come in that order."""
    if "row" not in where:
        return f"head {where['head']} (0-based)"
    if "token" in where:
        return (f"token {where['token']} (sequence {where['sequence']}, row {where['row']}), head {where['head']}, "
                f"column {where['column']} (0-based, packed (total, H, d) layout)")
    if layout == "lse":  # one entry per query row, (B, H, N) in either layout
        parts = [f"{key} {where[key]}" for key in ("batch", "head", "row") if key in where]
        return ", ".join(parts) + " (0-based, (B, H, N) layout)"
    order, shape = (("batch", "row", "head", "column"), "(B, N, H, d)") if layout == "bshd" else \
        (("batch", "head", "row", "column"), "(B, H, N, d)")
    parts = [f"{key} {where[key]}" for key in order if key in where]
    return ", ".join(parts) + f" (0-based, {shape} layout)"


def _packed(layout, cu_seqlens_q, cu_seqlens_k):
    """Whether the arrays are packed sequences (FlashAttention's varlen, (total, H, d), taken as
    they are); a layout other than the default with them is refused."""
    if cu_seqlens_q is None and cu_seqlens_k is None:
        return False
    if layout != "bhsd":
        raise ValueError(f"layout '{layout}' with cu_seqlens: packed sequences are (total, H, d), taken as they are")
    return True


def _verdict_line(label, verdict, rule):
    says = {"within": "proven within", "exceeded": "EXCEEDED (proven)",
            "undecided": "NOT PROVEN (the certified bounds straddle it; fallback='always' or more bits narrow them)"}
    return f"  {label} {rule}: {says[verdict]}"


def _check_criteria(max_error, rtol, max_ratio, ratio_atol, has_reference):
    if max_ratio is not None and not has_reference:
        raise ValueError("max_ratio needs a reference (its true error is what the ratio divides by)")
    if rtol is not None and max_error is None:
        raise ValueError("rtol needs max_error (the tolerance is max_error + rtol max |exact|)")
    for label, value in (("max_error", max_error), ("max_ratio", max_ratio), ("rtol", rtol), ("ratio_atol", ratio_atol)):
        if value is not None and not (float(value) >= 0 and float(value) != float("inf")):
            raise ValueError(f"{label}: {value!r} is not a non-negative finite number")


def _ratio_rule(max_ratio, ratio_atol):
    return f"max_ratio {max_ratio:g}" + (f" x error(reference) + ratio_atol {ratio_atol:g}" if ratio_atol else "")


def _tensor_lines(part, name, array, max_error, rtol, max_ratio, ratio_atol, has_reference, layout="bhsd"):
    """The certified bands, worst entry and verdicts of one checked tensor, as message lines."""
    c = part["candidate"]
    lines = []
    if c["nonfinite"]:
        lines.append(f"  {c['nonfinite']} entries of {name} are NaN or infinite; the first at {_place(c['worst'], layout)}")
    if c.get("infinity_missed"):
        lines.append(f"  {c['infinity_missed']} entries of {name} are finite where the exact value is +inf "
                     f"(FlashAttention's lse of a row without a key); the first at {_place(c['worst'], layout)}")
    lines.append(f"  max |{name} - exact|               in [{c['max_abs_error_lower']}, {c['max_abs_error_upper']}]"
                 " (certified)")
    lines.append(f"  max |{name} - exact| / max |exact| in [{c['max_rel_error_lower']}, {c['max_rel_error_upper']}]")
    lines.append(f"  mean |{name} - exact|              in [{c['mean_abs_error_lower']}, {c['mean_abs_error_upper']}]")
    if not c["nonfinite"] and not c.get("infinity_missed"):
        lines.append(f"  largest proven error at {_place(c['worst'], layout)}: {name} = {_entry(array, c['worst'])}")
    if max_error is not None:
        rule = f"max_error {max_error:g}" + (f" + rtol {rtol:g} x max |exact|" if rtol else "")
        lines.append(_verdict_line("tolerance", part["max_error_verdict"], rule))
    if has_reference and "reference" in part:
        r = part["reference"]
        if r["nonfinite"] or r.get("infinity_missed"):
            what = (f"{r['nonfinite']} entries are NaN or infinite" if r["nonfinite"] else
                    f"{r['infinity_missed']} entries are finite where the exact value is +inf")
            lines.append(f"  reference: {what}; the first at {_place(r['worst'], layout)}")
            lines.append("  its error is infinite, so error(candidate) / error(reference) is not defined (band [0, inf])")
            if max_ratio is not None:
                lines.append(f"  ratio {_ratio_rule(max_ratio, ratio_atol)}: NOT JUDGED (the reference is not finite; "
                             "fix the reference, or use max_error)")
        else:
            lines.append(f"  reference: max |reference - exact| in [{r['max_abs_error_lower']}, "
                         f"{r['max_abs_error_upper']}]")
            lines.append(f"  error({name}) / error(reference)    in [{part['ratio_lower']}, {part['ratio_upper']}]")
            if max_ratio is not None:
                lines.append(_verdict_line("ratio", part["max_ratio_verdict"], _ratio_rule(max_ratio, ratio_atol)))
    return lines


def _method_line(meta, what):
    method = "the certified double tier" if meta["method"] == "double" else f"MPFI at {meta['bits']} bits"
    lines = [f"  exact {what} enclosed by {method}, widths <= {meta['enclosure_width']}"]
    if "fallback_skipped" in meta:
        lines.append(f"  note: {meta['fallback_skipped']}")
    return lines


def _passed(part):
    return all(part.get(key) in (None, "within") for key in ("max_error_verdict", "max_ratio_verdict"))


def assert_attention_close(out, q, k, v, *, causal=False, mask=None, scale=None, max_error=None, max_ratio=None,
                           reference=None, rtol=None, ratio_atol=0, layout="bhsd", fallback="auto", bits=None,
                           window_size=None, alignment="bottom-right", softcap=0.0, alibi_slopes=None, sinks=None,
                           attn_bias=None, dropout_mask=None, dropout_p=0.0, cu_seqlens_q=None, cu_seqlens_k=None,
                           max_seqlen_q=None, max_seqlen_k=None, empty_rows="refuse", lse=None, reference_lse=None,
                           lse_max_error=None, lse_rtol=None, softmax_scale=None, profile=None):
    """Asserts, with proof, that ``out`` is close to the exact attention of ``q``, ``k``, ``v``.

    Arrays are NumPy arrays or torch tensors (any device; float16, bfloat16, float32, float64),
    of shape (N, d), (H, N, d) or (B, H, N, d) -- or FlashAttention's (B, N, H, d) with
    ``layout="bshd"`` -- read exactly (a bfloat16 tensor is the dyadic rationals it stores).
    ``causal`` is key j <= query i (with N_q != N_k aligned as ``alignment`` says:
    "bottom-right", FlashAttention's, or "top-left", PyTorch's is_causal); ``window_size=(left,
    right)`` FlashAttention's sliding window (-1: unbounded); ``mask`` an N_q x N_k bool or 0/1
    array (True: may attend); ``scale`` defaults to 1/sqrt(d). K and V may have fewer heads than
    q when their number divides q's (grouped-query attention). ``softcap``, ``alibi_slopes``,
    ``sinks``, ``attn_bias`` and ``dropout_mask`` / ``dropout_p`` are the variants of
    ``attnrank.check_kernel``; with ``cu_seqlens_q`` / ``cu_seqlens_k`` (and optionally
    ``max_seqlen_q`` / ``max_seqlen_k``) the arrays are FlashAttention's packed sequences,
    (total, H, d), as ``flash_attn_varlen_func`` takes them. A query row the mask leaves without
    a key raises ValueError, unless ``empty_rows="zero"``: FlashAttention's output 0 there.

    Criteria (each given one must be proven):
      * ``max_error`` (with ``rtol``): max |out - exact| <= max_error + rtol max |exact|;
      * ``max_ratio`` (needs ``reference``): the error of ``out`` <= max_ratio x the error of
        ``reference`` + ``ratio_atol``, both true errors -- FlashAttention's "at most 2x the error
        of PyTorch's low-precision attention" rule is ``max_ratio=2`` with that output as
        ``reference``; ``ratio_atol`` is its floor (without one, an exact reference lets only an
        exact output pass).
      * Neither: ``max_ratio=2`` with a reference, otherwise torch.testing's (rtol, atol) for
        ``out``'s dtype, on the max (``default_tolerance``).

    ``profile`` (a name such as "fa2-bf16", a dict or a JSON file's path; see
    ``attnrank.check_kernel``) judges ``out`` and ``lse`` against the profile's certified
    error budget, the largest error any correct kernel of that precision may have on these
    inputs, entry by entry: no tolerance to choose. Given alone it is the only criterion.

    ``lse`` is the kernel's logsumexp (B, H, N) -- FlashAttention's ``softmax_lse``, the same in
    either layout -- checked against the exact one: with ``lse_max_error`` (and ``lse_rtol``)
    when given, else by the ratio rule against ``reference_lse`` when ``out`` is judged by one,
    else by its dtype's default tolerance. ``softmax_scale`` is FlashAttention's name for
    ``scale``.

    Raises AssertionError when a criterion is proven violated, or is not proven (the bounds
    straddle it); the message holds the certified bands. Returns the check (the dict of
    ``attnrank.check_kernel``, with the verdicts, all of them under "verdicts") when every
    criterion is proven. A reference proven outside its own dtype's default tolerance gives an
    ``attnrank.InputWarning``: it may share the kernel's bug, and a ratio against it passes."""
    if causal and mask is not None:
        raise ValueError("pass causal=True or mask, not both")
    scale = _scale(scale, softmax_scale)
    _check_criteria(max_error, rtol, max_ratio, ratio_atol, reference is not None)
    if reference_lse is not None and lse is None:
        raise ValueError("reference_lse is given but lse is not: nothing to compare it with")
    if lse_rtol is not None and lse_max_error is None:
        raise ValueError("lse_rtol needs lse_max_error (the tolerance is lse_max_error + lse_rtol max |exact|)")
    _check_criteria(lse_max_error, lse_rtol, None, 0, False)
    if profile is not None:
        return _assert_within_budget(out, q, k, v, causal=causal, mask=mask, scale=scale, max_error=max_error,
                                     max_ratio=max_ratio, reference=reference, rtol=rtol, ratio_atol=ratio_atol,
                                     layout=layout, fallback=fallback, bits=bits, window_size=window_size,
                                     alignment=alignment, lse=lse, reference_lse=reference_lse, profile=profile,
                                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, softcap=softcap,
                                     alibi_slopes=alibi_slopes, sinks=sinks, attn_bias=attn_bias,
                                     dropout_mask=dropout_mask, dropout_p=dropout_p, max_seqlen_q=max_seqlen_q,
                                     max_seqlen_k=max_seqlen_k, empty_rows=empty_rows)
    if max_error is None and max_ratio is None:
        if reference is not None:
            max_ratio = 2.0
        else:
            rtol, max_error = default_tolerance(_dtype_name(out))
    packed = _packed(layout, cu_seqlens_q, cu_seqlens_k)
    arrays = [x if packed else _to_bhsd(x, layout, name) for x, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
    ref = None if reference is None else reference if packed else _to_bhsd(reference, layout, "reference")
    check = _check_kernel(*arrays, ref, mask="causal" if causal else mask, scale=scale, fallback=fallback,
                          bits=bits, max_error=max_error, rtol=rtol, max_ratio=max_ratio,
                          ratio_atol=None if max_ratio is None else ratio_atol, window_size=window_size,
                          alignment=alignment, softcap=softcap, alibi_slopes=alibi_slopes, sinks=sinks,
                          attn_bias=attn_bias, dropout_mask=dropout_mask, dropout_p=dropout_p,
                          cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k, empty_rows=empty_rows)
    lse_check = None
    if lse is not None:
        lse_ratio = max_ratio if lse_max_error is None and reference_lse is not None else None
        if lse_max_error is None and lse_ratio is None:
            lse_rtol, lse_max_error = default_tolerance(_dtype_name(lse))
        lse_check = _check_kernel(*arrays[:3], lse=lse, reference_lse=reference_lse,
                                  mask="causal" if causal else mask, scale=scale, fallback=fallback, bits=bits,
                                  max_error=lse_max_error, rtol=lse_rtol, max_ratio=lse_ratio,
                                  ratio_atol=None if lse_ratio is None else ratio_atol, window_size=window_size,
                                  alignment=alignment, softcap=softcap, alibi_slopes=alibi_slopes, sinks=sinks,
                                  attn_bias=attn_bias, dropout_mask=dropout_mask, dropout_p=dropout_p,
                                  cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                                  max_seqlen_k=max_seqlen_k, empty_rows=empty_rows)
        check = dict(check, lse=lse_check["lse"], verdicts=dict(check.get("verdicts", {}), lse=lse_check["verdicts"]["lse"]))
        check["verdict"] = _combined(v for tensor in check["verdicts"].values() for v in tensor.values())
    failing_out = not _passed(check)
    failing_lse = lse_check is not None and not _passed(lse_check["lse"])
    if not failing_out and not failing_lse:
        return check
    lines = ["attention output not proven close to the exact softmax(scale q k^T) v:" if failing_out else
             "attention logsumexp not proven close to the exact one:"]
    if failing_out:
        lines += _tensor_lines(check, "out", arrays[3], max_error, rtol, max_ratio, ratio_atol, reference is not None,
                               "bhsd" if packed else layout)
    if failing_lse:
        lines.append(" lse:")
        lines += _tensor_lines(lse_check["lse"], "lse", lse, lse_max_error, lse_rtol, lse_ratio, ratio_atol,
                               reference_lse is not None, "lse")
    lines += _method_line(check, "output")
    raise AssertionError("\n".join(lines))


def _budget_lines(check, layout):
    """The budget verdicts of a check with a profile, as message lines."""
    says = {"within": "within budget", "exceeded": "EXCEEDED budget (proven)",
            "undecided": "NOT PROVEN within budget (the certified bounds straddle it)"}
    lines = [f"  error budget of profile {check['budget']['profile']['name']} (the largest error a correct kernel "
             "of that precision may have here, entry by entry):"]
    for tensor in ("out", "lse"):
        b = check["budget"].get(tensor)
        if b is None:
            continue
        place = _place(b["worst"], "lse" if tensor == "lse" else layout)
        lines.append(f"  {tensor}: {says[b['verdict']]}; max |error| / budget in [{b['usage_lower']}, "
                     f"{b['usage_upper']}], largest at {place} (budget there {b['budget_at_worst']})")
    return lines


def _assert_within_budget(out, q, k, v, *, causal, mask, scale, max_error, max_ratio, reference, rtol, ratio_atol,
                          layout, fallback, bits, window_size, alignment, lse, reference_lse, profile, **variants):
    """assert_attention_close with a profile: one check of out (and lse) against the budget and
    any tolerance also given."""
    packed = _packed(layout, variants["cu_seqlens_q"], variants["cu_seqlens_k"])
    arrays = [x if packed else _to_bhsd(x, layout, name) for x, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
    ref = None if reference is None else reference if packed else _to_bhsd(reference, layout, "reference")
    check = _check_kernel(*arrays, ref, lse=lse, reference_lse=reference_lse, mask="causal" if causal else mask,
                          scale=scale, fallback=fallback, bits=bits, max_error=max_error, rtol=rtol,
                          max_ratio=max_ratio, ratio_atol=None if max_ratio is None else ratio_atol,
                          window_size=window_size, alignment=alignment, profile=profile, **variants)
    if check["verdict"] == "within":
        return check
    lines = ["attention output not proven within the profile's error budget:"]
    lines += _tensor_lines(check, "out", arrays[3], max_error, rtol, max_ratio, ratio_atol, reference is not None,
                           "bhsd" if packed else layout)
    lines += _budget_lines(check, "bhsd" if packed else layout)
    lines += _method_line(check, "output")
    raise AssertionError("\n".join(lines))


def _scale(scale, softmax_scale):
    """``scale``, or FlashAttention's ``softmax_scale`` for it (both only when they agree)."""
    if softmax_scale is None:
        return scale
    if scale is not None and float(scale) != float(softmax_scale):
        raise ValueError(f"scale={scale!r} and softmax_scale={softmax_scale!r}: give one of them (the same thing)")
    return softmax_scale


def _combined(verdicts):
    """The verdict over several, by the library's rule (combined_verdict)."""
    return _core.combined_verdict(list(verdicts))


def assert_attention_grads_close(dq, dk, dv, q, k, v, dout, *, causal=False, mask=None, scale=None, max_error=None,
                                 rtol=None, reference=None, max_ratio=None, ratio_atol=0, layout="bhsd",
                                 fallback="auto", bits=None, window_size=None, alignment="bottom-right",
                                 softcap=0.0, alibi_slopes=None, sinks=None, attn_bias=None,
                                 dropout_mask=None, dropout_p=0.0, cu_seqlens_q=None, cu_seqlens_k=None,
                                 max_seqlen_q=None, max_seqlen_k=None, dsinks=None, empty_rows="refuse",
                                 softmax_scale=None):
    """Asserts, with proof, that a backward pass's ``dq``, ``dk``, ``dv`` are close to the exact
    gradients of softmax(scale q k^T) v contracted with ``dout`` (any of the three may be None:
    not checked), and with ``sinks`` the sinks' gradient ``dsinks`` (shape (H,), summed over
    batches: a learnable (H,) sink's ``.grad``). Arrays, ``causal``, ``mask``, ``scale``,
    ``layout`` and the variants (``softcap``, ``alibi_slopes``, ``sinks``, ...) and packed
    sequences (``cu_seqlens_q``, ...) as in ``assert_attention_close``; the exact gradients use
    the exact output, not the kernel's.

    Criteria, applied to each gradient given (each must be proven):
      * ``max_error`` (with ``rtol``): max |dX - exact| <= max_error + rtol max |exact|;
      * ``max_ratio`` (needs ``reference``, the tuple (dq, dk, dv) or (dq, dk, dv, dsinks) of a
        second computation, entries None where absent): error(dX) <= max_ratio x error(reference
        dX) + ``ratio_atol``,
        FlashAttention's gradient rule on true errors;
      * neither: ``max_ratio=2`` with a reference, otherwise torch.testing's (rtol, atol) for
        each gradient's dtype, on the max.

    Raises AssertionError naming each gradient that is proven outside a criterion or not proven
    within it, with its certified bands and worst entry. Returns the check when all pass."""
    if causal and mask is not None:
        raise ValueError("pass causal=True or mask, not both")
    scale = _scale(scale, softmax_scale)
    grads = {"dq": dq, "dk": dk, "dv": dv, "dsinks": dsinks}
    if all(g is None for g in grads.values()):
        raise ValueError("no gradient to check: pass dq, dk, dv or dsinks")
    refs = {}
    if reference is not None:
        if not isinstance(reference, (tuple, list)) or len(reference) not in (3, 4):
            raise ValueError("reference: the tuple (dq, dk, dv) or (dq, dk, dv, dsinks) of a second computation's "
                             "gradients is needed")
        refs = {key: value for key, value in zip(("dq", "dk", "dv", "dsinks"), reference) if value is not None}
        for key in refs:
            if grads[key] is None:
                raise ValueError(f"reference {key} is given but {key} is not: nothing to compare it with")
    _check_criteria(max_error, rtol, max_ratio, ratio_atol, bool(refs))
    per_dtype = max_error is None and max_ratio is None and not refs
    if max_error is None and max_ratio is None and refs:
        max_ratio = 2.0
    packed = _packed(layout, cu_seqlens_q, cu_seqlens_k)
    # dsinks is (H,) in every layout.
    arrays = {key: (None if g is None else g if packed or key == "dsinks" else _to_bhsd(g, layout, key))
              for key, g in grads.items()}
    base = [x if packed else _to_bhsd(x, layout, name) for x, name in ((q, "q"), (k, "k"), (v, "v"))]
    d_out = dout if packed else _to_bhsd(dout, layout, "dout")
    checks = {}
    # One tolerance per dtype when none is given: each gradient is judged by its own dtype's default.
    groups = {}
    for key, g in arrays.items():
        if g is not None:
            groups.setdefault(_dtype_name(g) if per_dtype else "", []).append(key)
    for dtype, keys in groups.items():
        tol_rtol, tol_error = (default_tolerance(dtype) if per_dtype else (rtol, max_error))
        kwargs = {key: arrays[key] for key in keys}
        kwargs.update({"reference_" + key: refs[key] if packed or key == "dsinks"
                       else _to_bhsd(refs[key], layout, "reference " + key)
                       for key in keys if key in refs})
        check = _check_kernel(*base, dout=d_out, mask="causal" if causal else mask, scale=scale, fallback=fallback,
                              bits=bits, max_error=tol_error, rtol=tol_rtol, max_ratio=max_ratio,
                              ratio_atol=None if max_ratio is None else ratio_atol, window_size=window_size,
                              alignment=alignment, softcap=softcap, alibi_slopes=alibi_slopes, sinks=sinks,
                              attn_bias=attn_bias, dropout_mask=dropout_mask, dropout_p=dropout_p,
                              cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                              max_seqlen_k=max_seqlen_k, empty_rows=empty_rows, **kwargs)
        for key in keys:
            checks[key] = (check, tol_error, tol_rtol)
    failing = [key for key in ("dq", "dk", "dv", "dsinks") if key in checks and not _passed(checks[key][0][key])]
    if not failing:
        verdicts = {key: value[0]["verdicts"][key] for key, value in checks.items()}
        return ({key: value[0][key] for key, value in checks.items()} |
                {"backward": next(iter(checks.values()))[0]["backward"], "verdicts": verdicts,
                 "verdict": _combined(v for tensor in verdicts.values() for v in tensor.values())})
    lines = [f"attention gradients not proven close to the exact gradients ({', '.join(failing)}):"]
    for key in failing:
        check, tol_error, tol_rtol = checks[key]
        lines.append(f" {key}:")
        lines += _tensor_lines(check[key], key, arrays[key], tol_error, tol_rtol, max_ratio, ratio_atol, key in refs,
                               "bhsd" if packed else layout)
    lines += _method_line(checks[failing[0]][0]["backward"], "gradients")
    raise AssertionError("\n".join(lines))


def assert_attention_kernel(fn, q, k, v, *, causal=False, mask=None, scale=None, seed=0, max_error=None, rtol=None,
                            grad_max_error=None, grad_rtol=None, reference=None, max_ratio=None, ratio_atol=0,
                            fallback="auto", bits=None, window_size=None, alignment="bottom-right", softcap=0.0,
                            alibi_slopes=None, sinks=None, attn_bias=None, dropout_mask=None, dropout_p=0.0,
                            empty_rows="refuse", layout="bhsd", cu_seqlens_q=None, cu_seqlens_k=None,
                            max_seqlen_q=None, max_seqlen_k=None, lse_max_error=None, lse_rtol=None,
                            softmax_scale=None, profile=None):
    """Runs the kernel ``fn(q, k, v) -> out`` (torch tensors, (..., N, d) layout, or FlashAttention's
    (B, N, H, d) with ``layout="bshd"``, the output in the same layout; or packed sequences
    (total, H, d) with ``cu_seqlens_q`` / ``cu_seqlens_k``, which ``fn`` closes over) forward and
    backward with autograd on an upstream gradient drawn from ``torch.randn`` with ``seed`` in
    ``out``'s dtype, and asserts both with proof: ``assert_attention_close`` on ``out`` (with
    ``max_error`` / ``rtol``) and ``assert_attention_grads_close`` on q.grad, k.grad, v.grad
    (with ``grad_max_error`` / ``grad_rtol``). ``causal``, ``mask``, ``scale``, ``window_size``
    and the variants (``softcap``, ``alibi_slopes``, ``sinks``, ``empty_rows``) say what the kernel computes. ``reference`` is a second callable (PyTorch's attention in the same dtype,
    say) run the same way; with it the criterion is FlashAttention's rule, ``max_ratio`` (default
    2) x the reference's true error + ``ratio_atol``, for the output and each gradient. A kernel
    that returns ``(out, lse)``, as FlashAttention's with ``return_softmax_lse``/``return_attn_probs``
    do, has its logsumexp checked too (``lse_max_error`` / ``lse_rtol``, or the reference's lse by
    the ratio rule, else float32's default tolerance); the backward pass runs from ``out``.
    ``profile`` judges the output and the logsumexp against the profile's certified error budget
    (``assert_attention_close``); the gradients, which the budget does not model yet, keep their
    criteria (``grad_max_error``, the reference's ratio, or their dtype's default tolerance). The
    seed is in every failure message. Returns {"out": ..., "lse": ..., "dq": ..., ...,
    "verdicts": {tensor: {criterion: verdict}}, "verdict": "within"}: the checks, and every
    verdict in one place."""
    import torch

    def run(kernel, name):
        leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
        result = kernel(*leaves)
        lse = None
        if isinstance(result, (tuple, list)):
            if len(result) < 2 or not all(_is_torch(x) for x in result[:2]):
                raise ValueError(f"{name} returned a {type(result).__name__} of {len(result)}: it needs to return "
                                 "out, or (out, lse) as torch tensors")
            result, lse = result[0], result[1].detach()
        if not _is_torch(result):
            raise ValueError(f"{name} returned {type(result).__name__}: it needs to return out, or (out, lse), as "
                             "torch tensors")
        generator = torch.Generator(device="cpu").manual_seed(int(seed))
        dout = torch.randn(result.shape, generator=generator, dtype=torch.float32).to(dtype=result.dtype,
                                                                                        device=result.device)
        result.backward(dout)
        return result.detach(), lse, dout, tuple(x.grad for x in leaves)

    out, lse, dout, grads = run(fn, "fn")
    ref_out = ref_lse = ref_grads = None
    if reference is not None:
        ref_out, ref_lse, ref_dout, ref_grads = run(reference, "reference")
        if not bool(torch.equal(ref_dout, dout)):
            raise ValueError("the reference's output dtype differs from the kernel's: the seeded dout would differ")
        if lse is None:
            ref_lse = None  # nothing of the kernel's to compare it with
    common = dict(causal=causal, mask=mask, scale=_scale(scale, softmax_scale), fallback=fallback, bits=bits,
                  window_size=window_size, alignment=alignment, softcap=softcap, alibi_slopes=alibi_slopes,
                  sinks=sinks, attn_bias=attn_bias, dropout_mask=dropout_mask, dropout_p=dropout_p,
                  empty_rows=empty_rows, layout=layout, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                  max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    try:
        forward = assert_attention_close(out, q, k, v, max_error=max_error, rtol=rtol, reference=ref_out,
                                         max_ratio=max_ratio, ratio_atol=ratio_atol, lse=lse, reference_lse=ref_lse,
                                         lse_max_error=lse_max_error, lse_rtol=lse_rtol, profile=profile,
                                         **common)
        backward = assert_attention_grads_close(*grads, q, k, v, dout, max_error=grad_max_error, rtol=grad_rtol,
                                                reference=ref_grads, max_ratio=max_ratio, ratio_atol=ratio_atol,
                                                **common)
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n  (dout drawn with torch.randn, seed={seed})") from None
    verdicts = forward.get("verdicts", {}) | backward["verdicts"]
    result = {"out": forward} | ({"lse": forward["lse"]} if lse is not None else {}) | backward
    return result | {"verdicts": verdicts, "verdict": _combined(v for t in verdicts.values() for v in t.values())}
