"""grouped_query_attention and the grouped KV cache (chapter 16), both backends.

Query head i reads key/value head i // (h / h_kv): the same as repeating each key/value head h / h_kv times
(``np.repeat`` along the head axis), as torch's ``enable_gqa=True``; h_kv = h is multi-head attention, h_kv = 1
multi-query attention.  The cache stores h_kv heads and counts their bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import peak_bytes, to_torch, tol


def _qkv(rng, batch, h, h_kv, n_q, n_k, d=4, d_v=3, dtype=np.float64):
    q = rng.normal(size=(*batch, h, n_q, d)).astype(dtype)
    k = rng.normal(size=(*batch, h_kv, n_k, d)).astype(dtype)
    v = rng.normal(size=(*batch, h_kv, n_k, d_v)).astype(dtype)
    return q, k, v


def _repeated(q, k, v):
    """Multi-head attention's inputs: every key/value head repeated for the query heads of its group."""
    group = q.shape[-3] // k.shape[-3]
    return q, np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(("h", "h_kv"), [(8, 2), (6, 3), (4, 1), (4, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_equals_attention_with_repeated_key_value_heads(backend, need_weights, h, h_kv, dtype):
    rng = np.random.default_rng(h * 10 + h_kv)
    q, k, v = _qkv(rng, (2,), h, h_kv, 5, 7, dtype=dtype)
    mask = rng.random((h, 5, 7)) > 0.3
    for kwargs in ({}, {"causal": True}, {"mask": mask}, {"mask": mask[0], "causal": True}):
        want, want_w = anp.scaled_dot_product_attention(*_repeated(q, k, v), **kwargs)
        got, got_w = backend.call("grouped_query_attention", q, k, v, need_weights=need_weights, **kwargs)
        assert got.shape == (2, h, 5, 3) and got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol(dtype))
        if need_weights:
            np.testing.assert_allclose(got_w, want_w, **tol(dtype))
        else:
            assert got_w is None


def test_query_head_i_reads_key_value_head_i_over_group(backend):
    """Contiguous groups: with h = 6, h_kv = 3, heads 0-1 read K/V head 0, heads 2-3 head 1, heads 4-5 head 2."""
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, (), 6, 3, 4, 5)
    got, _ = backend.call("grouped_query_attention", q, k, v)
    for i in range(6):
        want, _ = anp.scaled_dot_product_attention(q[i], k[i // 2], v[i // 2])
        np.testing.assert_allclose(got[i], want, **tol(np.float64))
    interleaved, _ = anp.scaled_dot_product_attention(q[1], k[1 % 3], v[1 % 3])
    assert np.abs(got[1] - interleaved).max() > 1e-3  # not i % h_kv


def test_equals_torch_enable_gqa():
    rng = np.random.default_rng(1)
    q, k, v = (to_torch(x) for x in _qkv(rng, (3,), 8, 2, 6, 9, d=4, d_v=4))
    want = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    for need_weights in (True, False):
        got, _ = att.grouped_query_attention(q, k, v, need_weights=need_weights)
        torch.testing.assert_close(got, want)
    got, _ = anp.grouped_query_attention(q.numpy(), k.numpy(), v.numpy())
    np.testing.assert_allclose(got, want.numpy(), **tol(np.float64))


def test_the_numpy_path_does_not_repeat_keys_and_values(monkeypatch):
    """The key/value heads are shared by broadcasting: np.repeat is never called on them."""
    calls = []
    real = np.repeat
    monkeypatch.setattr(np, "repeat", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    q, k, v = _qkv(np.random.default_rng(2), (), 8, 2, 3, 4)
    anp.grouped_query_attention(q, k, v)
    assert calls == []


@pytest.mark.parametrize(("batch_q", "batch_kv"), [((2, 3), (2, 3)), ((2, 3), (3,)), ((1,), (4,))])
def test_leading_dimensions_broadcast(backend, batch_q, batch_kv):
    rng = np.random.default_rng(3)
    q = rng.normal(size=(*batch_q, 4, 2, 5))
    k = rng.normal(size=(*batch_kv, 2, 3, 5))
    v = rng.normal(size=(*batch_kv, 2, 3, 5))
    for need_weights in (True, False):
        got, _ = backend.call("grouped_query_attention", q, k, v, need_weights=need_weights)
        want, _ = anp.scaled_dot_product_attention(*_repeated(q, k, v))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, **tol(np.float64))


def test_a_fully_masked_row_gives_zeros(backend):
    q, k, v = _qkv(np.random.default_rng(4), (), 4, 2, 3, 5)
    mask = np.ones((4, 3, 5), dtype=bool)
    mask[1, 2] = False
    for need_weights in (True, False):
        out, w = backend.call("grouped_query_attention", q, k, v, mask=mask, need_weights=need_weights)
        assert np.isfinite(out).all() and (out[1, 2] == 0).all()
        if need_weights:
            assert (w[1, 2] == 0).all()


def test_gradients_flow_to_the_shared_heads():
    q, k, v = (to_torch(x).requires_grad_() for x in _qkv(np.random.default_rng(5), (), 4, 2, 3, 5, d=4, d_v=4))
    for need_weights in (True, False):
        out, _ = att.grouped_query_attention(q, k, v, need_weights=need_weights, causal=True)
        got = torch.autograd.grad(out.square().sum(), (q, k, v))
        ref = F.scaled_dot_product_attention(q, k.repeat_interleave(2, -3), v.repeat_interleave(2, -3),
                                             attn_mask=att.causal_mask(3, 5))
        want = torch.autograd.grad(ref.square().sum(), (q, k, v))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize(("shapes", "match"), [
    (((8, 3, 4), (3, 5, 4), (3, 5, 4)), "整数倍"),
    (((8, 3, 4), (2, 5, 4), (4, 5, 4)), "头数必须相同"),
    (((8, 3, 4), (2, 5, 6), (2, 5, 4)), "d_k"),
    (((8, 3, 4), (2, 5, 4), (2, 6, 4)), "序列长度"),
    (((3, 4), (2, 5, 4), (2, 5, 4)), "至少需要 3 维"),
    (((2, 8, 3, 4), (3, 2, 5, 4), (3, 2, 5, 4)), "广播"),
])
def test_bad_shapes_are_refused_in_chinese(backend, shapes, match):
    q, k, v = (np.ones(s) for s in shapes)
    with pytest.raises(ValueError, match=match):
        backend.call("grouped_query_attention", q, k, v)


# --------------------------------------------------------------------------- the cache with fewer key/value heads

@pytest.mark.parametrize("h_kv", [1, 2, 6])
def test_cached_decoding_with_grouped_heads_equals_full_attention(backend, h_kv):
    rng = np.random.default_rng(h_kv)
    h, d, n, layers = 6, 4, 10, 2
    q = rng.normal(size=(layers, 2, h, n, d))
    k, v = rng.normal(size=(2, layers, 2, h_kv, n, d))
    cache = backend.lib.KVCache(layers, h, d, n_kv_heads=h_kv, capacity=2)
    assert cache.n_kv_heads == h_kv and cache.n_heads == h
    for s in [slice(0, 4)] + [slice(t, t + 1) for t in range(4, n)]:
        for layer in range(layers):
            got = backend.call("cached_attention", q[layer][..., s, :], k[layer][..., s, :], v[layer][..., s, :],
                               cache, layer)
            full, _ = anp.grouped_query_attention(q[layer][..., : s.stop, :], k[layer][..., : s.stop, :],
                                                  v[layer][..., : s.stop, :], causal=True)
            np.testing.assert_allclose(got, full[..., s, :], **tol(np.float64))
    keys, _ = cache.read(0)
    assert tuple(keys.shape) == (2, h_kv, n, d)


@pytest.mark.parametrize("h_kv", [None, 8, 2, 1])
def test_nbytes_counts_the_key_value_heads(backend, h_kv):
    layers, h, d, batch, tokens = 3, 8, 4, 2, 10
    stored = h if h_kv is None else h_kv
    cache = backend.lib.KVCache(layers, h, d, n_kv_heads=h_kv)
    x = backend.arr(np.ones((batch, stored, tokens, d), dtype=np.float32))
    for layer in range(layers):
        cache.append(layer, x, x)
    assert cache.nbytes == layers * 2 * tokens * stored * d * 4 * batch
    assert cache.nbytes * h == layers * 2 * tokens * h * d * 4 * batch * stored  # exactly h_kv / h of MHA's


@pytest.mark.parametrize(("n_kv_heads", "match"), [(3, "整数倍"), (0, "n_kv_heads"), (2.0, "n_kv_heads")])
def test_a_cache_refuses_key_value_heads_that_do_not_divide(backend, n_kv_heads, match):
    with pytest.raises(ValueError, match=match):
        backend.lib.KVCache(1, 8, 4, n_kv_heads=n_kv_heads)


def test_a_grouped_cache_refuses_keys_with_the_query_heads(backend):
    cache = backend.lib.KVCache(1, 8, 4, n_kv_heads=2)
    x = backend.arr(np.ones((8, 1, 4)))
    with pytest.raises(ValueError, match="形状"):
        cache.append(0, x, x)
    q = backend.arr(np.ones((8, 2, 4)))
    k = backend.arr(np.ones((3, 2, 4)))
    with pytest.raises(ValueError, match="整数倍"):
        backend.lib.cached_attention(q, k, k, cache, 0)
    assert cache.length == 0  # a refused step leaves the cache as it was


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cpu_and_cuda_agree_with_grouped_heads():
    q, k, v = (to_torch(x).float() for x in _qkv(np.random.default_rng(6), (2,), 8, 2, 16, 16, d=8, d_v=8))
    for need_weights in (True, False):
        cpu, _ = att.grouped_query_attention(q, k, v, causal=True, need_weights=need_weights)
        gpu, _ = att.grouped_query_attention(q.cuda(), k.cuda(), v.cuda(), causal=True, need_weights=need_weights)
        torch.testing.assert_close(gpu.cpu(), cpu, rtol=2e-3, atol=2e-3)


# --------------------------------------------------------------------------- the folded layout: masks and no copies

@pytest.mark.parametrize("n_q", [1, 3, 20])  # torch folds up to FOLD_QUERIES queries per head on the CPU
@pytest.mark.parametrize("mask_shape", [None, (8, "q", 24), ("q", 24), (1, "q", 24), (8, 1, 24), (2, 1, 1, 24), (24,)])
def test_folded_rows_keep_masks_and_causal_alignment(backend, n_q, mask_shape):
    """Each group's g query heads become g·n_q rows of one product: row r is query r % n_q, and its mask row."""
    rng = np.random.default_rng(n_q)
    q, k, v = _qkv(rng, (2,), 8, 2, n_q, 24, d=4, d_v=4)
    mask = None if mask_shape is None else rng.random([n_q if s == "q" else s for s in mask_shape]) > 0.3
    for causal in (False, True):
        want, want_w = anp.scaled_dot_product_attention(*_repeated(q, k, v), mask=mask, causal=causal)
        for need_weights in (True, False):
            got, got_w = backend.call("grouped_query_attention", q, k, v, mask=mask, causal=causal,
                                      need_weights=need_weights)
            np.testing.assert_allclose(got, want, **tol(np.float64))
            if need_weights:
                np.testing.assert_allclose(got_w, want_w, **tol(np.float64))


def _decode_step(lib, conv, kv=8, h=32, tokens=2048, d=64):
    cache = lib.KVCache(1, h, d, n_kv_heads=kv, capacity=tokens + 8)  # room for the steps: no reallocation
    rng = np.random.default_rng(kv)
    past = conv(rng.normal(size=(kv, tokens, d)).astype(np.float32))
    cache.append(0, past, past)
    q1, k1 = (conv(rng.normal(size=(n, 1, d)).astype(np.float32)) for n in (h, kv))
    keys, _ = cache.read(0)
    return (lambda: lib.cached_attention(q1, k1, k1, cache, 0)), keys.nbytes


def test_a_numpy_decoding_step_does_not_copy_the_keys_and_values():
    """g = 4 copies of K and V would be 8 times K's bytes; the step holds less than two (a copy of the mask or a
    temporary over K at most)."""
    step, k_bytes = _decode_step(anp, lambda x: x)
    step()
    assert peak_bytes(step) < 2 * k_bytes


def test_a_torch_decoding_step_does_not_copy_the_keys_and_values():
    """torch.matmul materialises a broadcast operand: K (..., h_kv, 1, n, d) against q (..., h_kv, g, 1, d) would
    allocate g copies.  The folded rows allocate far less than K's bytes in a step, with or without weights."""
    from torch.profiler import ProfilerActivity, profile

    step, k_bytes = _decode_step(att, torch.from_numpy)
    step()
    q = torch.randn(32, 1, 64)
    k, v = torch.randn(2, 8, 2048, 64)
    for fn in (step, lambda: att.grouped_query_attention(q, k, v), lambda: att.grouped_query_attention(
            q, k, v, need_weights=False)):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        allocated = sum(e.cpu_memory_usage for e in prof.events() if e.cpu_memory_usage > 0)
        assert allocated < k_bytes / 2, allocated
