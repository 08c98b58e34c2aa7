"""Packed sequences (FlashAttention's varlen: cu_seqlens) in attnrank.check_kernel and the
pytest helpers. The oracle is FlashAttention's reference, attention_ref run per sequence
(its test_flash_attn_varlen_output unpads, attends each sequence, and repacks), written here
in torch float64 with its autograd for the gradients. Seeded (ATTNRANK_PY_SEED)."""
import os

import numpy as np
import pytest

import attnrank
from attnrank.testing import assert_attention_close, assert_attention_grads_close

SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261205"))
torch = pytest.importorskip("torch")


def sequence_ref(q, k, v, *, causal=False, top_left=False, slopes=None, window=None):
    """FlashAttention's attention_ref for one sequence: q (N_q, H, d), k, v (N_k, H_kv, d)."""
    nq, nk, heads, kv = q.shape[0], k.shape[0], q.shape[1], k.shape[1]
    k = k.repeat_interleave(heads // kv, dim=1)
    v = v.repeat_interleave(heads // kv, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, k) / q.shape[-1] ** 0.5
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    p = i + (0 if top_left else nk - nq)
    if slopes is not None:
        s = s - slopes[:, None, None] * (p - j).abs().to(s.dtype)
    allowed = torch.ones(nq, nk, dtype=torch.bool)
    if causal:
        allowed &= j <= p
    if window is not None:
        left, right = window
        if left >= 0:
            allowed &= j >= p - left
        if right >= 0:
            allowed &= j <= p + right
    s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.einsum("hij,jhd->ihd", torch.softmax(s, dim=-1), v), lse


def packed_ref(q, k, v, cq, ck, **kw):
    """The packed output (total_q, H, d_v) and lse (H, total_q), sequence by sequence."""
    outs, lses = [], []
    for b in range(len(cq) - 1):
        o, lse = sequence_ref(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], **kw)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs, 0), torch.cat(lses, 1)


def gen(shape, seed, dtype=torch.float64):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape)).to(dtype)


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


LENGTHS_Q = [5, 1, 9, 3]
LENGTHS_K = [7, 4, 9, 2]  # N_q != N_k in three sequences, N_q > N_k in one
LENGTHS_K_CAUSAL = [7, 4, 9, 3]  # causal keeps a key in every row (bottom-right) when N_k >= N_q


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("alignment", ["bottom-right", "top-left"])
def test_float64_reference_is_exact_to_rounding(causal, alignment):
    """FlashAttention's per-sequence float64 reference is within 1e-13 of attnrank's exact
    function of the packed tensors, output and lse: the packing, the alignment within each
    sequence and the (H, total_q) lse agree with FlashAttention's."""
    heads, kv, d = 4, 2, 8
    lengths_k = LENGTHS_K_CAUSAL if causal else LENGTHS_K
    cq, ck = offsets(LENGTHS_Q), offsets(lengths_k)
    q = gen((cq[-1], heads, d), SEED)
    k = gen((ck[-1], kv, d), SEED + 1)
    v = gen((ck[-1], kv, d), SEED + 2)
    out, lse = packed_ref(q, k, v, cq, ck, causal=causal, top_left=alignment == "top-left")
    check = attnrank.check_kernel(q, k, v, out, lse=lse, mask="causal" if causal else None, alignment=alignment,
                                  cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=max(LENGTHS_Q),
                                  max_seqlen_k=max(lengths_k))
    assert check["varlen"] == {"sequences": 4, "cu_seqlens_q": cq.tolist(), "cu_seqlens_k": ck.tolist()}
    assert float(check["candidate"]["max_abs_error_upper"]) < 1e-13
    assert float(check["lse"]["candidate"]["max_abs_error_upper"]) < 1e-13
    # Attending across sequences (one dense sequence) is a different function: the check sees it.
    whole = attnrank.check_kernel(q, k, v, out, cu_seqlens_q=[0, cq[-1]], cu_seqlens_k=[0, ck[-1]])
    assert float(whole["candidate"]["max_abs_error_lower"]) > 1e-3


def test_float32_errors_are_enclosed_and_found_at_their_token():
    """A float32 packed output's true error (against float64, itself within 1e-13) lies in the
    certified band, and a planted error is named at its packed token and sequence."""
    heads, d = 2, 16
    cq, ck = offsets(LENGTHS_Q), offsets(LENGTHS_K_CAUSAL)
    q, k, v = gen((cq[-1], heads, d), SEED + 3), gen((ck[-1], heads, d), SEED + 4), gen((ck[-1], heads, d), SEED + 5)
    slopes = torch.tensor([0.5, 0.125], dtype=torch.float64)
    exact, _ = packed_ref(q, k, v, cq, ck, causal=True, slopes=slopes)
    ours, _ = packed_ref(q.float(), k.float(), v.float(), cq, ck, causal=True, slopes=slopes.float())
    check = attnrank.check_kernel(q.float(), k.float(), v.float(), ours, mask="causal", alibi_slopes=slopes,
                                  cu_seqlens_q=cq, cu_seqlens_k=ck)
    # q.float() etc. are the inputs checked: the float64 reference of those inputs.
    exact32, _ = packed_ref(q.float().double(), k.float().double(), v.float().double(), cq, ck, causal=True,
                            slopes=slopes)
    true_error = float((ours.double() - exact32).abs().max())
    c = check["candidate"]
    assert float(c["max_abs_error_lower"]) - 1e-13 <= true_error <= float(c["max_abs_error_upper"]) + 1e-13
    token, head = int(cq[2]) + 4, 1  # sequence 2, row 4
    planted = ours.clone()
    planted[token, head, 3] += 0.5
    c = attnrank.check_kernel(q.float(), k.float(), v.float(), planted, mask="causal", alibi_slopes=slopes,
                              cu_seqlens_q=cq, cu_seqlens_k=ck)["candidate"]
    assert c["worst"] == {"sequence": 2, "token": token, "head": head, "row": 4, "column": 3}
    assert float(c["max_abs_error_lower"]) > 0.49
    with pytest.raises(AssertionError, match=f"token {token} \\(sequence 2, row 4\\)"):
        assert_attention_close(planted, q.float(), k.float(), v.float(), causal=True, alibi_slopes=slopes,
                               cu_seqlens_q=cq, cu_seqlens_k=ck, max_error=1e-3)
    assert_attention_close(ours, q.float(), k.float(), v.float(), causal=True, alibi_slopes=slopes,
                           cu_seqlens_q=cq, cu_seqlens_k=ck, max_error=1e-5)


def test_gradients_against_autograd():
    """dq, dk, dv of the packed float64 reference (torch autograd through FlashAttention's
    per-sequence definition, GQA by repeat_interleave) are within 1e-12 of attnrank's exact
    gradients; a sequence without queries has exact dK = dV = 0 there."""
    heads, kv, d = 4, 2, 8
    lengths_q, lengths_k = [3, 0, 6], [5, 3, 7]
    cq, ck = offsets(lengths_q), offsets(lengths_k)
    q = gen((cq[-1], heads, d), SEED + 6).requires_grad_()
    k = gen((ck[-1], kv, d), SEED + 7).requires_grad_()
    v = gen((ck[-1], kv, d), SEED + 8).requires_grad_()
    outs = [sequence_ref(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], causal=True)[0]
            for b in range(3) if lengths_q[b] > 0]
    out = torch.cat(outs, 0)
    dout = gen(out.shape, SEED + 9)
    out.backward(dout)
    assert float(k.grad[ck[1]:ck[2]].abs().max()) == 0.0
    check = assert_attention_grads_close(q.grad, k.grad, v.grad, q.detach(), k.detach(), v.detach(), dout,
                                         causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, max_error=1e-12)
    for key in ("dq", "dk", "dv"):
        assert float(check[key]["candidate"]["max_abs_error_upper"]) < 1e-12
    # A nonzero dK at a key no query reads is an error of exactly its size.
    dk = k.grad.clone()
    dk[ck[1] + 1, 0, 2] = 0.25
    bad = attnrank.check_kernel(q.detach(), k.detach(), v.detach(), dout=dout, dk=dk, mask="causal",
                                cu_seqlens_q=cq, cu_seqlens_k=ck)["dk"]["candidate"]
    assert float(bad["max_abs_error_lower"]) >= 0.2499 and bad["worst"]["token"] == ck[1] + 1


def test_padded_masks_and_bias_read_each_sequence_block():
    """A per-head mask and a bias in FlashAttention's padded layout (B, H, max_q, max_k): each
    sequence reads its top-left block, so garbage in the padding changes nothing."""
    heads, d = 2, 4
    cq, ck = offsets([2, 4]), offsets([3, 5])
    q, k, v = gen((cq[-1], heads, d), SEED + 10), gen((ck[-1], heads, d), SEED + 11), gen((ck[-1], heads, d), SEED + 12)
    rng = np.random.default_rng(SEED + 13)
    bias = rng.standard_normal((2, heads, 4, 5))
    mask = np.ones((2, heads, 4, 5), dtype=bool)
    mask[0, 1, 1, 2] = False
    outs = []
    for b in range(2):
        nq, nk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        s = torch.einsum("ihd,jhd->hij", q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]]) / d ** 0.5
        s = s + torch.from_numpy(bias[b, :, :nq, :nk])
        s = s.masked_fill(~torch.from_numpy(mask[b, :, :nq, :nk]), float("-inf"))
        outs.append(torch.einsum("hij,jhd->ihd", torch.softmax(s, -1), v[ck[b]:ck[b + 1]]))
    out = torch.cat(outs, 0)
    bias[0, :, 2:, :] = 1e300  # padding: never read
    mask[0, :, 2:, :] = False
    check = attnrank.check_kernel(q, k, v, out, mask=mask, attn_bias=bias, cu_seqlens_q=cq, cu_seqlens_k=ck)
    assert float(check["candidate"]["max_abs_error_upper"]) < 1e-13
    assert check["mask"] == "per-head"


@pytest.mark.parametrize("change, message", [
    (dict(cu_seqlens_q=[0, 3, 20]), "cu_seqlens_q .* ends at 20|entry 2 is 20"),
    (dict(cu_seqlens_q=[0, 7, 6, 12]), "non-decreasing"),
    (dict(cu_seqlens_k=None), "need both cu_seqlens_q and cu_seqlens_k"),
    (dict(max_seqlen_q=3), "max_seqlen_q 3 is below the longest sequence's length 6"),
    (dict(max_seqlen_k=-1), "max_seqlen_k"),
    (dict(cu_seqlens_k=[0, 0, 12]), "sequence 0 has 6 queries and no keys"),
    (dict(lse=np.zeros((12, 2))), "logsumexp is \\(H, total_q\\)"),
    (dict(attn_bias=np.zeros((2, 2, 5, 12))), "smaller than the longest sequences"),
    (dict(mask=np.ones((3, 2, 6, 6))), "3 sequences|sequences of 2 heads"),
])
def test_bad_packed_input_is_a_value_error(change, message):
    q = gen((12, 2, 4), SEED + 14)
    k = gen((12, 2, 4), SEED + 15)
    kwargs = dict(cu_seqlens_q=[0, 6, 12], cu_seqlens_k=[0, 6, 12])
    kwargs.update(change)
    if kwargs["cu_seqlens_k"] is None:
        del kwargs["cu_seqlens_k"]
    with pytest.raises(ValueError, match=message):
        attnrank.check_kernel(q, k, k, q, **kwargs)


def test_layout_with_packed_sequences_is_refused():
    q = gen((6, 2, 4), SEED + 16)
    with pytest.raises(ValueError, match="packed sequences are \\(total, H, d\\)"):
        assert_attention_close(q, q, q, q, cu_seqlens_q=[0, 6], cu_seqlens_k=[0, 6], layout="bshd")
