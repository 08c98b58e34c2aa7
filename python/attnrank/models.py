"""Weights to answers in one step: the attention patterns of every attention layer of a
model, computed in float64 from the weights and each layer's own input, and their scan.
An adapter says where a model's heads are: ``mha_adapter`` for ``torch.nn.MultiheadAttention``,
``gpt2_adapter`` for GPT-2-style blocks (a fused ``c_attn`` projection, attention in the
block's own code), or any callable ``(model, x) -> [per layer: (q, k) or {"scores": s}]``.

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

__all__ = ["attention_patterns", "scan_model", "save_safetensors", "mha_adapter", "gpt2_adapter"]

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


def _heads(x, heads):
    """(B, n, E) as (B, heads, n, E / heads)."""
    b, n, e = x.shape
    if e % heads:
        raise ValueError(f"embed_dim {e} is not divisible by heads = {heads}")
    return x.reshape(b, n, heads, e // heads).transpose(0, 2, 1, 3)


def _softmax_patterns(scores, mask):
    """softmax over the last axis in float64, masked positions -inf (weight 0)."""
    np = _np()
    s = np.asarray(scores, dtype=np.float64)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=-1, keepdims=True)


def _patterns_of(query, key, wq, wk, bq, bk, heads, mask):
    """softmax(q_h k_h^T / sqrt(d_k)) per head in float64: query (B, n, E) and key
    (B, m, E) NumPy arrays, weights in PyTorch's out x in layout; (B, heads, n, m)."""
    q = _heads(query @ wq.T + (0 if bq is None else bq), heads)
    k = _heads(key @ wk.T + (0 if bk is None else bk), heads)
    return _softmax_patterns(q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]), mask)


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


def _run_once(model, inputs, modules, pre_hook):
    """Runs ``model`` once on ``inputs`` in eval mode without gradients, with ``pre_hook(module,
    args, kwargs)`` called before each of ``modules`` runs; the model's mode and forwards are
    restored after."""
    import torch

    def capture(module):
        forward = module.forward  # the bound method; the instance attribute below shadows it

        def wrapper(*args, **kwargs):
            pre_hook(module, args, kwargs)
            return forward(*args, **kwargs)
        module.forward = wrapper

    for m in modules:
        capture(m)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(*inputs) if isinstance(inputs, tuple) else model(inputs)
    finally:
        model.train(was_training)
        for m in modules:
            del m.forward  # the class's forward again


def _once_each(modules, seen, what):
    for m in modules:
        if len(seen[id(m)]) != 1:
            raise ValueError(f"a {what} ran {len(seen[id(m)])} times in one forward pass; "
                             "attention_patterns needs each to run once")


def mha_adapter(model, x):
    """The heads of every ``torch.nn.MultiheadAttention`` in ``model``: runs it once on ``x``,
    captures each layer's query and key inputs, and returns per layer the (q, k) of its heads
    in float64, each (B, heads, n, d), projected by the layer's own weights and biases."""
    import torch
    layers = [m for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
    if not layers:
        raise ValueError("mha_adapter: the model has no torch.nn.MultiheadAttention")
    seen = {id(m): [] for m in layers}

    def record(module, args, kwargs):
        query = args[0] if args else kwargs["query"]
        key = args[1] if len(args) > 1 else kwargs.get("key", query)
        seen[id(module)].append((query.detach(), key.detach()))

    _run_once(model, x, layers, record)
    _once_each(layers, seen, "MultiheadAttention")
    out = []
    for m in layers:
        query, key = (_as_batch(t, m.batch_first) for t in seen[id(m)][0])
        wq, wk, bq, bk = _mha_weights(m)
        out.append((_heads(query @ wq.T + (0 if bq is None else bq), m.num_heads),
                    _heads(key @ wk.T + (0 if bk is None else bk), m.num_heads)))
    return out


def _gpt2_blocks(model):
    """The modules of ``model`` with a fused ``c_attn`` projection (GPT-2's attention)."""
    return [m for m in model.modules() if hasattr(m, "c_attn") and hasattr(m.c_attn, "weight")]


def _head_count(block):
    for name in ("n_head", "num_heads", "n_heads", "nh"):
        value = getattr(block, name, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(f"gpt2_adapter: {type(block).__name__} has c_attn but no n_head (or num_heads) attribute")


def gpt2_adapter(model, x):
    """The heads of every GPT-2-style attention block in ``model``: a module with a fused
    ``c_attn`` projection to [q | k | v] (a ``torch.nn.Linear``, weight (3E, E), or GPT-2's
    ``Conv1D``, weight (E, 3E)) and an ``n_head`` (or ``num_heads``) attribute, whose attention
    is computed in the block's own code. Runs the model once on ``x``, captures each
    ``c_attn``'s input, and returns per block the (q, k) of its heads in float64, each (B,
    heads, n, d): the scores are q k^T / sqrt(d), as GPT-2 scales them."""
    np = _np()
    blocks = _gpt2_blocks(model)
    if not blocks:
        raise ValueError("gpt2_adapter: the model has no module with a fused c_attn projection")
    projections = [b.c_attn for b in blocks]
    seen = {id(p): [] for p in projections}

    def record(module, args, kwargs):
        seen[id(module)].append((args[0] if args else kwargs["input"]).detach())

    _run_once(model, x, projections, record)
    _once_each(projections, seen, "c_attn")
    out = []
    for block, proj in zip(blocks, projections):
        h = seen[id(proj)][0].cpu().double().numpy()
        h = h[None] if h.ndim == 2 else h
        w = proj.weight.detach().cpu().double().numpy()
        b = None if getattr(proj, "bias", None) is None else proj.bias.detach().cpu().double().numpy()
        e = h.shape[-1]
        qkv = h @ (w if w.shape == (e, 3 * e) else w.T)  # Conv1D's (in, out), or nn.Linear's (out, in)
        if b is not None:
            qkv = qkv + b
        if qkv.shape[-1] != 3 * e:
            raise ValueError(f"gpt2_adapter: c_attn gives {qkv.shape[-1]} features for an input of {e}; "
                             "a fused [q | k | v] projection gives 3 x that")
        heads = _head_count(block)
        out.append((_heads(np.ascontiguousarray(qkv[..., :e]), heads), _heads(np.ascontiguousarray(qkv[..., e:2 * e]), heads)))
    return out


def _default_adapter(model):
    import torch
    if any(isinstance(m, torch.nn.MultiheadAttention) for m in model.modules()):
        return mha_adapter
    if _gpt2_blocks(model):
        return gpt2_adapter
    raise ValueError("the model has no torch.nn.MultiheadAttention and no GPT-2-style block (a fused c_attn): "
                     "pass adapter=, a callable (model, x) returning per layer its heads' (q, k), each "
                     "(B, heads, n, d) or (heads, n, d), or {'scores': (B, heads, n, m)} (docs/scan.md)")


def _layer_patterns(entry, mask_of, what):
    """One layer's patterns (B, heads, n, m) in float64 from an adapter's entry."""
    np = _np()

    def array(v, name):
        a = v.detach().cpu().double().numpy() if _is_torch(v) else np.asarray(v, dtype=np.float64)
        if a.ndim == 3:
            a = a[None]
        if a.ndim != 4:
            raise ValueError(f"{what}: {name} has shape {a.shape}; (B, heads, n, d) or (heads, n, d) is needed")
        return a

    if isinstance(entry, dict) and "scores" in entry:
        s = array(entry["scores"], "scores")
        return _softmax_patterns(s, mask_of(s.shape[-2], s.shape[-1]))
    if isinstance(entry, dict):
        q, k, scale = entry.get("q"), entry.get("k"), entry.get("scale")
    elif isinstance(entry, (tuple, list)) and len(entry) == 2:
        (q, k), scale = entry, None
    else:
        raise ValueError(f"{what}: an adapter gives per layer (q, k), {{'q': q, 'k': k, 'scale': s}} or "
                         f"{{'scores': s}}, not {type(entry).__name__}")
    q, k = array(q, "q"), array(k, "k")
    if q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{what}: q {q.shape} and k {k.shape} do not pair up (B, heads, n, d) with (B, heads, m, d)")
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _softmax_patterns(q @ k.transpose(0, 1, 3, 2) * scale, mask_of(q.shape[-2], k.shape[-2]))


def _from_module(model, inputs, mask, adapter):
    """Every layer's patterns from the adapter's heads, in float64."""
    np = _np()
    adapter = adapter or _default_adapter(model)
    layers = adapter(model, inputs)
    if not isinstance(layers, (list, tuple)) or not layers:
        raise ValueError("adapter: it returned no layers (a list with one entry per attention layer is needed)")
    return np.stack([_layer_patterns(e, lambda n, m: _mask_array(mask, n, m), f"adapter's layer {i}")
                     for i, e in enumerate(layers)])


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


def attention_patterns(model, x, *, mask="causal", heads=None, adapter=None):
    """The attention patterns of every attention layer of ``model``, in float64, as an array
    (layers, heads, n, n), or (layers, batch, heads, n, n) when ``x`` is a batch of more
    than one.

    ``model``: a ``torch.nn.Module`` (it runs once on ``x``, a tensor or a tuple of its
    arguments), whose heads ``adapter`` finds: by default ``mha_adapter`` when it holds
    ``torch.nn.MultiheadAttention`` layers, else ``gpt2_adapter`` when it holds GPT-2-style
    blocks (a fused ``c_attn``); or any callable ``adapter(model, x)`` returning per layer
    its heads' ``(q, k)`` (each (B, heads, n, d) or (heads, n, d); the scores are
    q k^T / sqrt(d), or ``{"q": q, "k": k, "scale": s}``) or ``{"scores": s}`` (B, heads, n,
    m): the patterns are formed here, in float64, under ``mask``. Or a state dict (a dict of
    name -> tensor or array) whose ``PREFIX.in_proj_weight`` are nn.MultiheadAttention
    layers; then ``x`` is each layer's input (n, d_model), one array for all or a list with
    one per layer, and ``heads`` is needed. ``mask``: "causal" (default: a decoder), "none",
    or a 0/1 array (1: the query may attend). Biases are included."""
    np = _np()
    if _is_module(model):
        patterns = _from_module(model, x, mask, adapter)
    elif isinstance(model, dict):
        if adapter is not None:
            raise ValueError("adapter: it reads a live module; a state dict's layers are nn.MultiheadAttention's")
        patterns = _from_state_dict(model, x, heads, mask)
    else:
        raise ValueError("model: a torch.nn.Module or a state dict (dict of name -> tensor) is needed")
    return patterns[:, 0] if patterns.shape[1] == 1 else patterns  # (layers, heads, n, n) for one prompt


def scan_model(model, x, *, mask="causal", heads=None, adapter=None, **scan_options):
    """``attnrank.scan`` of ``attention_patterns(model, x, mask=mask, heads=heads,
    adapter=adapter)`` under the same mask: every head of every layer, one dict per head
    (``index`` is [layer, head], or [layer, batch, head] for a batch). ``scan_options`` are
    scan's (d_k, epsilon, max_dk, jobs, client, seed, refine, time_limit)."""
    import attnrank
    patterns = attention_patterns(model, x, mask=mask, heads=heads, adapter=adapter)
    if mask is not None and not isinstance(mask, str):
        mask = (_np().asarray(mask) != 0).astype(float)  # checked by attention_patterns already
    return attnrank.scan(patterns, mask=mask, **scan_options)
