"""scaled_dot_product_attention against torch's own F.scaled_dot_product_attention.

The reference is an implementation nobody here wrote; causal masks for
n_q != n_k come from torch's ``causal_lower_right`` (bottom-right aligned).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import Backend, to_torch, tol


@st.composite
def attention_case(draw):
    """Random q, k, v with 0-2 broadcasting batch dims, a dtype, maybe a mask, maybe causal."""
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n_q, n_k = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    d_k, d_v = draw(st.integers(1, 9)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # k and v drop the first batch dim half of the time, so broadcasting is exercised.
    kv_batch = batch[1:] if batch and draw(st.booleans()) else batch
    q = rng.normal(size=(*batch, n_q, d_k)).astype(dtype)
    k = rng.normal(size=(*kv_batch, n_k, d_k)).astype(dtype)
    v = rng.normal(size=(*kv_batch, n_k, d_v)).astype(dtype)
    mask = rng.random((*batch, n_q, n_k)) < draw(st.floats(0.2, 1.0)) if draw(st.booleans()) else None
    causal = draw(st.booleans()) and n_q <= n_k
    return q, k, v, mask, causal


def reference(q, k, v, mask, causal):
    """torch's fused attention on float64 copies, with a bottom-right causal mask."""
    tq, tk, tv = (to_torch(a.astype(np.float64)) for a in (q, k, v))
    batch = torch.broadcast_shapes(tq.shape[:-2], tk.shape[:-2])
    tq, tk, tv = (t.expand(*batch, *t.shape[-2:]) for t in (tq, tk, tv))
    allowed = None if mask is None else to_torch(mask)
    if causal:
        lower_right = causal_lower_right(q.shape[-2], k.shape[-2])._materialize()
        allowed = lower_right if allowed is None else allowed & lower_right
    return F.scaled_dot_product_attention(tq, tk, tv, attn_mask=allowed).numpy()


@settings(max_examples=80, deadline=None)
@given(case=attention_case(), need_weights=st.booleans())
def test_agrees_with_torch_reference(case, need_weights):
    q, k, v, mask, causal = case
    expected = reference(q, k, v, mask, causal)
    for b in (Backend("numpy"), Backend("torch")):
        out, w = b.call("scaled_dot_product_attention", q, k, v, mask=mask, causal=causal, need_weights=need_weights)
        assert out.dtype == q.dtype and out.shape == expected.shape
        np.testing.assert_allclose(out, expected, **tol(q.dtype), err_msg=repr(b))
        assert (w is not None) == need_weights


@settings(max_examples=40, deadline=None)
@given(case=attention_case())
def test_weights_rows_sum_to_one_or_are_zero(case):
    q, k, v, mask, causal = case
    for b in (Backend("numpy"), Backend("torch")):
        out, w = b.call("scaled_dot_product_attention", q, k, v, mask=mask, causal=causal)
        allowed = np.ones(w.shape, bool) if mask is None else np.broadcast_to(mask, w.shape)
        if causal:
            allowed = allowed & anp.causal_mask(q.shape[-2], k.shape[-2])
        assert (w[~allowed] == 0).all(), "masked weights must be exactly 0"
        np.testing.assert_allclose(w.sum(-1), allowed.any(-1).astype(float), **tol(q.dtype))
        empty = ~allowed.any(-1)
        assert (out[empty] == 0).all(), "a fully masked row gives a zero output row"
        assert np.isfinite(out).all() and np.isfinite(w).all()


def test_fully_masked_rows_match_torch(backend):
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))
    mask = rng.random((2, 4, 5)) < 0.5
    mask[0, 1] = False
    mask[1, 3] = False
    out, w = backend.call("scaled_dot_product_attention", q, k, v, mask=mask)
    np.testing.assert_allclose(out, reference(q, k, v, mask, False), **tol(np.float64))
    assert (out[0, 1] == 0).all() and (w[1, 3] == 0).all()


@pytest.mark.parametrize("n_q,n_k", [(3, 7), (7, 7), (1, 5)])
def test_causal_is_bottom_right_aligned(backend, n_q, n_k):
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(n_q, 4)), rng.normal(size=(n_k, 4)), rng.normal(size=(n_k, 3))
    _, w = backend.call("scaled_dot_product_attention", q, k, v, causal=True)
    assert (w[-1] > 0).all(), "the last query sees every key"
    for i in range(n_q):
        assert (w[i, : i + n_k - n_q + 1] > 0).all() and (w[i, i + n_k - n_q + 1:] == 0).all()
    out, _ = backend.call("scaled_dot_product_attention", q, k, v, causal=True, need_weights=False)
    np.testing.assert_allclose(out, reference(q, k, v, None, True), **tol(np.float64))


@pytest.mark.parametrize("n_q,n_k", [(70, 70), (45, 100), (100, 45)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_output_only_path_in_small_blocks_gives_torchs_numbers(monkeypatch, n_q, n_k, dtype):
    """need_weights=False goes block by block (attnlib.numpy.flash); with many small blocks,
    causal blocks that stop at their last visible key and a user mask, it still gives torch's numbers."""
    from attnlib.numpy import flash

    monkeypatch.setattr(flash, "TILE_ELEMENTS", 1)  # 16 query rows per block
    monkeypatch.setattr(flash, "KEY_BLOCK", 13)  # blocks of keys that divide nothing here
    assert flash.block_sizes(None, n_q, n_k, 2) == (16, 13) == flash.block_sizes(None, n_q, n_k, 2, causal=True)
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, n, 8)).astype(dtype) for n in (n_q, n_k, n_k))
    mask = rng.random((2, n_q, n_k)) < 0.8
    hidden = ~anp.causal_mask(n_q, n_k)
    for m in (None, mask):
        visible = ~hidden if m is None else ~hidden & m
        expected = reference(q, k, v, visible, False)  # torch, with the causal mask spelled out
        out, w = anp.scaled_dot_product_attention(q, k, v, mask=m, causal=True)
        out_fast, none = anp.scaled_dot_product_attention(q, k, v, mask=m, causal=True, need_weights=False)
        np.testing.assert_allclose(out, expected, **tol(dtype))
        np.testing.assert_allclose(out_fast, expected, **tol(dtype))
        assert none is None and (w[:, hidden] == 0).all(), "keys a query may not see get weight exactly 0"
        np.testing.assert_allclose(w.sum(-1), np.broadcast_to(visible.any(-1), (2, n_q)), **tol(dtype))


def test_causal_with_more_queries_than_keys_leaves_first_rows_empty(backend):
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(5, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    out, w = backend.call("scaled_dot_product_attention", q, k, v, causal=True)
    np.testing.assert_array_equal(w[:2], 0.0)
    np.testing.assert_array_equal(out[:2], 0.0)
    np.testing.assert_allclose(w[2:].sum(-1), 1.0)


def test_attention_scores_and_projection(backend):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 6))
    w_q, w_k, w_v = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 5))
    q, k, v = backend.call("qkv_projection", x, w_q, w_k, w_v)
    np.testing.assert_allclose(q, x @ w_q)
    np.testing.assert_allclose(v, x @ w_v)
    s = backend.call("attention_scores", q, k)
    np.testing.assert_allclose(s, np.einsum("bid,bjd->bij", q, k) / np.sqrt(3))
    np.testing.assert_allclose(backend.call("attention_scores", q, k, scale=False), np.einsum("bid,bjd->bij", q, k))
    np.testing.assert_allclose(backend.call("attention_scores", q, k, scale=0.5), 0.5 * np.einsum("bid,bjd->bij", q, k))


def test_masks_agree_between_backends():
    for n_q, n_k in [(4, 4), (2, 5), (5, 2), (0, 3)]:
        np.testing.assert_array_equal(att.causal_mask(n_q, n_k).numpy(), anp.causal_mask(n_q, n_k))
    for n_q, n_k in [(4, 4), (2, 5), (1, 6)]:
        np.testing.assert_array_equal(anp.causal_mask(n_q, n_k), causal_lower_right(n_q, n_k)._materialize().numpy())
    np.testing.assert_array_equal(anp.causal_mask(4, 2), [[0, 0], [0, 0], [1, 0], [1, 1]])
    np.testing.assert_array_equal(anp.padding_mask([2, 0, 3], 3)[:, 0], [[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(att.padding_mask([2, 0, 3], 3).numpy(), anp.padding_mask([2, 0, 3], 3))
    for causal in (False, True):
        np.testing.assert_array_equal(att.sliding_window_mask(6, 2, causal=causal).numpy(),
                                      anp.sliding_window_mask(6, 2, causal=causal))
    np.testing.assert_array_equal(anp.sliding_window_mask(4, 2, causal=True),
                                  [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    np.testing.assert_array_equal(anp.sliding_window_mask(3, 2), [[1, 1, 0], [1, 1, 1], [0, 1, 1]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_large_scores_need_and_get_the_shift(backend, dtype, causal):
    """Rows whose scores reach ~1e4 (exp overflows unshifted) beside rows of ordinary size."""
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(6, 16)), rng.normal(size=(9, 16)), rng.normal(size=(9, 3))
    q[::2] *= 3e3  # even rows: scores far beyond exp's range; odd rows: scores of ordinary size
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    for need_weights in (True, False):
        out, w = backend.call("scaled_dot_product_attention", q, k, v, causal=causal, need_weights=need_weights)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out, reference(q, k, v, None, causal), rtol=1e-4 if dtype == np.float32 else 1e-10,
                                   atol=1e-4 if dtype == np.float32 else 1e-12)
        if need_weights:
            assert ((w[::2] > 0.999).sum(-1) == 1).all(), "huge scores give (nearly) one-hot rows"
