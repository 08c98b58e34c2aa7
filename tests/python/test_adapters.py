"""Any model to a scan: scan_model reads a GPT-2-style model (a fused c_attn projection,
attention computed in the block's own code, written here after GPT-2's; nothing is
downloaded) and a model through a user's adapter, and gives the rows of patterns formed by
hand in float64 from the same weights and inputs. And the traps of a model's own patterns
get the right advice: a float32 softmax that underflowed, -inf logits, torch's head-averaged
weights.

Random weights come from SEED (ATTNRANK_PY_SEED, default 20261202), printed by conftest.py."""
import math
import os
import subprocess

import numpy as np
import pytest

import attnrank

torch = pytest.importorskip("torch")
SEED = int(os.environ.get("ATTNRANK_PY_SEED", "20261202"))
CLI = os.environ.get("ATTNRANK_CLI")


class Conv1D(torch.nn.Module):
    """GPT-2's projection: weight (in, out), y = x W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_in, n_out) / math.sqrt(n_in))
        self.bias = torch.nn.Parameter(torch.randn(n_out) / 10)

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Attention(torch.nn.Module):
    """GPT-2's attention: one fused projection to [q | k | v], heads split in its own code,
    scores scaled by 1/sqrt(d), the causal mask by a large negative number."""

    def __init__(self, e, heads):
        super().__init__()
        self.n_head, self.head_dim = heads, e // heads
        self.c_attn = Conv1D(e, 3 * e)
        self.c_proj = Conv1D(e, e)

    def forward(self, h):
        b, n, e = h.shape
        q, k, v = self.c_attn(h).split(e, dim=2)
        q, k, v = (t.view(b, n, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        s = torch.where(causal, s, torch.tensor(torch.finfo(s.dtype).min, dtype=s.dtype))
        out = torch.softmax(s, dim=-1) @ v
        return self.c_proj(out.transpose(1, 2).reshape(b, n, e))


class GPT2Tiny(torch.nn.Module):
    def __init__(self, vocab=11, e=16, heads=4, layers=2, n=12):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, e), torch.nn.Embedding(n, e)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            block = torch.nn.Module()
            block.ln_1, block.attn, block.ln_2 = torch.nn.LayerNorm(e), GPT2Attention(e, heads), torch.nn.LayerNorm(e)
            block.mlp = torch.nn.Sequential(torch.nn.Linear(e, 4 * e), torch.nn.GELU(), torch.nn.Linear(4 * e, e))
            self.blocks.append(block)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[-1]))
        for block in self.blocks:
            x = x + block.attn(block.ln_1(x))
            x = x + block.mlp(block.ln_2(x))
        return x


def by_hand(model, tokens):
    """Each block's patterns in float64 from the input its c_attn receives (a forward
    pre-hook), split and scaled as GPT-2 does: (layers, heads, n, n)."""
    inputs = []
    hooks = [b.attn.c_attn.register_forward_pre_hook(lambda m, a: inputs.append(a[0].detach().double().numpy()))
             for b in model.blocks]
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    out = []
    for block, h in zip(model.blocks, inputs):
        w, b = block.attn.c_attn.weight.detach().double().numpy(), block.attn.c_attn.bias.detach().double().numpy()
        qkv = h[0] @ w + b
        e, heads = h.shape[-1], block.attn.n_head
        d = e // heads
        q = qkv[:, :e].reshape(-1, heads, d).transpose(1, 0, 2)
        k = qkv[:, e:2 * e].reshape(-1, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n))) > 0, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        out.append(p / p.sum(-1, keepdims=True))
    return np.stack(out)


def tiny_gpt2():
    torch.manual_seed(SEED % (2 ** 31))
    model = GPT2Tiny()
    tokens = torch.randint(0, 11, (1, 12))
    return model, tokens


def test_a_gpt2_style_model_is_scanned_through_its_fused_projection():
    model, tokens = tiny_gpt2()
    patterns = attnrank.attention_patterns(model, tokens)
    hand = by_hand(model, tokens)
    assert patterns.shape == hand.shape == (2, 4, 12, 12)  # (layers, heads, n, n) for one prompt
    assert np.max(np.abs(patterns - hand)) < 1e-14
    rows = attnrank.scan_model(model, tokens, d_k=2, epsilon=0.05, refine=False)
    expected = attnrank.scan(hand, d_k=2, epsilon=0.05, mask="causal", refine=False)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in expected]
    assert [r["index"] for r in rows] == [[l, h] for l in range(2) for h in range(4)]


def test_a_model_through_a_user_adapter():
    """A module with attention of its own (separate W^Q and W^K, no MultiheadAttention, no
    c_attn) gives nothing by default and its rows through an adapter: once as (q, k), once as
    scores, both equal to the patterns formed by hand."""
    torch.manual_seed(SEED % (2 ** 31) + 1)

    class MyAttention(torch.nn.Module):
        def __init__(self, e=8, heads=2):
            super().__init__()
            self.wq, self.wk, self.heads = torch.nn.Linear(e, e), torch.nn.Linear(e, e), heads

        def forward(self, x):
            return x

    model = MyAttention()
    x = torch.randn(1, 10, 8)
    with pytest.raises(ValueError, match="pass adapter="):
        attnrank.attention_patterns(model, x)

    def qk(m, inputs):
        xx = inputs.double()
        q = torch.nn.functional.linear(xx, m.wq.weight.double(), m.wq.bias.double())
        k = torch.nn.functional.linear(xx, m.wk.weight.double(), m.wk.bias.double())
        return [(q.view(1, 10, 2, 4).transpose(1, 2), k.view(1, 10, 2, 4).transpose(1, 2))]

    def scores(m, inputs):
        (q, k), = qk(m, inputs)
        return [{"scores": q @ k.transpose(-1, -2) / 2.0}]

    q, k = (t.detach().numpy() for t in qk(model, x)[0])
    s = q[0] @ k[0].transpose(0, 2, 1) / 2.0
    s = np.where(np.tril(np.ones((10, 10))) > 0, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    hand = (p / p.sum(-1, keepdims=True))[None]
    for adapter in (qk, scores):
        patterns = attnrank.attention_patterns(model, x, adapter=adapter)
        assert patterns.shape == (1, 2, 10, 10)
        assert np.max(np.abs(patterns - hand)) < 1e-14
    rows = attnrank.scan_model(model, x, adapter=qk, d_k=1, refine=False)
    expected = attnrank.scan(hand, d_k=1, mask="causal", refine=False)
    assert [r["floor_upper"] for r in rows] == [r["floor_upper"] for r in expected]
    with pytest.raises(ValueError, match=r"adapter's layer 0: q has shape"):
        attnrank.attention_patterns(model, x, adapter=lambda m, i: [(np.zeros(3), np.zeros(3))])


def test_a_float32_softmax_that_underflowed_gets_float64_advice():
    """A pattern whose float32 softmax underflowed (zeros where keys are allowed, its
    smallest weight a float32 subnormal): the note says to recompute in float64, not to
    save in float32 (which it was)."""
    n = 8
    s = np.linspace(0, 110, n)[None].repeat(n, axis=0).astype(np.float32)  # exp(-110) underflows in float32
    s[0, 1] = 110 - 103.5  # a weight of about 1.1e-45: a float32 subnormal
    p = torch.softmax(torch.from_numpy(s), dim=-1).numpy()
    assert (p == 0).any() and 0 < p[p > 0].min() < 1.2e-38
    with pytest.warns(attnrank.InputWarning, match="float32 subnormal.*Recompute the pattern in float64"):
        rows = attnrank.scan(p[None].astype(np.float64))
    assert "float32 subnormal" in rows[0]["note"] and "save the pattern in float32" not in rows[0]["note"]


def test_log_probabilities_and_masked_logits_get_the_logits_hint(tmp_path):
    p = np.tril(np.full((4, 4), 1.0))
    p /= p.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        logp = np.log(p)
    with pytest.raises(ValueError, match=r"is -inf: not a finite number \(if this is an attention pattern: -inf is a masked score or the log of a zero"):
        attnrank.scan(logp[None])
    if CLI:
        path = str(tmp_path / "logp.npy")
        np.save(path, logp[None])
        done = subprocess.run([CLI, "scan", path], capture_output=True, text=True)
        assert done.returncode == 2 and "-inf is a masked score or the log of a zero weight" in done.stderr


def test_head_averaged_weights_are_named(tmp_path):
    """torch's need_weights=True weights are averaged over the heads: a (1, n, n) stack says so."""
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 6, 8)
    with torch.no_grad():
        _, averaged = mha(x, x, x, need_weights=True)
    assert tuple(averaged.shape) == (1, 6, 6)
    with pytest.warns(attnrank.InputWarning, match="average over its heads.*average_attn_weights=False"):
        attnrank.scan(averaged.double().numpy())
    if CLI:
        path = str(tmp_path / "averaged.npy")
        np.save(path, averaged.double().numpy())
        done = subprocess.run([CLI, "scan", path], capture_output=True, text=True)
        assert done.returncode == 0 and "average_attn_weights=False" in done.stderr


def test_the_committed_float32_patterns_get_the_float64_advice_from_both_front_ends():
    """The 3 x 4 model's own float32 patterns (examples/data/tiny-model-3x4): weights of 0
    where keys are allowed, the smallest a float32 subnormal. Both front ends say to
    recompute in float64, which gives no zero at all (attention.npy, the float64 run)."""
    folder = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "tiny-model-3x4")
    own = np.load(os.path.join(folder, "attention-float32.npy"))
    assert own.dtype == np.float32 and 0 < own[own > 0].min() < 1.2e-38
    with pytest.warns(attnrank.InputWarning, match="float32 subnormal.*Recompute the pattern in float64"):
        rows = attnrank.scan(own, mask="causal", refine=False)
    assert any(r["zero_entry"] for r in rows)
    exact = attnrank.scan(np.load(os.path.join(folder, "attention.npy")), mask="causal", refine=False)
    assert not any(r["zero_entry"] for r in exact)
    if CLI:
        done = subprocess.run([CLI, "scan", os.path.join(folder, "attention-float32.npy"), "--mask", "causal",
                               "--no-search"], capture_output=True, text=True)
        assert done.returncode == 0 and "float32 subnormal" in done.stdout and "float64" in done.stdout
