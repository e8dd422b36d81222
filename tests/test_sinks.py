"""Attention sinks and streaming generation (chapter 22): sink logits, the StreamingLLM mask, the rolling cache.

The references are written here from the definitions, independently of attnlib:

* attention with a sink logit ``b`` is a softmax over the row ``[s_i0 … s_i,n_k-1, b]`` with the last column
  dropped (its value is zero), computed in float64 with the row's maximum subtracted;
* the StreamingLLM mask is chapter 10's causal sliding window with the first ``n_sink`` positions global;
* a rolling cache decoding one token (or a few) at a time gives the rows of one parallel attention under that
  mask, with RoPE at the original positions, or, with the positions StreamingLLM assigns (slots in the cache),
  the rows of a parallel attention whose queries meet the sinks at their in-cache distance.
Both backends are run on the same inputs (torch on every device here).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import tol


def reference(q, k, v, sink, mask=None):
    """float64: softmax over [scores, b] with the sink's column dropped; (out, weights)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    b = np.broadcast_to(np.asarray(sink, dtype=np.float64)[..., None, None], s.shape[:-1] + (1,))
    row = np.concatenate([s, b], axis=-1)
    top = row.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(row - top)
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)[..., :-1]
    return w @ v, w


def qkv(rng, *lead, n_q=4, n_k=6, d=5, d_v=3, dtype=np.float64):
    return (rng.normal(size=(*lead, n_q, d)).astype(dtype), rng.normal(size=(*lead, n_k, d)).astype(dtype),
            rng.normal(size=(*lead, n_k, d_v)).astype(dtype))


# --------------------------------------------------------------------------- sink_attention

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_sink_is_one_more_logit_in_the_denominator(backend, dtype):
    rng = np.random.default_rng(0)
    q, k, v = qkv(rng, 2, 3, dtype=dtype)  # batch 2, 3 heads
    sink = np.array([-1.0, 0.0, 2.5])  # one logit per head
    out, w = backend.call("sink_attention", q, k, v, sink)
    want_out, want_w = reference(q, k, v, sink)
    assert out.dtype == dtype and w.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(w, want_w, **tol(dtype))
    np.testing.assert_allclose(out, want_out, **tol(dtype))
    share = 1 - w.sum(-1)  # the sink's share grows with its logit
    assert (share > 0).all() and (share[:, 0] < share[:, 1]).all() and (share[:, 1] < share[:, 2]).all()


def test_softmax_plus_one_and_minus_infinity(backend):
    rng = np.random.default_rng(1)
    q, k, v = qkv(rng, 2)
    _, w = backend.call("sink_attention", q, k, v, 0.0)  # "softmax plus one": exp(s) / (1 + Σ exp(s))
    e = np.exp(q @ np.swapaxes(k, -1, -2) / math.sqrt(5))
    np.testing.assert_allclose(w, e / (1 + e.sum(-1, keepdims=True)), **tol(np.float64))
    out, w = backend.call("sink_attention", q, k, v, -np.inf, causal=True)  # no sink: ordinary attention
    want_out, want_w = anp.scaled_dot_product_attention(q, k, v, causal=True)
    np.testing.assert_allclose(w, want_w, **tol(np.float64))
    np.testing.assert_allclose(out, want_out, **tol(np.float64))


def test_masks_and_the_causal_mask_hide_keys_and_leave_their_weight_to_the_sink(backend):
    rng = np.random.default_rng(2)
    q, k, v = qkv(rng, 3, n_q=4, n_k=7)
    mask = rng.random((3, 4, 7)) < 0.6
    sink = np.array([0.3, -0.7, 1.1])
    out, w = backend.call("sink_attention", q, k, v, sink, mask=mask, causal=True)
    allowed = mask & anp.causal_mask(4, 7)
    want_out, want_w = reference(q, k, v, sink, allowed)
    np.testing.assert_allclose(w, want_w, **tol(np.float64))
    np.testing.assert_allclose(out, want_out, **tol(np.float64))
    assert (w[~allowed] == 0).all()


def test_a_fully_masked_row_gives_everything_to_the_sink(backend):
    rng = np.random.default_rng(3)
    q, k, v = qkv(rng, 2, n_q=3, n_k=4)
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    for sink in (0.0, -5.0, -np.inf):
        out, w = backend.call("sink_attention", q, k, v, sink, mask=mask)
        assert np.isfinite(out).all() and np.isfinite(w).all()
        assert (w[:, 1] == 0).all() and (out[:, 1] == 0).all()  # zero weights, zero output, never NaN
        kept = w[:, 0].sum(-1)  # the other rows: the sink takes a share unless it is -inf
        assert (kept < 1).all() if np.isfinite(sink) else np.allclose(kept, 1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stable_at_large_scores(backend, dtype):
    """Every score is a² = 10⁴ (d = 1, q = k = a) and b = 10⁴ + 0.75 (exact in float32 too): each of the n keys
    gets 1/(n + e^0.75), the sink the rest."""
    n, a = 5, 100.0
    q = np.full((1, 1), a, dtype=dtype)
    k = np.full((n, 1), a, dtype=dtype)
    v = np.arange(n, dtype=dtype)[:, None]
    out, w = backend.call("sink_attention", q, k, v, a * a + 0.75)
    assert np.isfinite(w).all() and np.isfinite(out).all()
    share = 1 / (n + math.exp(0.75))
    np.testing.assert_allclose(w, np.full((1, n), share), rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(out, [[sum(range(n)) * share]], rtol=1e-5 if dtype == np.float32 else 1e-12)
    out, w = backend.call("sink_attention", q, k, v, -1e4)  # a sink far below: plain
    np.testing.assert_allclose(w, np.full((1, n), 1 / n), rtol=1e-5)


def test_a_large_sink_lets_a_head_attend_to_nothing(backend):
    rng = np.random.default_rng(4)
    q, k, v = qkv(rng, 2)
    out, w = backend.call("sink_attention", q, k, v, np.array([40.0, -40.0]))
    assert np.abs(out[0]).max() < 1e-12 and w[0].sum(-1).max() < 1e-12  # head 0: (almost) no weight anywhere
    np.testing.assert_allclose(w[1].sum(-1), 1, rtol=1e-12)  # head 1: ordinary attention


def test_the_backends_agree(device):
    rng = np.random.default_rng(5)
    q, k, v = qkv(rng, 2, 4, n_q=5, n_k=9)
    sink = rng.normal(size=4)
    mask = rng.random((5, 9)) < 0.7
    want = anp.sink_attention(q, k, v, sink, mask=mask, causal=True)
    got = att.sink_attention(*(torch.tensor(x, device=device) for x in (q, k, v)), torch.tensor(sink, device=device),
                             mask=torch.tensor(mask), causal=True)
    for a, b in zip(got, want, strict=True):
        assert a.device.type == torch.device(device).type
        np.testing.assert_allclose(a.cpu().numpy(), b, **tol(np.float64))


def test_the_torch_sink_logit_learns():
    """The gradient of the real keys' weight with respect to a head's sink logit is −(their weight)·(sink share)."""
    rng = np.random.default_rng(6)
    q, k, v = (torch.tensor(x) for x in qkv(rng, 2))
    sink = torch.tensor([0.5, -0.5], dtype=torch.float64, requires_grad=True)
    _, w = att.sink_attention(q, k, v, sink)
    w.sum().backward()
    kept = w.detach().sum(-1)
    assert torch.allclose(sink.grad, -(kept * (1 - kept)).sum(-1))


@pytest.mark.parametrize(("sink", "error", "words"), [
    (np.zeros(3), ValueError, "无法广播"),
    (np.array([0.0, np.nan]), ValueError, "NaN"),
    (np.array([np.inf, 0.0]), ValueError, "+inf"),
    (np.array([True, False]), TypeError, "实数"),
])
def test_bad_sink_logits_are_refused_in_chinese(backend, sink, error, words):
    q, k, v = qkv(np.random.default_rng(7), 2)
    with pytest.raises(error, match=words.replace("+", r"\+")):
        backend.call("sink_attention", q, k, v, sink)


def test_integer_sink_logits_are_numbers(backend):
    q, k, v = qkv(np.random.default_rng(8), 2)
    np.testing.assert_allclose(backend.call("sink_attention", q, k, v, 0)[1],
                               backend.call("sink_attention", q, k, v, 0.0)[1])


# --------------------------------------------------------------------------- streaming_mask

@pytest.mark.parametrize(("n", "n_sink", "window"), [(9, 2, 3), (12, 4, 4), (6, 0, 2), (7, 3, 1), (5, 6, 2)])
def test_the_mask_is_a_causal_window_with_the_first_positions_global(backend, n, n_sink, window):
    got = backend.np(backend.lib.streaming_mask(n, n_sink=n_sink, window=window))
    want = anp.sliding_window_mask(n, window, causal=True, global_tokens=range(min(n_sink, n)))
    assert got.dtype == bool and np.array_equal(got, want)
    t = np.arange(n)
    seen = np.minimum(t + 1, window) + np.clip(np.minimum(n_sink, t + 1 - window), 0, None)
    assert np.array_equal(got.sum(1), seen)  # never more than n_sink + window keys


def test_the_mask_is_bottom_right_aligned(backend):
    full = anp.streaming_mask(11, n_sink=2, window=3)
    for n_q in (1, 4, 11):
        got = backend.np(backend.lib.streaming_mask(n_q, 11, n_sink=2, window=3))
        assert np.array_equal(got, full[-n_q:])
    last = backend.np(backend.lib.streaming_mask(1, 11, n_sink=2, window=3))[0]
    assert last.tolist() == [True, True] + [False] * 6 + [True] * 3


def test_the_mask_s_limits(backend):
    assert np.array_equal(backend.np(backend.lib.streaming_mask(4, 9, n_sink=3, window=9)), anp.causal_mask(4, 9))
    assert np.array_equal(backend.np(backend.lib.streaming_mask(8, n_sink=0, window=3)),
                          anp.sliding_window_mask(8, 3, causal=True))


@pytest.mark.parametrize(("args", "kwargs", "words"), [
    ((5, 3), {"n_sink": 1, "window": 2}, "n_q 不能大于 n_k"),
    ((5,), {"n_sink": 1, "window": 0}, "window"),
    ((5,), {"n_sink": -1, "window": 2}, "n_sink"),
    ((5,), {"n_sink": True, "window": 2}, "n_sink"),
])
def test_bad_mask_arguments_are_refused_in_chinese(backend, args, kwargs, words):
    with pytest.raises(ValueError, match=words):
        backend.lib.streaming_mask(*args, **kwargs)


# --------------------------------------------------------------------------- SinkKVCache

def heads(rng, h, n, d=4):
    return rng.normal(size=(h, n, d))


def test_one_token_at_a_time_the_cache_holds_the_sinks_and_the_window(backend):
    rng = np.random.default_rng(10)
    k, v = heads(rng, 2, 20), heads(rng, 2, 20)
    cache = backend.lib.SinkKVCache(1, 2, 4, n_sink=3, window=5)
    assert cache.capacity == 8 and cache.length == 0
    for t in range(20):
        keys, values = (backend.np(x) for x in cache.append(0, backend.arr(k[:, t:t + 1]), backend.arr(v[:, t:t + 1])))
        held = [j for j in range(t + 1) if j < 3 or t - j < 5]  # what query t may attend to
        assert backend.np(cache.tokens(0)).tolist() == held
        assert backend.np(cache.positions(0)).tolist() == list(range(len(held)))
        assert np.array_equal(keys, k[:, held]) and np.array_equal(values, v[:, held])
        assert cache.length == len(held) <= cache.capacity and cache.seen == t + 1
    assert cache.nbytes == 2 * 2 * 8 * 4 * 8  # K and V, 2 heads, 8 tokens, d 4, float64


def test_token_t_evicts_token_t_minus_window(backend):
    cache = backend.lib.SinkKVCache(1, 1, 1, n_sink=2, window=3)
    gone = []
    for t in range(9):
        before = set(backend.np(cache.tokens()).tolist())
        cache.append(0, backend.arr(np.full((1, 1, 1), float(t))), backend.arr(np.zeros((1, 1, 1))))
        gone += sorted(before - set(backend.np(cache.tokens()).tolist()))
    assert gone == [t - 3 for t in range(5, 9)]  # token t evicts t − window once the cache is full


@pytest.mark.parametrize("chunks", [[1] * 13, [5, 1, 1, 6], [13], [2, 4, 3, 4]])
def test_rolling_decoding_equals_parallel_attention_under_the_mask(backend, chunks):
    """Grouped heads (4 query heads, 2 key/value heads); a chunk of t tokens attends under streaming_mask(t, length)."""
    rng = np.random.default_rng(11)
    n, n_sink, window = sum(chunks), 2, 4
    q, k, v = heads(rng, 4, n), heads(rng, 2, n), heads(rng, 2, n)
    want, _ = anp.grouped_query_attention(q, k, v, mask=anp.streaming_mask(n, n_sink=n_sink, window=window))
    cache = backend.lib.SinkKVCache(1, 4, 4, n_sink=n_sink, window=window, n_kv_heads=2)
    start = 0
    for t in chunks:
        keys, values = cache.append(0, backend.arr(k[:, start:start + t]), backend.arr(v[:, start:start + t]))
        mask = backend.lib.streaming_mask(t, cache.length, n_sink=n_sink, window=window)
        out, _ = backend.lib.grouped_query_attention(backend.arr(q[:, start:start + t]), keys, values, mask=mask)
        np.testing.assert_allclose(backend.np(out), want[:, start:start + t], **tol(np.float64))
        start += t


def rope_scores_attention(q, k, v, q_pos, k_pos, mask, base=100.0):
    """Attention whose query i meets key j at positions (q_pos[i, j], k_pos[j]) under RoPE; one head."""
    n_q, n_k = mask.shape
    s = np.empty((n_q, n_k))
    for i in range(n_q):
        for j in range(n_k):
            qi = anp.apply_rope(q[i:i + 1], np.array([q_pos[i, j]]), base=base)
            kj = anp.apply_rope(k[j:j + 1], np.array([k_pos[j]]), base=base)
            s[i, j] = (qi @ kj.T)[0, 0] / math.sqrt(q.shape[-1])
    w = anp.softmax(s, mask=mask)
    return w @ v


def test_the_positions_it_hands_to_rope(backend):
    """Keys cached before RoPE.  Rotated by tokens(): the parallel attention under the mask at the original
    positions.  Rotated by positions() (StreamingLLM): query t meets a sink at its in-cache distance
    min(t, capacity − 1) − j, and the keys of its window at their original distances."""
    rng = np.random.default_rng(12)
    n, n_sink, window = 11, 2, 3
    cap = n_sink + window
    q, k, v = heads(rng, 1, n)[0], heads(rng, 1, n)[0], heads(rng, 1, n)[0]
    mask = anp.streaming_mask(n, n_sink=n_sink, window=window)
    t, j = np.arange(n)[:, None], np.arange(n)[None, :]
    original = rope_scores_attention(q, k, v, np.broadcast_to(t, (n, n)), np.arange(n), mask)
    in_cache = np.where(j < n_sink, np.minimum(t, cap - 1), t)  # the query's position as each key sees it
    streaming = rope_scores_attention(q, k, v, np.broadcast_to(in_cache, (n, n)), np.arange(n), mask)
    cache = backend.lib.SinkKVCache(1, 1, 4, n_sink=n_sink, window=window)
    for step in range(n):
        keys, values = cache.append(0, backend.arr(k[None, step:step + 1]), backend.arr(v[None, step:step + 1]))
        keys, values = backend.np(keys)[0], backend.np(values)[0]
        for which, want in (("tokens", original), ("positions", streaming)):
            pos = backend.np(getattr(cache, which)(0))
            kr = anp.apply_rope(keys, pos, base=100.0)
            qr = anp.apply_rope(q[step:step + 1], pos[-1:], base=100.0)
            out, _ = anp.scaled_dot_product_attention(qr, kr, values)
            np.testing.assert_allclose(out[0], want[step], **tol(np.float64))
    before_eviction = slice(0, cap)
    np.testing.assert_allclose(original[before_eviction], streaming[before_eviction], **tol(np.float64))
    assert np.abs(original[cap:] - streaming[cap:]).max() > 1e-3  # the sinks' distances differ from then on


def test_the_cache_refuses_bad_input_in_chinese(backend):
    cache = backend.lib.SinkKVCache(2, 4, 3, n_sink=1, window=2, n_kv_heads=2)
    x = backend.arr(np.zeros((2, 1, 3)))
    with pytest.raises(ValueError, match="还没有缓存"):
        cache.read(0)
    with pytest.raises(ValueError, match="形状应为"):
        cache.append(0, backend.arr(np.zeros((4, 1, 3))), backend.arr(np.zeros((4, 1, 3))))
    with pytest.raises(ValueError, match="形状必须相同"):
        cache.append(0, x, backend.arr(np.zeros((2, 2, 3))))
    with pytest.raises(ValueError, match="layer"):
        cache.append(2, x, x)
    cache.append(0, x, x)
    with pytest.raises(TypeError, match="请先统一"):
        cache.append(0, backend.arr(np.zeros((2, 1, 3), np.float32)), backend.arr(np.zeros((2, 1, 3), np.float32)))
    with pytest.raises(ValueError, match="批量形状"):
        cache.append(0, backend.arr(np.zeros((5, 2, 1, 3))), backend.arr(np.zeros((5, 2, 1, 3))))
    with pytest.raises(ValueError, match="n_kv_heads"):
        backend.lib.SinkKVCache(1, 4, 3, n_sink=1, window=2, n_kv_heads=3)
    with pytest.raises(ValueError, match="window"):
        backend.lib.SinkKVCache(1, 4, 3, n_sink=1, window=0)
