"""Forward attention kernels emulated in NumPy with the rounding of each step a precision
profile names (attention/precision_profile.hpp): correct kernels of a profile, in every
shape the budget must admit (block sizes, one-pass online or two-pass softmax, split-KV
with the logsumexp merge, blocks in either order), and planted bugs the budget should catch.

Every step computes in float32 (NumPy's float32 matmul, sum, exp2 and log: round to
nearest, sums in BLAS's or NumPy's pairwise order) and rounds to the storage format where
the profile says so. Inputs are (N_q, d), (N_k, d), (N_k, d_v) arrays of exactly
representable values; outputs (out, lse) as float32 arrays holding the stored values."""
import numpy as np

LOG2E = np.float32(np.log2(np.e))


def to_bf16(x):
    """Round float32 values to bfloat16 (nearest, ties to even), kept in float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).reshape(x.shape)


def to_fp16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def to_e4m3(x):
    """Round non-negative float32 values to float8_e4m3fn (3 mantissa bits, subnormal
    spacing 2^-9; every value here is at most 1, far below its largest, 448)."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    _, e = np.frexp(x)
    spacing = np.ldexp(1.0, np.maximum(e - 1, -6) - 3)
    return (np.round(x / spacing) * spacing).astype(np.float32)


def keep(x):
    return np.asarray(x, dtype=np.float32)


ROUND = {"bfloat16": to_bf16, "float16": to_fp16, "float8_e4m3fn": to_e4m3, "float32": keep}


def _scores(q, k, causal):
    s = (q @ k.T).astype(np.float32)  # float32 accumulation; products of 16-bit values are exact
    if causal:  # bottom-right: query i sees keys j <= i + N_k - N_q
        nq, nk = s.shape
        s = np.where(np.arange(nk)[None, :] <= np.arange(nq)[:, None] + nk - nq, s, np.float32(-np.inf))
    return s


def _online(s, v, scale, store, block, reverse=False, bug=None):
    """One-pass online softmax over key blocks: (acc, l, m) unnormalised, in float32."""
    nq, nk = s.shape
    c = np.float32(scale) * LOG2E
    m = np.full(nq, -np.inf, dtype=np.float32)
    l = np.zeros(nq, dtype=np.float32)
    acc = np.zeros((nq, v.shape[1]), dtype=np.float32)
    starts = list(range(0, nk, block))
    if reverse:
        starts.reverse()
    for j0 in starts:
        sb = s[:, j0:j0 + block]
        m_new = np.maximum(m, sb.max(axis=1))
        with np.errstate(invalid="ignore"):
            p = np.exp2(sb * c - (m_new * c)[:, None]).astype(np.float32)
            alpha = np.exp2(m * c - m_new * c).astype(np.float32)
        alpha = np.where(np.isneginf(m), np.float32(0), alpha)
        p = np.where(np.isneginf(m_new)[:, None], np.float32(0), p)  # a row with no key yet
        if bug == "exp_in_bf16":
            p = to_bf16(p)
        stored = store(p)
        if bug == "p_in_fp8":
            stored = to_e4m3(p)
        if bug == "no_rescale":
            alpha_acc = np.ones_like(alpha)
        else:
            alpha_acc = alpha
        if bug == "row_sum_in_bf16":
            l = to_bf16(to_bf16(l * alpha) + to_bf16(stored.sum(axis=1)))
        else:
            l = (l * alpha + p.sum(axis=1, dtype=np.float32)).astype(np.float32)
        acc = (acc * alpha_acc[:, None] + stored @ v[j0:j0 + block]).astype(np.float32)
        if bug == "accumulator_in_storage":
            acc = store(acc)
        m = m_new
    return acc, l, m


def _two_pass(s, v, scale, store):
    c = np.float32(scale) * LOG2E
    m = s.max(axis=1)
    with np.errstate(invalid="ignore"):
        p = np.exp2(s * c - (m * c)[:, None]).astype(np.float32)
    l = p.sum(axis=1, dtype=np.float32)
    acc = (store(p) @ v).astype(np.float32)
    return acc, l, m


def attention(q, k, v, *, scale=None, causal=False, p_format="bfloat16", out_format="bfloat16", block=64,
              two_pass=False, splits=1, reverse=False, bug=None):
    """(out, lse) of one head as a kernel of the profile computes them (out stored in
    out_format, lse in float32); `bug` plants one of BUGS."""
    q, k, v = (np.asarray(x, dtype=np.float32) for x in (q, k, v))
    scale = np.float32(1 / np.sqrt(q.shape[1]) if scale is None else scale)
    store = ROUND[p_format]
    s = _scores(q, k, causal)
    if bug == "window_off_by_one" and causal:
        nq, nk = s.shape
        s = np.where(np.arange(nk)[None, :] <= np.arange(nq)[:, None] + nk - nq - 1, s, np.float32(-np.inf))
        s[:, 0] = (q @ k.T)[:, 0]  # every row keeps a key
    bounds = np.linspace(0, s.shape[1], splits + 1).astype(int)
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b == a:
            continue
        sp = s[:, a:b]
        acc, l, m = _two_pass(sp, v[a:b], scale, store) if two_pass else \
            _online(sp, v[a:b], scale, store, block, reverse, bug)
        with np.errstate(divide="ignore", invalid="ignore"):
            o = (acc / l[:, None]).astype(np.float32)
            lse = (m * scale + np.log(l)).astype(np.float32)
        parts.append((o, lse))
    if len(parts) == 1:
        o, lse = parts[0]
    else:  # FlashAttention's combine: weights exp(lse_s - lse), in float32
        lses = np.stack([p[1] for p in parts])
        top = lses.max(axis=0)
        with np.errstate(invalid="ignore"):
            lse = (top + np.log(np.exp(lses - top).sum(axis=0, dtype=np.float32))).astype(np.float32)
            o = sum((np.nan_to_num(np.exp(lse_s - lse)).astype(np.float32)[:, None] * np.nan_to_num(o_s))
                    for o_s, lse_s in parts).astype(np.float32)
    if bug == "dropout_without_rescale":
        o = (o * np.float32(0.9)).astype(np.float32)
    return ROUND[out_format](o), lse


BUGS = ["accumulator_in_storage", "row_sum_in_bf16", "no_rescale", "p_in_fp8", "exp_in_bf16",
        "dropout_without_rescale", "window_off_by_one"]
