"""Attention three ways: the from-scratch tiled (FlashAttention) forward and backward equal the
naive one and PyTorch's scaled_dot_product_attention, for sequence lengths a block does not divide."""
from __future__ import annotations

import pytest
import torch

from gpututor.attention import naive_attention, sdpa_attention, tiled_attention


def _qkv(B=2, H=3, T=37, D=16, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=gen, dtype=dtype, requires_grad=True) for _ in range(3)]


def _forward_backward(fn, q, k, v, **kw):
    out = fn(q, k, v, **kw)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    out.backward(grad)
    return out.detach(), [t.grad.clone() for t in (q, k, v)]


@pytest.mark.parametrize("T,block", [(37, 8), (64, 64), (64, 16), (5, 64), (33, 1)])
def test_tiled_attention_equals_naive_forward_and_backward(T, block):
    ref_out, ref_grads = _forward_backward(naive_attention, *_qkv(T=T))
    out, grads = _forward_backward(tiled_attention, *_qkv(T=T), block=block)
    torch.testing.assert_close(out, ref_out)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want)


def test_sdpa_equals_naive_forward_and_backward():
    ref_out, ref_grads = _forward_backward(naive_attention, *_qkv(T=40))
    out, grads = _forward_backward(sdpa_attention, *_qkv(T=40))
    torch.testing.assert_close(out, ref_out)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want)


def test_naive_equals_the_tiny_gpt_attention():
    from gpututor.models import causal_attention
    q, k, v = (t.detach() for t in _qkv(B=2, H=3, T=20, D=8))
    flat = [t.transpose(1, 2).reshape(2, 20, 24) for t in (q, k, v)]
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    got = causal_attention(*flat, 8, mask).view(2, 20, 3, 8).transpose(1, 2)
    torch.testing.assert_close(got, naive_attention(q, k, v))


def test_tiled_attention_keeps_no_score_matrix_for_backward():
    """What forward saves for backward: q, k, v, the output and one number per row."""
    q, k, v = _qkv(T=128, dtype=torch.float32)
    out = tiled_attention(q, k, v, block=32)
    saved = out.grad_fn.saved_tensors
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    assert sum(t.numel() for t in saved) == 4 * q.numel() + rows   # never B·H·T·T


def test_bad_block_is_refused():
    with pytest.raises(ValueError, match="block=0 is invalid"):
        tiled_attention(*_qkv(T=4), block=0)


def test_measured_memory_grows_with_t_squared_naive_and_with_t_tiled():
    from gpututor.measure.attention_cost import attention_costs
    rows = attention_costs([128, 256], ways=("naive", "tiled"), repeats=1, heads=2, head_dim=16)
    saved = {(r["way"], r["seq_len"]): r["saved_bytes"] for r in rows}
    assert saved[("naive", 256)] / saved[("naive", 128)] > 3.5     # ~4: T x T per head
    assert saved[("tiled", 256)] / saved[("tiled", 128)] < 2.2     # ~2: O(T) per head
    assert saved[("tiled", 256)] < saved[("naive", 256)] / 4
    assert all(r["seconds"] > 0 and r["peak_bytes"] >= r["saved_bytes"] for r in rows)
    with pytest.raises(ValueError, match="way='flash' is invalid"):
        attention_costs([8], ways=("flash",))


def _sdpa(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "not causal"])
@pytest.mark.parametrize("T,S,block", [(37, 37, 8), (20, 45, 16), (45, 20, 16), (7, 3, 64),
                                       (33, 64, 1)])
def test_tiled_attention_is_flashattention_for_any_model(causal, T, S, block):
    """Issue 43: causal or not, any number of keys (S != T), against PyTorch's fused attention
    (the causal mask aligned top-left, as SDPA's is_causal). float64: the only difference is
    the order of the sums, ~1e-15; assert_close's float64 defaults (1e-7 relative) hold it."""
    q = _qkv(T=T)[0]
    k, v = _qkv(T=S, seed=2)[:2]
    ref_out, ref_grads = _forward_backward(_sdpa, *(t.detach().requires_grad_() for t in
                                                    (q, k, v)), causal=causal)
    out, grads = _forward_backward(tiled_attention, q, k, v, block=block, causal=causal)
    torch.testing.assert_close(out, ref_out)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want)


def test_non_causal_differs_from_causal():   # the flag reaches the kernel (not a no-op)
    q, k, v = (t.detach() for t in _qkv(T=12))
    assert not torch.allclose(tiled_attention(q, k, v, block=4, causal=False),
                              tiled_attention(q, k, v, block=4, causal=True))


def test_keys_longer_than_queries_keep_one_number_per_query_row():
    q = _qkv(T=16, dtype=torch.float32)[0]
    k, v = _qkv(T=96, dtype=torch.float32, seed=3)[:2]
    out = tiled_attention(q, k, v, block=16, causal=False)
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    assert sum(t.numel() for t in out.grad_fn.saved_tensors) == \
        2 * q.numel() + k.numel() + v.numel() + rows   # never B·H·T·S


@pytest.mark.parametrize("kw,field", [({"causal": 1}, "causal=1"), ({"block": True}, "block=True")])
def test_bad_flags_are_refused(kw, field):
    with pytest.raises(ValueError, match=field):
        tiled_attention(*_qkv(T=4), **kw)


def test_mismatched_shapes_are_refused_naming_them():
    q, k, v = _qkv(T=4)
    with pytest.raises(ValueError, match="q, k, v shapes"):
        tiled_attention(q, k[..., :8], v)
