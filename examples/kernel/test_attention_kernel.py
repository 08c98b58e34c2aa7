"""A kernel test suite's numerics tests with attnrank.testing (docs/kernels.md, "In a test
suite"); run by ctest as example_kernel_pytest:
    PYTHONPATH=build/python /usr/bin/python3 -m pytest examples/kernel/test_attention_kernel.py
``my_attention`` stands for the kernel under test: here a blocked ("flash") attention in
NumPy with an online softmax, computing in float32 and returning the inputs' dtype."""
import numpy as np
import pytest

from attnrank.testing import assert_attention_close

SEED = 0  # printed by pytest -v in the test ids below


def my_attention(q, k, v, causal=False, block=64):
    """softmax(q k^T / sqrt(d)) v, keys in blocks of ``block`` with a running max and sum."""
    dtype = q.dtype
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    n, d = q.shape[-2:]
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=np.float32)
    l = np.zeros_like(m)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=np.float32)
    for j0 in range(0, k.shape[-2], block):
        s = q @ np.swapaxes(k[..., j0:j0 + block, :], -1, -2) / np.float32(np.sqrt(d))
        if causal:
            s = np.where(np.arange(n)[:, None] >= np.arange(j0, j0 + s.shape[-1])[None, :], s, -np.inf)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        p = np.exp(s - m_new)
        correction = np.exp(m - m_new)
        l = l * correction + p.sum(axis=-1, keepdims=True)
        acc = acc * correction + p @ v[..., j0:j0 + block, :]
        m = m_new
    return (acc / l).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,d", [(97, 32), (256, 64)])
def test_my_attention_is_close_to_the_exact_attention(dtype, causal, n, d):
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((2, n, d)).astype(dtype) for _ in range(3))
    out = my_attention(q, k, v, causal)
    # Passes only when proven: max |out - exact| <= atol + rtol max |exact| (torch.testing's
    # defaults for out's dtype), exact being the attention of these very q, k, v.
    assert_attention_close(out, q, k, v, causal=causal)


def reference_in_low_precision(q, k, v, causal):
    """The usual reference of a kernel test: the same attention, every op in the inputs' dtype."""
    d = q.shape[-1]
    s = (q @ np.swapaxes(k, -1, -2)) / q.dtype.type(np.sqrt(d))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((p / p.sum(axis=-1, keepdims=True)).astype(q.dtype) @ v).astype(q.dtype)


def test_flashattention_rule_with_true_errors():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((4, 128, 64)).astype(np.float16) for _ in range(3))
    out = my_attention(q, k, v, causal=True)
    out_pt = reference_in_low_precision(q, k, v, causal=True)
    # FlashAttention's "at most twice the error of PyTorch's float16 attention", with the
    # true errors of both instead of their distances to a float32 reference.
    assert_attention_close(out, q, k, v, causal=True, reference=out_pt, max_ratio=2)


def test_a_wrong_kernel_fails_with_certified_numbers():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((64, 16)).astype(np.float32) for _ in range(3))
    out = my_attention(q, k, v, causal=True, block=16)
    out[10, 3] += 1e-3
    with pytest.raises(AssertionError, match=r"row 10, column 3"):
        assert_attention_close(out, q, k, v, causal=True)


def my_attention_torch(q, k, v, causal=False, block=32):
    """The same blocked online-softmax kernel in torch (float32 accumulation), so autograd
    gives it a backward pass to test."""
    import torch

    dtype = q.dtype
    q, k, v = (x.float() for x in (q, k, v))
    n, d = q.shape[-2:]
    m = torch.full(q.shape[:-1] + (1,), -float("inf"))
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],))
    for j0 in range(0, k.shape[-2], block):
        s = q @ k[..., j0:j0 + block, :].transpose(-1, -2) / d ** 0.5
        if causal:
            keep = torch.arange(n)[:, None] >= torch.arange(j0, j0 + s.shape[-1])[None, :]
            s = s.masked_fill(~keep, -float("inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        correction = torch.exp(m - m_new)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v[..., j0:j0 + block, :]
        m = m_new
    return (acc / l).to(dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_my_attention_forward_and_backward_are_close_to_the_exact_ones(causal):
    torch = pytest.importorskip("torch")
    from attnrank.testing import assert_attention_kernel

    rng = np.random.default_rng(SEED)
    q, k, v = (torch.from_numpy(rng.standard_normal((2, 96, 32)).astype(np.float32)) for _ in range(3))
    # Runs the kernel forward and, with autograd, backward on a dout drawn with seed SEED; passes
    # only when out, dq, dk and dv are each proven within torch.testing's float32 tolerance of the
    # exact attention and its exact gradients.
    assert_attention_kernel(lambda q, k, v: my_attention_torch(q, k, v, causal), q, k, v, causal=causal, seed=SEED)


def test_flashattention_gradient_rule_with_its_floor():
    torch = pytest.importorskip("torch")
    from attnrank.testing import assert_attention_grads_close

    rng = np.random.default_rng(SEED)
    q, k, v, dout = (torch.from_numpy(rng.standard_normal((2, 64, 32)).astype(np.float32)).bfloat16() for _ in range(4))

    def grads(kernel):
        leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
        kernel(*leaves).backward(dout)
        return tuple(x.grad for x in leaves)

    def low_precision(q, k, v):  # the usual reference: every op in bfloat16
        return torch.softmax((q @ k.transpose(-1, -2)) / 32 ** 0.5, -1) @ v

    # FlashAttention's gradient rule, max |dX - exact| <= 2 max |dX_ref - exact| + 1e-4, on true errors.
    assert_attention_grads_close(*grads(my_attention_torch), q, k, v, dout, reference=grads(low_precision),
                                 max_ratio=2, ratio_atol=1e-4)
