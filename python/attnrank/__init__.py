"""attnrank: trustworthy numerics of multi-head attention, from Python.

The functions take NumPy arrays (float64, float32, float16 and integers are read
exactly: every float is the dyadic rational it stores), object arrays or nested
lists of ``fractions.Fraction``, ``int`` or strings ("1/3", "0.8") for exact
rationals, and PyTorch tensors (through ``.numpy()``). They return what the
``attnrank`` command prints with ``--json``, as plain Python: dicts with the same
keys, integers for counts and ranks, strings for exact and certified decimals,
and NumPy arrays for numeric matrices (witness heads, the double tier's matrices). Bad input raises ``ValueError``
with the command's message. See docs/python.md.
"""

import json as _json
from fractions import Fraction as _Fraction

import numpy as _np

from . import _attnrank as _core

__all__ = ["reach", "width", "rank", "det", "svd", "layer", "check_kernel", "from_torch", "exact_matrix"]


def _exact_text(value):
    """One entry of an exact input as attnrank's text: p/q, an integer or a decimal."""
    if isinstance(value, (bool, _np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, _np.integer)):
        return str(int(value))
    if isinstance(value, (float, _np.floating)):
        f = _Fraction(float(value))  # exact: the double's own value
        return f"{f.numerator}/{f.denominator}"
    if isinstance(value, _Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, str):
        return value
    # decimal.Decimal and other exact types print exactly
    return str(value)


def exact_matrix(value, name="matrix"):
    """``value`` as attnrank's exact matrix (an ``ExactMatrix``); ``name`` is used in messages."""
    if isinstance(value, _core.ExactMatrix):
        return value
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch.Tensor
        value = value.detach().cpu().numpy()
    array = _np.asarray(value) if not isinstance(value, list) else None
    if array is not None and array.dtype != object and array.dtype.kind not in "USO":
        if array.ndim != 2:
            raise ValueError(f"{name}: a 2-D array is needed, this one has shape {array.shape}")
        return _core.from_array(array, name)
    rows = value if array is None else array.tolist()
    if not isinstance(rows, list) or not rows or not all(isinstance(r, (list, tuple)) for r in rows):
        raise ValueError(f"{name}: a 2-D array or a list of rows is needed")
    return _core.from_rows([[_exact_text(v) for v in row] for row in rows], name)


def _numeric_arrays(node):
    """Matrices of JSON numbers (witness heads, weights) as float64 NumPy arrays; a
    certificate stays plain JSON, so that it can be written out and checked."""
    if isinstance(node, dict):
        return {k: v if k.startswith("certificate") else _numeric_arrays(v) for k, v in node.items()}
    if isinstance(node, list):
        if node and all(isinstance(r, list) and r and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                         for v in r) for r in node):
            return _np.array(node, dtype=float)
        return [_numeric_arrays(v) for v in node]
    return node


def _run(args, inputs):
    """Runs ``attnrank ARGS --json`` in process on ``inputs`` (name -> matrix)."""
    names = list(inputs)
    matrices = [exact_matrix(inputs[n], n) for n in names]
    code, out, err = _core.run([str(a) for a in args], matrices)
    message = err.strip()
    if message.startswith("attnrank: "):
        message = message[len("attnrank: "):]
    for k in reversed(range(len(names))):  # @10 before @1
        message = message.replace(f"@{k}", names[k])
    if code == 2:
        raise ValueError(message)
    if code != 0:
        raise RuntimeError(message)
    return _numeric_arrays(_json.loads(out))


def _mask_args(mask, inputs):
    if mask is None:
        return []
    if isinstance(mask, str):
        if mask not in ("causal", "none"):
            raise ValueError(f"mask: '{mask}' is not 'causal' or 'none' (or pass a 0/1 array)")
        return ["--mask", mask]
    inputs["mask"] = mask
    return ["--mask", f"@{len(inputs) - 1}"]


def reach(A, d_k, *, epsilon=None, mask=None, x=None, bits=53):
    """Can a head of width ``d_k`` produce the attention pattern ``A``? The verdict, its proof
    and, with ``epsilon``, the approximate question; ``mask`` ("causal" or a 0/1 array) asks the
    masked question, ``x`` fixes the embeddings. Keys as ``attnrank reach --json``."""
    inputs = {"A": A}
    args = ["reach", "@0", "--dk", int(d_k), "--bits", int(bits), "--json"]
    if epsilon is not None:
        args += ["--epsilon", repr(float(epsilon))]
    args += _mask_args(mask, inputs)
    if x is not None:
        inputs["x"] = x
        args += ["--x", f"@{len(inputs) - 1}"]
    return _run(args, inputs)


def width(A, epsilon, *, max_dk=None, mask=None):
    """The smallest head width whose best head comes within ``epsilon`` of ``A`` (proven bounds)."""
    inputs = {"A": A}
    args = ["width", "@0", "--epsilon", repr(float(epsilon)), "--json"]
    if max_dk is not None:
        args += ["--max-dk", int(max_dk)]
    args += _mask_args(mask, inputs)
    return _run(args, inputs)


def rank(M, mode="exact"):
    """The rank of ``M``: mode "exact" (rational arithmetic), "certified" (proven bounds) or
    "numeric" (an SVD with a tolerance, not proven)."""
    return _run(["rank", "@0", "--mode", mode, "--json"], {"M": M})


def det(M, mode="exact"):
    """The determinant of ``M``: exact, or a certified enclosure with mode "certified"."""
    return _run(["det", "@0", "--mode", mode, "--json"], {"M": M})


def svd(M, top=None):
    """Certified singular values of ``M`` (the ``top`` largest, if given)."""
    args = ["svd", "@0", "--json"]
    if top is not None:
        args += ["--top", int(top)]
    return _run(args, {"M": M})


def _as_arrays(node):
    """Matrices of decimal strings (the double tier's) as float64 NumPy arrays."""
    if isinstance(node, dict):
        return {k: _as_arrays(v) for k, v in node.items()}
    if isinstance(node, list):
        if node and all(isinstance(r, list) and r and all(isinstance(v, str) for v in r) for r in node):
            try:
                return _np.array([[float(v) for v in r] for r in node])
            except ValueError:
                pass
        return [_as_arrays(v) for v in node]
    return node


def layer(x, wq, wk, wv, wo, heads, *, tier="double", digits=None, mask=None, bits=None):
    """Multi-head attention on ``x`` with weights in attnrank's layout (``Q = x wq``; see
    ``from_torch`` for PyTorch's), with every intermediate. ``tier`` is "double", "mp" (MPFR) or
    "interval" (certified: every printed digit proven). Matrices come back as NumPy arrays for
    "double" (printed with 17 digits, so the arrays hold the tier's doubles) and as decimal
    strings otherwise (``digits`` of them; the CLI's default is 6)."""
    inputs = {"x": x, "wq": wq, "wk": wk, "wv": wv, "wo": wo}
    args = ["layer", "--x", "@0", "--wq", "@1", "--wk", "@2", "--wv", "@3", "--wo", "@4",
            "--heads", int(heads), "--tier", tier, "--json"]
    if digits is None and tier == "double":
        digits = 17  # every double's digits: the arrays are the double tier's own values
    if digits is not None:
        args += ["--digits", int(digits)]
    if bits is not None:
        args += ["--bits", int(bits)]
    args += _mask_args(mask, inputs)
    result = _run(args, inputs)
    return _as_arrays(result) if tier == "double" else result


def _float_array(value, name):
    """A float or integer array (a torch tensor through ``.numpy()``) as it is, for an .npy file."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        t = value.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: float32 holds every bfloat16 exactly
            t = t.float()
        value = t.numpy()
    array = _np.asarray(value)
    if array.dtype.kind not in "fiub":
        raise ValueError(f"{name}: a float or integer array is needed, not dtype {array.dtype}")
    if array.ndim < 2 or array.ndim > 4:
        raise ValueError(f"{name}: shape {array.shape}: (N, d), (H, N, d) or (B, H, N, d) is needed")
    return array


def check_kernel(q, k, v, candidate, reference=None, *, mask=None, scale=None, fallback="auto", bits=None):
    """The certified error of an attention kernel's output ``candidate`` (and of ``reference``)
    against the exact ``softmax(scale q k^T) v``, as ``attnrank check-kernel --json``: per output,
    ``max_abs_error_lower`` / ``_upper`` (decimal strings), the relative bounds, the worst entry;
    with a reference, ``ratio_lower`` / ``ratio_upper`` of the two errors. Arrays are NumPy arrays
    or torch tensors of shape (N, d), (H, N, d) or (B, H, N, d), any float dtype, read exactly.
    ``mask`` is "causal", "none" or an N x N 0/1 array; ``scale`` defaults to 1/sqrt(d).
    NaN or infinite entries of ``candidate`` or ``reference`` are reported (``nonfinite``, an
    infinite error, ``worst`` at the first in C order); in q, k or v they raise ValueError."""
    import os
    import tempfile

    arrays = {"q": q, "k": k, "v": v, "candidate": candidate}
    if reference is not None:
        arrays["reference"] = reference
    with tempfile.TemporaryDirectory(prefix="attnrank-") as tmp:
        args = ["check-kernel"]
        for name, value in arrays.items():
            path = os.path.join(tmp, name + ".npy")
            _np.save(path, _float_array(value, name))
            args += ["--" + name, path]
        inputs = {}
        if mask is not None and not isinstance(mask, str):
            path = os.path.join(tmp, "mask.npy")
            _np.save(path, _np.asarray(mask))
            args += ["--mask", path]
        else:
            args += _mask_args(mask, inputs)
        if scale is not None:
            args += ["--scale", repr(float(scale))]
        args += ["--fallback", fallback, "--json"]
        if bits is not None:
            args += ["--bits", int(bits)]
        code, out, err = _core.run([str(a) for a in args], [])
        message = err.strip().replace(tmp + os.sep, "")
        if message.startswith("attnrank: "):
            message = message[len("attnrank: "):]
        if code == 2:
            raise ValueError(message)
        if code != 0:
            raise RuntimeError(message)
        return _json.loads(out)


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
