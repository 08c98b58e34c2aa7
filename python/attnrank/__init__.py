"""attnrank: trustworthy numerics of multi-head attention, from Python.

Every function calls attnrank's C++ analyses directly (no command line, no JSON
text in between) and releases the GIL while they compute, so other Python threads
run meanwhile and several analyses can run side by side in threads.

Inputs are read exactly: NumPy float64, float32 and float16 arrays (every float
is the dyadic rational it stores), integer and bool arrays, object arrays or
nested lists of ``fractions.Fraction``, ``int`` or strings ("1/3", "0.8") for
exact rationals, and PyTorch tensors. Results are the documents of the
``attnrank`` command's ``--json`` (same keys, docs/schema/), as Python objects:
dicts, integers for counts and ranks, strings for exact rationals and for proven
bounds (a bound's decimal string is rounded outward so that it is still the
bound: do not turn it into a float and call that certified), and float64 NumPy
arrays for numeric matrices (witness heads). Bad input raises ``ValueError`` with
the library's message. See docs/python.md.

NumPy is imported only when an array is passed or returned: without it, lists of
rows (of ints, ``Fraction``s, strings or floats) work, and numeric matrices come
back as lists of floats.
"""

import itertools as _itertools
from fractions import Fraction as _Fraction
import operator as _operator
import os as _os
import textwrap as _textwrap
import sys as _sys

from . import _attnrank as _core

__version__ = _core.__version__

__all__ = ["InputWarning", "reach", "check_certificate", "width", "rank", "det", "svd", "layer", "check_kernel", "from_torch",
           "exact_matrix", "scan", "scan_model", "attention_patterns", "mha_adapter", "gpt2_adapter", "save_safetensors", "scan_frame",
           "scan_heatmap", "scan_brackets"]


def _numpy(name="input"):
    """NumPy, imported on first use (only arrays need it); ValueError naming ``name`` without it."""
    try:
        import numpy
    except ImportError:
        raise ValueError(f"{name}: arrays need NumPy (pip install numpy, or attnrank[numpy]); "
                         "without it, pass a list of rows") from None
    return numpy


def _numpy_types(*names):
    """NumPy's scalar types ``names`` when NumPy is loaded, else (): a value cannot be one then."""
    np = _sys.modules.get("numpy")
    return tuple(getattr(np, n) for n in names) if np is not None else ()


def _exact_text(value):
    """One entry of an exact input as attnrank's text: p/q, an integer or a decimal."""
    if isinstance(value, (bool,) + _numpy_types("bool_")):
        return "1" if value else "0"
    if isinstance(value, (int,) + _numpy_types("integer")):
        return str(int(value))
    if isinstance(value, (float,) + _numpy_types("floating")):
        f = _Fraction(float(value))  # exact: the double's own value
        return f"{f.numerator}/{f.denominator}"
    if isinstance(value, _Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, str):
        return value
    # decimal.Decimal and other exact types print exactly
    return str(value)


def _is_torch(value):
    return hasattr(value, "detach") and hasattr(value, "numpy")


def _from_torch(value):
    """A torch tensor's values as a NumPy array, exactly (NumPy has no bfloat16: float32
    holds every bfloat16 exactly), and "bfloat16" when it was one (else None)."""
    t = value.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        return t.float().numpy(), "bfloat16"
    if str(t.dtype) in ("torch.float8_e4m3fn", "torch.float8_e5m2"):  # torch >= 2.1: the codes, read as FP8
        return t.view(_torch_uint8(t)).numpy(), "uint8"
    return t.numpy(), None


def _torch_uint8(t):
    import torch
    return torch.uint8


class InputWarning(UserWarning):
    """What the ``attnrank`` command prints on stderr as ``attnrank: note: ...``: something
    about the input that the answer depends on (rows that do not sum to 1, a pattern whose
    float32 softmax underflowed, ...). The result is still right; the note says what it is
    about. Turn it into an error with ``warnings.simplefilter("error", attnrank.InputWarning)``."""


def _note(text, stacklevel=3):
    import warnings
    warnings.warn(text, InputWarning, stacklevel=stacklevel)


def _max_size(max_size):
    """The largest n a matrix may have (None: the library's default, 8192), as ``--max-size``."""
    return _optional_integer("max_size", max_size, (1, 1 << 30), "an integer >= 1: the largest n a matrix may have, or None")


def exact_matrix(value, name="matrix", *, max_size=None):
    """``value`` as attnrank's exact matrix (an ``ExactMatrix`` with ``.shape`` and
    ``.entry(i, j)`` as "p/q"); ``name`` is used in messages. A NumPy array or torch
    tensor is read as the command line reads an .npy file of it (a 1-D array is one
    row); a list of rows (or one row) and an object array value by value: ``str``,
    ``int`` and ``Fraction`` as a text file's cells, a ``float`` as the double it is,
    ``None`` as an empty cell. Bad input raises ValueError in the command line's words.
    ``max_size`` raises the largest n a matrix may have (``--max-size``)."""
    if isinstance(value, _core.ExactMatrix):
        return value
    size = _max_size(max_size)
    if _is_torch(value):
        value = _from_torch(value)[0]
    if isinstance(value, (list, tuple)):
        return _core.from_values(value, name, size)
    return _core.from_array(_numpy(name).asarray(value), name, size)


def _float_matrix(value):
    """A 2-D float NumPy array of ``value`` (a NumPy array or torch tensor of floats), or
    None for anything else: the analyses that work on doubles read it straight into
    doubles, as the CLI reads a .npy, instead of into exact rationals first."""
    if _is_torch(value):
        value = _from_torch(value)[0]
    if type(value).__module__ != "numpy" or getattr(value, "ndim", 0) not in (1, 2):
        return None
    return value if value.dtype.kind == "f" else None


def _mask(mask, n):
    """None, "none", "causal" or a 0/1 matrix as the library's mask (None: every key allowed)."""
    if mask is None:
        return None
    if isinstance(mask, str):
        return _core.named_mask(mask, n)
    return _core.mask_from_matrix(exact_matrix(mask, "mask"))


_INDEX = (-(1 << 63), (1 << 63) - 1)  # the C++ side's Eigen::Index
_UNSIGNED = (0, (1 << 32) - 1)
_SEED = (0, (1 << 64) - 1)
_INT = (-(1 << 31), (1 << 31) - 1)  # a C++ int: the library checks the range it takes


def _integer(name, value, bounds, allowed=None):
    """``value`` as a Python int within ``bounds`` (inclusive), or ValueError naming the
    argument and what it takes: never the binding's TypeError for a negative count, a
    float or a string. ``allowed`` says what the argument takes, for the message."""
    try:
        number = _operator.index(value)  # int, bool, NumPy integers; not floats or strings
    except TypeError:
        raise ValueError(f"{name}: {value!r} is not an integer ({allowed or 'a whole number'})") from None
    low, high = bounds
    if not low <= number <= high:
        raise ValueError(f"{name}: {number} is out of range ({allowed or f'{low} <= {name} <= {high}'})")
    return number


def _optional_integer(name, value, bounds, allowed=None):
    return None if value is None else _integer(name, value, bounds, allowed)


# What every reader of matrices takes beside a question's own options (the command line's
# --max-size, given before the command).
_MAX_SIZE_DOC = ("max_size: the largest n (rows or columns) a matrix may have, 8192 when None; larger inputs "
                 "are refused naming it, as the command line refuses them without --max-size N.")


def _documented(binding, extra=None):
    """Gives the public function the binding's docstring (the library's help, which the
    command line's --help prints too), then what is Python's own (``extra``)."""
    def apply(function):
        doc = binding.__doc__ or ""
        if extra:
            doc += "\n" + _textwrap.fill(extra, 88) + "\n"
        if "max_size" in function.__code__.co_varnames[:function.__code__.co_argcount + function.__code__.co_kwonlyargcount]:
            doc += "\n" + _textwrap.fill(_MAX_SIZE_DOC, 88) + "\n"
        function.__doc__ = doc
        return function
    return apply


def _noted(document, stacklevel=4):
    """``document``, after an InputWarning for each note the command line would print with it."""
    if document.get("rows_sum_to_one") is False:
        _note(_core.rows_not_normalised_note, stacklevel=stacklevel)
    for note in document.get("notes", ()):
        _note(note, stacklevel=stacklevel)
    return document


def _seconds(value):
    """A time limit as a float (the library decides what it means: None is the default fixed work, 0 the full
    search without a limit, a positive number the full search within that many seconds)."""
    return None if value is None else float(value)


@_documented(_core.reach,
             'Returns the document of ``attnrank reach --json`` as a dict (witness_Q and witness_K as NumPy '
             'arrays).')
def reach(A, d_k, *, epsilon=None, mask=None, x=None, bits=53, seed=1, full_floor=False, refine=None, time_limit=None,
          max_size=None):
    a = exact_matrix(A, "A", max_size=max_size)
    return _noted(_core.reach(a, _integer("d_k", d_k, _INDEX), None if epsilon is None else float(epsilon),
                       _mask(mask, a.shape[0]), None if x is None else exact_matrix(x, "x", max_size=max_size),
                       _integer("bits", bits, _UNSIGNED), _integer("seed", seed, _SEED), bool(full_floor),
                       None if refine is None else bool(refine), _seconds(time_limit)))


@_documented(_core.check_certificate,
             'Returns ``{"valid": True, "reason": ...}``; a rejected certificate raises ValueError with the '
             'reason.')
def check_certificate(A, certificate, *, mask=None, x=None, max_size=None):
    a = exact_matrix(A, "A", max_size=max_size)
    return _core.check_certificate(a, certificate, _mask(mask, a.shape[0]),
                                   None if x is None else exact_matrix(x, "x", max_size=max_size))


@_documented(_core.width,
             'Returns the document of ``attnrank width --json`` as a dict. ``search`` is the old name of '
             '``refine`` (deprecated).')
def width(A, epsilon, *, max_dk=None, mask=None, seed=1, refine=None, time_limit=None, search=None,
          max_size=None):
    if search is not None:
        import warnings
        warnings.warn("width(search=...) is now width(refine=...); the default is the command line's "
                      "(the cheap band, then the optimiser where the bracket is open and within reach)", DeprecationWarning, stacklevel=2)
        refine = bool(search)
    a = exact_matrix(A, "A", max_size=max_size)
    return _core.width(a, float(epsilon), _optional_integer("max_dk", max_dk, _INDEX), _mask(mask, a.shape[0]),
                       _integer("seed", seed, _SEED), None if refine is None else bool(refine), _seconds(time_limit))


@_documented(_core.rank)
def rank(M, mode="exact", *, bits=53, tol=None, top=None, max_size=None):
    options = (str(mode), _integer("bits", bits, _UNSIGNED), None if tol is None else float(tol),
               0 if top is None else _integer("top", top, (1, _INDEX[1]), "an integer >= 1, or None"))
    floats = _float_matrix(M)
    if floats is not None:
        return _core.rank_doubles(floats, *options, _max_size(max_size))
    return _core.rank(exact_matrix(M, "M", max_size=max_size), *options)


@_documented(_core.det)
def det(M, mode="exact", *, bits=53, digits=17, max_size=None):
    return _core.det(exact_matrix(M, "M", max_size=max_size), str(mode), _integer("bits", bits, _UNSIGNED),
                     _integer("digits", digits, (1, 1 << 20), "an integer >= 1"))


@_documented(_core.svd)
def svd(M, top=None, *, gaps=False, max_size=None):
    options = (_optional_integer("top", top, _INDEX), bool(gaps))
    floats = _float_matrix(M)
    if floats is not None:
        return _core.svd_doubles(floats, *options, _max_size(max_size))
    return _core.svd(exact_matrix(M, "M", max_size=max_size), *options)


def _has_numpy():
    """Whether NumPy can be imported (it is then, once)."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _as_arrays(node):
    """Matrices of decimal strings (the double tier's) as float64 NumPy arrays."""
    if isinstance(node, dict):
        return {k: _as_arrays(v) for k, v in node.items()}
    if isinstance(node, list):
        if node and all(isinstance(r, list) and r and all(isinstance(v, str) for v in r) for r in node):
            try:
                rows = [[float(v) for v in r] for r in node]
                return _sys.modules["numpy"].array(rows) if _has_numpy() else rows
            except ValueError:
                pass
        return [_as_arrays(v) for v in node]
    return node


@_documented(_core.layer,
             'Matrices come back as float64 NumPy arrays for tier "double" (the tier\'s own doubles) and as '
             'decimal strings otherwise. ``mask`` is one mask for every head or a list with one per head.')
def layer(x, wq, wk, wv, wo, heads, *, tier="double", digits=None, significant=None, mask=None, bits=None,
          max_size=None):
    xm = exact_matrix(x, "x", max_size=max_size)
    n = xm.shape[0]
    if isinstance(mask, (list, tuple)) and mask and not isinstance(mask[0], (int, float, list, tuple) + _numpy_types("number")):
        masks = [_mask(m, n) or _core.full_mask(n) for m in mask]
    else:
        one = _mask(mask, n)
        masks = [] if one is None else [one]
    if bits is None:
        bits = _core.default_layer_bits
    result = _core.layer(xm, *(exact_matrix(w, name, max_size=max_size) for w, name in
                               ((wq, "wq"), (wk, "wk"), (wv, "wv"), (wo, "wo"))), _integer("heads", heads, _INDEX), str(tier),
                         _optional_integer("digits", digits, _INT), _optional_integer("significant", significant, _INT),
                         _integer("bits", bits, _UNSIGNED), masks)
    return _as_arrays(result) if tier == "double" else result


def _float_array(value, name):
    """A float or integer NumPy array of ``value`` (torch tensors converted exactly) and its dtype name."""
    dtype = None
    if _is_torch(value):
        value, dtype = _from_torch(value)
    return _numpy(name).asarray(value), dtype  # the library refuses a dtype it cannot read, in the CLI's words


def _to_bhsd(x, layout, name):
    """``x`` in attnrank's (..., N, d) layout: FlashAttention's (B, N, H, d) has its sequence
    and head axes swapped (a view; nothing is converted or rounded)."""
    if layout == "bhsd":
        return x
    if layout != "bshd":
        raise ValueError(f"layout: '{layout}' is not 'bhsd' (PyTorch's SDPA) or 'bshd' (FlashAttention's)")
    ndim = x.dim() if _is_torch(x) else _numpy(name).asarray(x).ndim
    if ndim not in (3, 4):
        raise ValueError(f"{name}: layout 'bshd' needs (N, H, d) or (B, N, H, d), not {ndim} dimensions")
    axes = (-3, -2)
    return x.transpose(*axes) if _is_torch(x) else _numpy(name).swapaxes(_numpy(name).asarray(x), *axes)


def _tensor(value, name, keep_nonfinite=False, max_size=None):
    """A float or integer array or torch tensor of 2 to 4 dimensions, read exactly."""
    array, dtype = _float_array(value, name)
    return _core.tensor_from_array(array, name, keep_nonfinite, dtype, max_size)


def _row_tensor(value, name, shapes="(N,), (H, N) or (B, H, N)", most=3, max_size=None):
    """A per-row or per-head tensor (the logsumexp; ALiBi slopes, sinks) of `shapes`, read
    exactly as one (N, 1) matrix per leading index."""
    array, dtype = _float_array(value, name)
    if not 1 <= array.ndim <= most:
        raise ValueError(f"{name}: shape {tuple(array.shape)} has {array.ndim} dimensions; it needs {shapes}")
    return _core.tensor_from_array(array[..., None], name, True, dtype, max_size)


@_documented(_core.check_kernel,
             'Arrays are NumPy arrays or torch tensors (bfloat16 and float8 too), read exactly; '
             '``window_size`` is a pair. FlashAttention\'s names are taken too: ``causal=True`` is '
             '``mask="causal"``, ``softmax_scale`` is ``scale``, and ``layout="bshd"`` reads q, k, v, the '
             'outputs and the gradients as (B, N, H, d) (the result\'s places name batch, head, row and '
             'column either way). For tests, see ``attnrank.testing``.')
def check_kernel(q, k, v, candidate=None, reference=None, *, dout=None, dq=None, dk=None, dv=None, lse=None,
                 dsinks=None, reference_dq=None, reference_dk=None, reference_dv=None, reference_lse=None,
                 reference_dsinks=None, mask=None,
                 window_size=None, alignment="bottom-right", softcap=0.0, alibi_slopes=None, sinks=None,
                 attn_bias=None, fp8_format=None, q_descale=None, k_descale=None, v_descale=None,
                 dropout_mask=None, dropout_p=0.0, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                 max_seqlen_k=None, empty_rows="refuse", scale=None, fallback="auto", bits=None, max_error=None,
                 rtol=None, max_ratio=None, ratio_atol=None, max_size=None, causal=False, softmax_scale=None,
                 layout="bhsd", profile=None, max_ulps=None):
    shapes = _shapes(q, k, v, candidate)
    try:
        return _noted(_check_kernel(q, k, v, candidate, reference, dout, dq, dk, dv, lse, dsinks, reference_dq,
                                    reference_dk, reference_dv, reference_lse, reference_dsinks, mask, window_size,
                                    alignment, softcap, alibi_slopes, sinks, attn_bias, fp8_format, q_descale,
                                    k_descale, v_descale, dropout_mask, dropout_p, cu_seqlens_q, cu_seqlens_k,
                                    max_seqlen_q, max_seqlen_k, empty_rows, scale, fallback, bits, max_error, rtol,
                                    max_ratio, ratio_atol, max_size, causal, softmax_scale, layout, profile,
                                    max_ulps))
    except ValueError as error:
        hint = None if cu_seqlens_q is not None or cu_seqlens_k is not None else _other_layout_hint(shapes, layout)
        if hint is None:
            raise
        raise ValueError(f"{error}; {hint}") from None


def _profile(profile):
    """A precision profile as the library reads it: a name or a JSON file's path (str), or a
    dict of the profile's fields, sent as JSON text; None: no budget."""
    if profile is None:
        return None
    if isinstance(profile, dict):
        import json
        return json.dumps(profile)
    if isinstance(profile, (str, _os.PathLike)):
        text = _os.fspath(profile)
        if text.startswith("{"):
            raise ValueError("profile: pass a dict, a profile's name or a JSON file's path, not JSON text")
        return text
    raise ValueError(f"profile: {type(profile).__name__} is not a profile's name, a JSON file's path or a dict")


def _shapes(*arrays):
    """The shapes of the arrays given (None where one is absent or has none)."""
    return [None if x is None or not hasattr(x, "shape") else tuple(x.shape) for x in arrays]


def _attention_shapes_fit(q, k, v, out):
    """Whether (..., H, N, d) shapes make one attention: the same leading dimensions, K's and
    V's heads and keys equal, Q's heads a multiple of K's, the same d for Q and K, and the
    output (..., H, N, d_v)."""
    if q is None or k is None or v is None or not 3 <= len(q) <= 4 or not len(q) == len(k) == len(v):
        return False
    if q[:-3] != k[:-3] or k[:-3] != v[:-3] or k[-3:-1] != v[-3:-1] or q[-1] != k[-1] or k[-3] == 0:
        return False
    if q[-3] % k[-3] != 0:
        return False
    return out is None or out == q[:-1] + (v[-1],)


def _other_layout_hint(shapes, layout):
    """A sentence when shapes that make no attention in ``layout`` make one in the other (the
    sequence and head axes swapped): the likely mistake is the layout. None otherwise."""
    def swapped(shape):
        return None if shape is None or len(shape) < 3 else shape[:-3] + (shape[-2], shape[-3], shape[-1])

    as_bhsd = list(shapes) if layout == "bhsd" else [swapped(x) for x in shapes]
    other = [swapped(x) for x in as_bhsd]
    if _attention_shapes_fit(*as_bhsd) or not _attention_shapes_fit(*other):
        return None
    if layout == "bhsd":
        return ("these shapes make an attention as FlashAttention's (B, N, H, d): pass layout='bshd' if that is "
                "their layout")
    return "these shapes make an attention as (B, H, N, d): pass layout='bhsd' (the default) if that is their layout"


def _check_kernel(q, k, v, candidate, reference, dout, dq, dk, dv, lse, dsinks, reference_dq, reference_dk,
                  reference_dv, reference_lse, reference_dsinks, mask, window_size, alignment, softcap, alibi_slopes,
                  sinks, attn_bias, fp8_format, q_descale, k_descale, v_descale, dropout_mask, dropout_p,
                  cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, empty_rows, scale, fallback, bits,
                  max_error, rtol, max_ratio, ratio_atol, max_size, causal, softmax_scale, layout, profile,
                  max_ulps):
    size = _max_size(max_size)
    profile = _profile(profile)
    if layout != "bhsd":  # FlashAttention's (B, N, H, d): the sequence and head axes swapped, as views
        if cu_seqlens_q is not None or cu_seqlens_k is not None:
            raise ValueError(f"layout '{layout}' with cu_seqlens: packed sequences are (total, H, d), taken as they are")
        q, k, v, candidate, reference, dout, dq, dk, dv, reference_dq, reference_dk, reference_dv = (
            None if x is None else _to_bhsd(x, layout, name) for x, name in (
                (q, "q"), (k, "k"), (v, "v"), (candidate, "candidate"), (reference, "reference"), (dout, "dout"),
                (dq, "dq"), (dk, "dk"), (dv, "dv"), (reference_dq, "reference_dq"), (reference_dk, "reference_dk"),
                (reference_dv, "reference_dv")))
    if causal:  # FlashAttention's name for the causal mask
        if mask is not None and not (isinstance(mask, str) and mask == "causal"):
            raise ValueError(f"causal=True and mask={mask!r}: give one of them (causal=True is mask='causal')")
        mask = "causal"
    if softmax_scale is not None:  # FlashAttention's name for the scale
        if scale is not None and float(scale) != float(softmax_scale):
            raise ValueError(f"scale={scale!r} and softmax_scale={softmax_scale!r}: give one of them (the same thing)")
        scale = softmax_scale

    def _tensor_(value, name, keep=False):
        return _tensor(value, name, keep, size)

    def _row_tensor_(value, name, *shapes):
        return _row_tensor(value, name, *shapes, max_size=size)

    tq = _tensor_(q, "q")
    causal = isinstance(mask, str) and mask == "causal"
    masks = None
    packed = cu_seqlens_q is not None or cu_seqlens_k is not None
    if mask is not None and not isinstance(mask, str) and (packed or (
            mask.ndim if hasattr(mask, "ndim") else _numpy("mask").ndim(mask)) >= 3):
        # One mask per head, (H, N_q, N_k) or (B, H, N_q, N_k); packed sequences read it padded.
        masks, mask = _tensor_(mask, "mask"), None
    elif mask is not None and not isinstance(mask, str):
        mask = _core.mask_from_matrix(exact_matrix(mask, "mask", max_size=max_size), True, str(empty_rows))
    else:
        if mask is not None:
            _core.named_mask(mask, 1)  # the library's check of the name; "causal" is the flag above
        mask = None
    window = None
    if window_size is not None:
        if len(window_size) != 2:
            raise ValueError(f"window_size: {window_size!r} is not a pair (left, right)")
        window = tuple(_integer("window_size", w, _INDEX, "a number of keys >= 0, or -1") for w in window_size)

    def opt(value, name, keep=True):
        return None if value is None else _tensor_(value, name, keep)

    grads = {}
    refs = {}
    for key, value, ref in (("dq", dq, reference_dq), ("dk", dk, reference_dk), ("dv", dv, reference_dv)):
        if value is not None:
            grads[key] = _tensor_(value, key, True)
        if ref is not None:
            refs[key] = _tensor_(ref, "reference_" + key, True)
    if lse is not None:
        grads["lse"] = _row_tensor_(lse, "lse")
    if reference_lse is not None:
        refs["lse"] = _row_tensor_(reference_lse, "reference_lse")
    if dsinks is not None:
        grads["dsinks"] = _row_tensor_(dsinks, "dsinks", "(H,)", 1)
    if reference_dsinks is not None:
        refs["dsinks"] = _row_tensor_(reference_dsinks, "reference_dsinks", "(H,)", 1)
    return _core.check_kernel(tq, _tensor_(k, "k"), _tensor_(v, "v"), opt(candidate, "candidate"),
                              opt(reference, "reference"), opt(dout, "dout", False), grads, refs,
                              mask, None if scale is None else float(scale), str(fallback),
                              _core.default_fallback_bits if bits is None else _integer("bits", bits, _UNSIGNED),
                              None if max_error is None else float(max_error),
                              None if rtol is None else float(rtol), None if max_ratio is None else float(max_ratio),
                              None if ratio_atol is None else float(ratio_atol), causal, window, str(alignment),
                              float(softcap), None if alibi_slopes is None else _row_tensor_(alibi_slopes, "alibi_slopes", "(H,) or (B, H)", 2),
                              None if sinks is None else _row_tensor_(sinks, "sinks", "(H,)", 1), masks,
                              None if attn_bias is None else _tensor_(attn_bias, "attn_bias", True),
                              "" if fp8_format is None else str(fp8_format),
                              *(None if f is None else _row_tensor_(f, name, "(B, H_kv) or (H_kv,)", 2)
                                for f, name in ((q_descale, "q_descale"), (k_descale, "k_descale"),
                                                (v_descale, "v_descale"))),
                              None if dropout_mask is None else _tensor_(dropout_mask, "dropout_mask"), float(dropout_p),
                              *(None if c is None else _row_tensor_(c, name, "(B + 1,)", 1)
                                for c, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"))),
                              *(None if m is None else _integer(name, m, (0, _INDEX[1]), "a length >= 0")
                                for m, name in ((max_seqlen_q, "max_seqlen_q"), (max_seqlen_k, "max_seqlen_k"))),
                              str(empty_rows), profile, None if max_ulps is None else float(max_ulps))


def from_torch(module):
    """The weights of a ``torch.nn.MultiheadAttention`` in attnrank's layout, as a dict of
    float64 NumPy arrays (wq, wk, wv, wo) and ``heads``, ready for ``layer(x, **w)``.

    PyTorch applies ``x @ W.T`` with W out x in; attnrank multiplies ``x @ W`` with W in x out, so
    every weight is transposed. attnrank's layer has no biases: a module with a bias that is
    not zero raises ValueError."""
    for name in ("in_proj_bias", "bias_k", "bias_v"):
        b = getattr(module, name, None)
        if b is not None and bool((b != 0).any()):
            raise ValueError(f"{name} is not zero; attnrank's layer has no biases (build the module with bias=False)")
    out_bias = getattr(module.out_proj, "bias", None)
    if out_bias is not None and bool((out_bias != 0).any()):
        raise ValueError("out_proj.bias is not zero; attnrank's layer has no biases (build the module with bias=False)")

    def t(w):
        return w.detach().cpu().double().numpy().T.copy()

    if getattr(module, "in_proj_weight", None) is not None:
        e = module.embed_dim
        w = module.in_proj_weight
        wq, wk, wv = t(w[:e]), t(w[e:2 * e]), t(w[2 * e:])
    else:
        wq, wk, wv = t(module.q_proj_weight), t(module.k_proj_weight), t(module.v_proj_weight)
    return {"wq": wq, "wk": wk, "wv": wv, "wo": t(module.out_proj.weight), "heads": module.num_heads}


def _head_stack(tensor):
    """A NumPy array or torch tensor (..., n, n) as a (heads, n, n) view (no copy where
    NumPy can reshape without one: a memory-mapped stack stays on disk) with each
    head's leading index."""
    if _is_torch(tensor):
        tensor = _from_torch(tensor)[0]
    np = _numpy("tensor")
    array = np.asarray(tensor)
    if array.dtype.kind not in "fiub":
        raise ValueError(f"tensor: a float or integer array is needed, not dtype {array.dtype}")
    if array.ndim < 2:
        raise ValueError(f"tensor: shape {array.shape} has {array.ndim} dimensions; a scan needs (..., n, n)")
    if array.dtype.kind in "iu" and array.size and np.abs(array).max() > 2 ** 53:
        raise ValueError("tensor: integers beyond 2^53 are not all doubles")
    lead = array.shape[:-2]
    heads = array.reshape((-1,) + array.shape[-2:])
    index = [list(i) for i in np.ndindex(*lead)] if lead else [[]]
    return heads, index, list(array.shape)


def _exact_floats(heads):
    """Heads as the library reads them without a copy: C-ordered float32 as they are,
    anything else as float64 (exact for every float and integer dtype accepted)."""
    np = _numpy("tensor")
    if heads.dtype == np.float32 or heads.dtype == np.float64:
        return np.ascontiguousarray(heads)
    return np.ascontiguousarray(heads, dtype=np.float64)


def _scan_heads(heads, index, shape, d_k, epsilon, mask, max_dk, jobs, seed, refine, time_limit):
    """The local scan of some heads (what each Dask task runs on its worker)."""
    n = heads.shape[-1]
    return _core.scan(_exact_floats(heads), index, shape, _optional_integer("d_k", d_k, _INDEX),
                      None if epsilon is None else float(epsilon), _mask(mask, n),
                      _optional_integer("max_dk", max_dk, _INDEX),
                      _jobs(jobs), _integer("seed", seed, _SEED), None if refine is None else bool(refine),
                      _seconds(time_limit), "tensor")


def _jobs(jobs):
    """Threads for a local scan, as ``--jobs`` takes them: 0 or None is every core."""
    return 0 if jobs is None else _integer("jobs", jobs, _UNSIGNED, "a whole number >= 0: threads, 0 or None for every core")


@_documented(_core.scan,
             "Returns one dict per head in index order, with the keys of ``attnrank scan --json``'s heads "
             '("index" holds the leading indices). Without ``client`` the heads run on ``jobs`` threads here, '
             'with the GIL released. With ``client`` a ``dask.distributed.Client``, the heads are submitted to'
             ' its cluster, ``heads_per_task`` per task (each worker imports attnrank and computes its heads),'
             ' and gathered in index order; the library itself never needs Dask. The heads are read and sent'
             ' a few tasks ahead of the results, so a memory-mapped stack is never copied whole; each task'
             ' checks its own heads, so a bad head stops the scan when its task runs.')
def scan(tensor, *, d_k=None, epsilon=None, mask=None, jobs=None, client=None, max_dk=None, seed=1, refine=None,
         time_limit=None, heads_per_task=1):
    heads, index, shape = _head_stack(tensor)
    if _core.stack_note(shape):
        _note(_core.stack_note(shape))
    _core.check_scan_options(None if epsilon is None else float(epsilon), None if refine is None else bool(refine),
                             _seconds(time_limit))  # the library's checks, before anything is sent
    _optional_integer("d_k", d_k, _INDEX)
    _optional_integer("max_dk", max_dk, _INDEX)
    _jobs(jobs)
    _integer("seed", seed, _SEED)
    options = (d_k, epsilon, mask, max_dk, jobs, seed, refine, time_limit)
    if client is None:
        return _scan_noted(_scan_heads(heads, index, shape, *options))
    step = _integer("heads_per_task", heads_per_task, (1, _INDEX[1]), "an integer >= 1")
    return _scan_noted(_scan_on_cluster(client, heads, index, shape, step,
                                        (d_k, epsilon, mask, max_dk, 1, seed, refine, time_limit)))


def _scan_noted(rows):
    """``rows``, after one InputWarning per note of the heads (each note once, with the heads it
    concerns, as the scan's table prints it)."""
    notes = {}
    for row in rows:
        if row.get("note"):
            notes.setdefault(row["note"], []).append(row.get("index"))
    for note, which in notes.items():
        shown = ", ".join(str(list(i)) for i in which[:4]) + (", ..." if len(which) > 4 else "")
        _note(f"{len(which)} head{'' if len(which) == 1 else 's'} ({shown}): {note}", stacklevel=4)
    return rows


def _scan_on_cluster(client, heads, index, shape, step, options):
    """The heads on a Dask client's cluster, ``step`` per task on one thread each, in
    index order. Chunks are read from ``heads`` (a memory-mapped stack too) and
    scattered as they are submitted, two per worker thread ahead, a new one as soon as
    any finishes: the client holds a few chunks at a time, never the whole stack, no
    array sits in the task graph, and a slow head keeps no worker waiting."""
    from distributed import as_completed  # there is a client, so Dask is installed
    starts = iter(range(0, len(index), step))
    parts, chunk_of, running = {}, {}, as_completed()

    def send(k):
        data = client.scatter(_exact_floats(heads[k:k + step]), hash=False)
        future = client.submit(_scan_heads, data, index[k:k + step], shape, *options, pure=False)
        chunk_of[future.key] = k
        running.add(future)

    try:
        for k in _itertools.islice(starts, 2 * max(1, sum(client.nthreads().values()))):
            send(k)
        for future in running:
            parts[chunk_of.pop(future.key)] = future.result()
            k = next(starts, None)
            if k is not None:
                send(k)
    except BaseException:
        client.cancel(list(running.futures))
        raise
    return [h for k in sorted(parts) for h in parts[k]]


# Weights to answers, and the scan's table and figure (attnrank/models.py, attnrank/figures.py;
# pandas and matplotlib are imported only when those are called).
from .models import attention_patterns, gpt2_adapter, mha_adapter, save_safetensors, scan_model  # noqa: E402
from .figures import scan_brackets, scan_frame, scan_heatmap  # noqa: E402
