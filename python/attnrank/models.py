"""Weights to answers in one step: the attention patterns of every
``torch.nn.MultiheadAttention`` in a model (or in a state dict), computed in float64
from the weights and each layer's own input, and their scan.

Guarantee: ``attention_patterns`` is plain float64 arithmetic (not certified): the
patterns are the weights' patterns to about 1e-15, closer than the model's own float32
forward (about 1e-7). The scan that follows certifies every bound for the patterns it
is given, exactly as ``attnrank.scan`` does for an array.
"""
import json
import math
import struct

from . import _attnrank as _core
from . import _is_torch  # one test for a torch tensor, the package's

__all__ = ["attention_patterns", "scan_model", "save_safetensors"]

_DTYPES = {  # NumPy dtype name -> safetensors dtype
    "float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32", "int16": "I16",
    "int8": "I8", "uint8": "U8", "bool": "BOOL",
}


def _np():
    import numpy
    return numpy


def _is_module(value):
    """A torch.nn.Module (of any class, the user's own included), without importing torch
    for users who never pass one."""
    return any(c.__module__.startswith("torch") and c.__name__ == "Module" for c in type(value).__mro__)


def save_safetensors(path, tensors, metadata=None):
    """Writes ``tensors`` (a dict of name -> NumPy array or torch tensor) to ``path`` in the
    safetensors format (an 8-byte little-endian header length, a JSON header of dtype,
    shape and byte offsets, then the raw little-endian data), which ``attnrank scan
    F.safetensors:NAME``, ``layer --state-dict`` and ``check-kernel`` read, and
    ``safetensors.torch.load_file`` too. Every dtype keeps its bits: float64, float32,
    float16, bfloat16 (torch), integers and bool. ``metadata``: an optional dict of
    strings stored in the header. Debian has no safetensors package; this is the one
    function a user needs of it."""
    np = _np()
    if not isinstance(tensors, dict) or not tensors:
        raise ValueError("tensors: a non-empty dict of name -> array is needed")
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError(f"tensor name {name!r}: a non-empty string other than __metadata__ is needed")
        if _is_torch(value):
            import torch
            t = value.detach().cpu().contiguous()
            if t.dtype == torch.bfloat16:
                dtype, data = "BF16", t.view(torch.int16).numpy().astype("<i2").tobytes()
            else:
                array = t.numpy()
                dtype = _DTYPES.get(array.dtype.name)
                data = None if dtype is None else np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
            shape = list(t.shape)
        else:
            array = np.asarray(value)
            dtype = _DTYPES.get(array.dtype.name)
            data = None if dtype is None else np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
            shape = list(array.shape)
        if dtype is None:
            raise ValueError(f"{name}: dtype {getattr(value, 'dtype', type(value))} has no safetensors code")
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _patterns_of(query, key, wq, wk, bq, bk, heads, mask):
    """softmax(q_h k_h^T / sqrt(d_k)) per head in float64: query (B, n, E) and key
    (B, m, E) NumPy arrays, weights in PyTorch's out x in layout; (B, heads, n, m)."""
    np = _np()
    q = query @ wq.T + (0 if bq is None else bq)
    k = key @ wk.T + (0 if bk is None else bk)
    b, n, e = q.shape
    m = k.shape[1]
    if e % heads:
        raise ValueError(f"embed_dim {e} is not divisible by heads = {heads}")
    d = e // heads
    q = q.reshape(b, n, heads, d).transpose(0, 2, 1, 3)
    k = k.reshape(b, m, heads, d).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=-1, keepdims=True)


def _mask_array(mask, n, m):
    np = _np()
    if mask is None or (isinstance(mask, str) and mask == "none"):
        return None
    if isinstance(mask, str):
        _core.named_mask(mask, 1)  # the library's check of the name (and its message)
        return np.tril(np.ones((n, m), dtype=bool))
    array = np.asarray(mask)
    if array.shape != (n, m):
        raise ValueError(f"mask: shape {array.shape}, but the patterns are {n} x {m}")
    if array.dtype == bool:
        raise ValueError("mask: a boolean array is ambiguous (PyTorch's attn_mask has True = blocked); "
                         "pass 0/1 numbers with 1 = the query may attend")
    return array != 0


def _as_batch(x, batch_first):
    """A layer's input as a float64 (B, n, E) array (unbatched (n, E) becomes B = 1)."""
    np = _np()
    if _is_torch(x):
        x = x.detach().cpu().double().numpy()
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:
        return x[None]
    if x.ndim != 3:
        raise ValueError(f"a layer's input has shape {x.shape}; (n, E) or batched (B, n, E) is needed")
    return x if batch_first else x.transpose(1, 0, 2)


def _mha_weights(module):
    """(wq, wk, bq, bk) of an nn.MultiheadAttention as float64 NumPy arrays (out x in)."""
    def t(w):
        return None if w is None else w.detach().cpu().double().numpy()
    e = module.embed_dim
    if getattr(module, "in_proj_weight", None) is not None:
        w = t(module.in_proj_weight)
        wq, wk = w[:e], w[e:2 * e]
    else:
        wq, wk = t(module.q_proj_weight), t(module.k_proj_weight)
    b = t(getattr(module, "in_proj_bias", None))
    return wq, wk, (None if b is None else b[:e]), (None if b is None else b[e:2 * e])


def _from_module(model, inputs, mask):
    """Runs the model once, capturing each MultiheadAttention's query and key inputs,
    and computes every layer's patterns from them in float64."""
    import torch
    layers = [m for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
    if not layers:
        raise ValueError("the model has no torch.nn.MultiheadAttention")
    seen = {id(m): [] for m in layers}

    def capture(module):
        forward = module.forward  # the bound method; the instance attribute below shadows it

        def wrapper(*args, **kwargs):
            query = args[0] if args else kwargs["query"]
            key = args[1] if len(args) > 1 else kwargs.get("key", query)
            seen[id(module)].append((query.detach(), key.detach()))
            return forward(*args, **kwargs)
        module.forward = wrapper

    for m in layers:
        capture(m)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(*inputs) if isinstance(inputs, tuple) else model(inputs)
    finally:
        model.train(was_training)
        for m in layers:
            del m.forward  # the class's forward again
    np = _np()
    out = []
    for m in layers:
        calls = seen[id(m)]
        if len(calls) != 1:
            raise ValueError(f"a MultiheadAttention ran {len(calls)} times in one forward pass; "
                             "attention_patterns needs each to run once")
        query, key = (_as_batch(t, m.batch_first) for t in calls[0])
        wq, wk, bq, bk = _mha_weights(m)
        mask_array = _mask_array(mask, query.shape[1], key.shape[1])
        out.append(_patterns_of(query, key, wq, wk, bq, bk, m.num_heads, mask_array))
    return np.stack(out)


def _prefixes(state_dict):
    """Every nn.MultiheadAttention in a state dict: the prefixes with an in_proj_weight
    (or q_proj_weight), in the order of their keys."""
    out = []
    for name in state_dict:
        for leaf in ("in_proj_weight", "q_proj_weight"):
            if name.endswith(leaf):
                prefix = name[: -len(leaf)]
                if prefix not in out:
                    out.append(prefix)
    return out


def _from_state_dict(state_dict, x, heads, mask):
    np = _np()
    if heads is None:
        raise ValueError("heads: a state dict does not record the number of heads; pass heads=")
    prefixes = _prefixes(state_dict)
    if not prefixes:
        raise ValueError("the state dict has no in_proj_weight or q_proj_weight (no nn.MultiheadAttention)")

    def get(name):
        v = state_dict.get(name)
        if v is None:
            return None
        return v.detach().cpu().double().numpy() if _is_torch(v) else np.asarray(v, dtype=np.float64)

    inputs = x if isinstance(x, (list, tuple)) else [x] * len(prefixes)
    if len(inputs) != len(prefixes):
        raise ValueError(f"x: {len(inputs)} layer inputs for {len(prefixes)} attention layers")
    out = []
    for prefix, xi in zip(prefixes, inputs):
        w = get(prefix + "in_proj_weight")
        if w is not None:
            e = w.shape[1]
            wq, wk = w[:e], w[e:2 * e]
        else:
            wq, wk = get(prefix + "q_proj_weight"), get(prefix + "k_proj_weight")
        b = get(prefix + "in_proj_bias")
        e = wq.shape[0]
        query = _as_batch(xi, True)
        out.append(_patterns_of(query, query, wq, wk, None if b is None else b[:e], None if b is None else b[e:2 * e],
                                heads, _mask_array(mask, query.shape[1], query.shape[1])))
    return np.stack(out)


def attention_patterns(model, x, *, mask="causal", heads=None):
    """The attention patterns of every ``torch.nn.MultiheadAttention`` in ``model``, in
    float64, as an array (layers, heads, n, n), or (layers, batch, heads, n, n) for a
    batch of more than one.

    ``model``: a ``torch.nn.Module`` holding MultiheadAttention layers (the model itself
    runs once on ``x``, a tensor or a tuple of its arguments; each layer's query and key
    inputs are captured there), or a state dict (a dict of name -> tensor or array, e.g.
    ``torch.load``'s or one read from safetensors) whose ``PREFIX.in_proj_weight`` are
    the layers; then ``x`` is each layer's input (n, d_model), one array for all or a
    list with one per layer, and ``heads`` is needed. ``mask``: "causal" (default: a
    decoder), "none", or a 0/1 array (1: the query may attend). Biases are included."""
    if _is_module(model):
        return _from_module(model, x, mask)
    if isinstance(model, dict):
        return _from_state_dict(model, x, heads, mask)
    raise ValueError("model: a torch.nn.Module or a state dict (dict of name -> tensor) is needed")


def scan_model(model, x, *, mask="causal", heads=None, **scan_options):
    """``attnrank.scan`` of ``attention_patterns(model, x, mask=mask, heads=heads)`` under
    the same mask: every head of every layer, one dict per head (``index`` is [layer,
    head]). ``scan_options`` are scan's (d_k, epsilon, max_dk, jobs, client, seed,
    refine, time_limit)."""
    import attnrank
    patterns = attention_patterns(model, x, mask=mask, heads=heads)
    if mask is not None and not isinstance(mask, str):
        mask = (_np().asarray(mask) != 0).astype(float)  # checked by attention_patterns already
    return attnrank.scan(patterns, mask=mask, **scan_options)
