"""Sliding-window attention with global tokens, and linear attention (chapter 10), in both backends."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import to_numpy, to_torch, tol


def dense_reference(q, k, v, window, global_tokens, causal):
    """Exact attention with the dense mask: what the sliding-window function must equal."""
    mask = anp.sliding_window_mask(q.shape[-2], window, causal=causal, global_tokens=global_tokens)
    return anp.scaled_dot_product_attention(q, k, v, mask=mask)[0]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n", "window", "glob"), [
    (10, 3, ()), (37, 4, (0, 5, 36)), (16, 16, (3,)), (5, 1, ()), (9, 20, (2,)), (1, 1, (0,)), (40, 6, (39, 0)),
])
def test_sliding_window_equals_masked_exact_attention(backend, n, window, glob, causal):
    rng = np.random.default_rng(n + window)
    q, k, v = rng.normal(size=(2, n, 6)), rng.normal(size=(n, 6)), rng.normal(size=(2, n, 3))
    got = backend.call("sliding_window_attention", q, k, v, window, global_tokens=glob, causal=causal)
    np.testing.assert_allclose(got, dense_reference(q, k, v, window, glob, causal), **tol(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sliding_window_keeps_the_dtype_and_agrees_across_backends(dtype, device):
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(3, 50, 8)).astype(dtype) for _ in range(3))
    expected = anp.sliding_window_attention(q, k, v, 7, global_tokens=(0, 25))
    got = att.sliding_window_attention(*(to_torch(a, device) for a in (q, k, v)), 7, global_tokens=(0, 25))
    assert expected.dtype == dtype and got.dtype == to_torch(q).dtype
    np.testing.assert_allclose(to_numpy(got), expected, **tol(dtype))


def test_sliding_window_never_holds_an_n_by_n_array():
    n, d, window, glob = 4096, 16, 32, (0, 1)
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(n, d)) for _ in range(3))
    tracemalloc.start()
    anp.sliding_window_attention(q, k, v, window, global_tokens=glob)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Right: scores and weights for ~3 window + g keys per query, plus O(n d) arrays; wrong: n x n (128 MiB).
    per_query = 3 * window + len(glob)
    assert peak <= 6 * n * per_query * 8 + 20 * n * d * 8, peak / (n * n * 8)
    assert peak < n * n * 8 / 8


def test_sliding_window_gradients_flow_in_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(12, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = att.sliding_window_attention(q, k, v, 3, global_tokens=(0,), causal=True)
    mask = att.sliding_window_mask(12, 3, causal=True, global_tokens=(0,))
    ref = att.scaled_dot_product_attention(q, k, v, mask=mask)[0]
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    ref_grads = torch.autograd.grad(ref.sum(), (q, k, v))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_sliding_window_mask_with_global_tokens():
    mask = anp.sliding_window_mask(6, 2, global_tokens=(4,))
    expected = np.abs(np.arange(6)[:, None] - np.arange(6)) < 2
    expected[4, :] = expected[:, 4] = True
    np.testing.assert_array_equal(mask, expected)
    causal = anp.sliding_window_mask(6, 2, causal=True, global_tokens=(1,))
    assert causal[5, 1] and not causal[1, 5] and not np.triu(causal, 1).any()
    np.testing.assert_array_equal(att.sliding_window_mask(6, 2, global_tokens=(4,)).numpy(), mask)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"window": 0}, ValueError, "window"),
    ({"window": 2.5}, ValueError, "window"),
    ({"window": 2, "global_tokens": (9,)}, ValueError, "global_tokens"),
    ({"window": 2, "global_tokens": (1, 1)}, ValueError, "global_tokens"),
    ({"window": 2, "global_tokens": ("a",)}, TypeError, "global_tokens"),
])
def test_sliding_window_bad_input(backend, kwargs, error, match):
    x = np.ones((4, 2))
    options = {key: value for key, value in kwargs.items() if key != "window"}
    with pytest.raises(error, match=match):
        backend.call("sliding_window_attention", x, x, x, kwargs["window"], **options)


def test_sliding_window_refuses_cross_attention(backend):
    with pytest.raises(ValueError, match="n_q == n_k"):
        backend.call("sliding_window_attention", np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2)), 2)


# --------------------------------------------------------------------------- linear attention

def linear_by_definition(q, k, v, causal):
    """Row by row: weights phi(q_i).phi(k_j) over the visible keys, normalised, applied to v."""
    phi = anp.linear_attention.__globals__["elu_feature_map"]
    n_q, n_k = q.shape[-2], k.shape[-2]
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for i in range(n_q):
        last = i + n_k - n_q if causal else n_k - 1
        if last < 0:
            continue
        w = np.einsum("...d,...jd->...j", phi(q[..., i, :]), phi(k[..., : last + 1, :]))
        out[..., i, :] = np.einsum("...j,...jd->...d", w / w.sum(-1, keepdims=True), v[..., : last + 1, :])
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n_q", "n_k"), [(7, 7), (4, 9), (9, 4)])
def test_linear_attention_is_its_definition(backend, causal, n_q, n_k):
    rng = np.random.default_rng(n_q * 10 + n_k)
    q, k, v = rng.normal(size=(2, n_q, 5)), rng.normal(size=(2, n_k, 5)), rng.normal(size=(2, n_k, 3))
    got = backend.call("linear_attention", q, k, v, causal=causal)
    np.testing.assert_allclose(got, linear_by_definition(q, k, v, causal), **tol(np.float64))


def test_linear_attention_differs_from_softmax_attention_unless_the_kernel_factorises():
    """elu + 1 gives another function than softmax; where exp(q . k) does factorise (d = 1, q = 1:
    exp(k) = e^-1 * exp(1) * exp(k)) the feature map exp reproduces softmax attention exactly."""
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    assert np.abs(anp.linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]).max() > 1e-2
    ones, k1 = np.ones((6, 1)), rng.normal(size=(6, 1))
    np.testing.assert_allclose(anp.linear_attention(ones, k1, v, feature_map=np.exp),
                               anp.scaled_dot_product_attention(ones, k1, v)[0], rtol=1e-12)


def test_linear_attention_feature_map_is_checked(backend):
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match="feature_map"):
        backend.call("linear_attention", x, x, x, feature_map="relu")


def test_causal_linear_attention_leaks_nothing_from_the_future(backend):
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    out = backend.call("linear_attention", q, k, v, causal=True)
    k2, v2 = k.copy(), v.copy()
    k2[5:], v2[5:] = rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    out2 = backend.call("linear_attention", q, k2, v2, causal=True)
    np.testing.assert_allclose(out[:5], out2[:5], rtol=1e-12)
    assert not np.allclose(out[5:], out2[5:])
