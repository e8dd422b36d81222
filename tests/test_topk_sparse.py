"""Top-k sparse attention and DeepSeek-V3.2's lightning indexer (chapter 20), in both backends.

The reference selection is written here as a plain sort: per query, the visible keys ordered by index
score (highest first) and, among equal scores, by index (lowest first), the first ``top_k`` kept.  Top-k
attention must equal dense attention (``scaled_dot_product_attention``) with a mask that is True exactly
on those keys.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib.numpy import sparse as nsparse
from attnlib.torch import sparse as tsparse
from conftest import peak_bytes, tol


def module(backend):
    return nsparse if backend.name == "numpy" else tsparse


def topk(backend, q, k, v, index, top_k, **kw):
    a = backend.arr
    return backend.np(module(backend).topk_sparse_attention(a(q), a(k), a(v), a(index), top_k, **kw))


def reference_mask(index, top_k, causal):
    """True on each query's top_k visible keys of highest index score, ties to the lower index."""
    n_q, n_k = index.shape[-2:]
    visible = np.broadcast_to(anp.causal_mask(n_q, n_k) if causal else np.ones((n_q, n_k), bool), index.shape)
    mask = np.zeros(index.shape, dtype=bool)
    for row in np.ndindex(index.shape[:-1]):
        keys = sorted((j for j in range(n_k) if visible[row][j]), key=lambda j: (-index[row][j], j))
        mask[row + (keys[:top_k],)] = True
    return mask


def dense_reference(q, k, v, index, top_k, causal):
    return anp.scaled_dot_product_attention(q, k, v, mask=reference_mask(index, top_k, causal))[0]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("n_q", "n_k", "top_k"), [(9, 9, 3), (4, 11, 5), (12, 12, 1), (7, 5, 2), (16, 16, 6)])
def test_topk_equals_dense_attention_masked_to_the_selected_keys(backend, n_q, n_k, top_k, causal):
    rng = np.random.default_rng(n_q * n_k + top_k)
    q, k, v = rng.normal(size=(2, n_q, 4)), rng.normal(size=(2, n_k, 4)), rng.normal(size=(2, n_k, 3))
    index = rng.integers(0, 4, size=(2, n_q, n_k)).astype(float)  # few values: many ties
    got = topk(backend, q, k, v, index, top_k, causal=causal)
    np.testing.assert_allclose(got, dense_reference(q, k, v, index, top_k, causal), **tol(np.float64))


def test_batch_dimensions_broadcast(backend):
    """Heads of their own queries and index scores, keys and values shared (one per batch element)."""
    rng = np.random.default_rng(1)
    q, index = rng.normal(size=(2, 3, 8, 4)), rng.normal(size=(1, 3, 8, 10))
    k, v = rng.normal(size=(2, 1, 10, 4)), rng.normal(size=(10, 5))
    got = topk(backend, q, k, v, index, 4)
    expected = dense_reference(q, k, v, np.broadcast_to(index, (2, 3, 8, 10)), 4, True)
    assert got.shape == (2, 3, 8, 5)
    np.testing.assert_allclose(got, expected, **tol(np.float64))


@pytest.mark.parametrize("top_k", [12, 13, 100])
def test_top_k_at_least_the_visible_keys_is_causal_dense_attention(backend, top_k):
    rng = np.random.default_rng(top_k)
    q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(12, 4)), rng.normal(size=(12, 2))
    index = rng.normal(size=(5, 12))
    np.testing.assert_allclose(topk(backend, q, k, v, index, top_k),
                               anp.scaled_dot_product_attention(q, k, v, causal=True)[0], **tol(np.float64))
    np.testing.assert_allclose(topk(backend, q, k, v, index, top_k, causal=False),
                               anp.scaled_dot_product_attention(q, k, v)[0], **tol(np.float64))


def test_ties_go_to_the_lower_index(backend):
    """Equal index scores everywhere: each query keeps its first top_k visible keys, whatever their q.k."""
    rng = np.random.default_rng(2)
    n, top_k = 10, 3
    q, k, v = rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.normal(size=(n, 2))
    k[5:] *= 10  # later keys would win any selection by attention score
    got = topk(backend, q, k, v, np.zeros((n, n)), top_k)
    first = np.arange(n) < top_k  # keys 0, 1, 2 for every query that sees them
    mask = anp.causal_mask(n) & first
    np.testing.assert_allclose(got, anp.scaled_dot_product_attention(q, k, v, mask=mask)[0], **tol(np.float64))
    # a tie at the threshold only: keys 1 and 6 score 5, key 3 scores 9; top-2 of the last query is {3, 1}
    index = np.zeros((1, n))
    index[0, [1, 6]], index[0, 3] = 5.0, 9.0
    chosen = np.zeros((1, n), dtype=bool)
    chosen[0, [1, 3]] = True
    np.testing.assert_allclose(topk(backend, q[-1:], k, v, index, 2),
                               anp.scaled_dot_product_attention(q[-1:], k, v, mask=chosen)[0], **tol(np.float64))


def test_no_future_key_is_ever_selected(backend):
    """Future keys get the highest index scores of all: the causal mask comes first, so none is chosen."""
    rng = np.random.default_rng(3)
    n_q, n_k, top_k = 6, 9, 2
    q, k, v = rng.normal(size=(n_q, 4)), rng.normal(size=(n_k, 4)), rng.normal(size=(n_k, 2))
    index = rng.normal(size=(n_q, n_k))
    future = ~anp.causal_mask(n_q, n_k)
    index[future] = 1e6
    got = topk(backend, q, k, v, index, top_k)
    np.testing.assert_allclose(got, dense_reference(q, k, v, index, top_k, True), **tol(np.float64))
    rows = slice(0, n_q)
    scores = torch.as_tensor(index) if backend.name == "torch" else index
    chosen, valid = module(backend).select_top_k(scores, top_k, rows, n_q, True)
    chosen, valid = backend.np(chosen), backend.np(valid)
    assert valid.all() and not future[np.arange(n_q)[:, None], chosen].any()


def test_a_query_that_sees_no_key_gets_a_zero_row(backend):
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(3, 3)), rng.normal(size=(3, 2))
    got = topk(backend, q, k, v, rng.normal(size=(5, 3)), 2)  # 5 queries, 3 keys: the first two see none
    assert np.all(got[:2] == 0) and np.all(np.isfinite(got))
    assert topk(backend, q[:0], k, v, np.zeros((0, 3)), 2).shape == (0, 2)


def test_only_n_q_times_top_k_attention_scores_are_computed(backend, monkeypatch):
    """Counted where they are made; a dense computation would make n_q x n_k."""
    mod = module(backend)
    made, original = [], mod.gathered_scores
    monkeypatch.setattr(mod, "gathered_scores", lambda *a: made.append(original(*a)) or made[-1])
    rng = np.random.default_rng(5)
    n, top_k = 200, 8
    q, k, v = (rng.normal(size=(3, n, 4)) for _ in range(3))
    topk(backend, q, k, v, rng.normal(size=(3, n, n)), top_k)
    assert sum(int(np.prod(tuple(s.shape))) for s in made) == 3 * n * top_k  # 1/25 of the 3 n^2 dense scores
    assert max(s.shape[-1] for s in made) == top_k


def test_memory_grows_like_n_k_not_n_squared():
    """Besides the index scores passed in, top-k holds O(n k); dense attention holds n x n weights."""
    rng = np.random.default_rng(6)
    top_k, d = 16, 8
    peaks = {}
    for n in (1024, 2048):
        q, k, v = (rng.normal(size=(n, d)) for _ in range(3))
        index = rng.normal(size=(n, n))
        peaks[n] = peak_bytes(lambda: nsparse.topk_sparse_attention(q, k, v, index, top_k))  # noqa: B023
    # Right: rows of n-wide selection arrays for ~top_k queries at a time, O(n top_k); wrong: n x n (16 / 32 MiB).
    assert peaks[2048] < 2048 * 2048 * 8 / 8, peaks
    assert peaks[2048] / peaks[1024] < 3, peaks  # n x n would grow 4x


def test_lightning_indexer_matches_an_explicit_loop(backend):
    rng = np.random.default_rng(7)
    n_q, n_k, h, d = 5, 7, 3, 4
    q_idx, k_idx, w_idx = rng.normal(size=(2, n_q, h, d)), rng.normal(size=(2, n_k, d)), rng.normal(size=(2, n_q, h))
    expected = np.zeros((2, n_q, n_k))
    for b, t, s in np.ndindex(2, n_q, n_k):
        expected[b, t, s] = sum(w_idx[b, t, j] * max(q_idx[b, t, j] @ k_idx[b, s], 0.0) for j in range(h))
    a = backend.arr
    got = backend.np(module(backend).lightning_indexer_scores(a(q_idx), a(k_idx), a(w_idx)))
    np.testing.assert_allclose(got, expected, **tol(np.float64))
    shared = backend.np(module(backend).lightning_indexer_scores(a(q_idx), a(k_idx[:1]), a(w_idx)))  # k broadcast
    np.testing.assert_allclose(shared[0], expected[0], **tol(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_equals_numpy_and_keeps_the_dtype(dtype, device):
    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(size=(2, 40, 6)).astype(dtype) for _ in range(3))
    q_idx, k_idx, w_idx = (rng.normal(size=s).astype(dtype) for s in ((2, 40, 3, 5), (2, 40, 5), (2, 40, 3)))
    index = nsparse.lightning_indexer_scores(q_idx, k_idx, w_idx)
    t = [torch.as_tensor(a, device=device) for a in (q, k, v, q_idx, k_idx, w_idx)]
    t_index = tsparse.lightning_indexer_scores(*t[3:])
    np.testing.assert_allclose(t_index.cpu().numpy(), index, **tol(dtype))
    expected = nsparse.topk_sparse_attention(q, k, v, index, 7)
    got = tsparse.topk_sparse_attention(*t[:3], torch.as_tensor(index, device=device), 7)
    assert expected.dtype == dtype and got.dtype == t[0].dtype and got.device.type == device
    np.testing.assert_allclose(got.cpu().numpy(), expected, **tol(dtype))


def test_torch_gradients_flow_to_queries_keys_and_values():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(7, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    index = torch.randn(7, 7, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: tsparse.topk_sparse_attention(q, k, v, index, 3), (q, k, v))


def test_bad_inputs_are_refused(backend):
    mod, a = module(backend), backend.arr
    q, k, v = np.zeros((4, 3)), np.zeros((5, 3)), np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"index_scores 的最后两维应为 \(n_q, n_k\) = \(4, 5\)"):
        mod.topk_sparse_attention(a(q), a(k), a(v), a(np.zeros((5, 4))), 2)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="top_k"):
            mod.topk_sparse_attention(a(q), a(k), a(v), a(np.zeros((4, 5))), bad)
    with pytest.raises(ValueError, match="NaN"):
        mod.topk_sparse_attention(a(q), a(k), a(v), a(np.full((4, 5), np.nan)), 2)
    with pytest.raises(TypeError, match="浮点"):
        mod.topk_sparse_attention(a(q), a(k), a(v), a(np.zeros((4, 5), dtype=bool)), 2)
    with pytest.raises(ValueError, match="d_k"):
        mod.topk_sparse_attention(a(q), a(np.zeros((5, 4))), a(v), a(np.zeros((4, 5))), 2)
    with pytest.raises(ValueError, match="索引器的形状"):
        mod.lightning_indexer_scores(a(np.zeros((4, 2, 3))), a(np.zeros((5, 4))), a(np.zeros((4, 2))))
    with pytest.raises(ValueError, match="索引器的形状"):
        mod.lightning_indexer_scores(a(np.zeros((4, 2, 3))), a(np.zeros((5, 3))), a(np.zeros((4, 3))))
