"""Chapter 14 (面试题): the page's self-check facts, checked with attnlib."""

import numpy as np

from attnlib import numpy as anp


def test_unscaled_dot_product_std_is_sqrt_dk():
    rng = np.random.default_rng(14)
    q, k = rng.normal(size=(200_000, 256)), rng.normal(size=(200_000, 256))
    dots = np.einsum("nd,nd->n", q, k)
    assert abs(dots.std() - 16) < 0.2, dots.std()
    assert abs((dots / np.sqrt(256)).std() - 1) < 0.02


def test_self_attention_scores_are_n_by_n():
    n, d_k = 7, 5
    x = np.random.default_rng(0).normal(size=(n, d_k))
    assert anp.attention_scores(x, x).shape == (n, n)
    _, w = anp.scaled_dot_product_attention(x, x, x, causal=True)
    assert w.shape == (n, n) and np.count_nonzero(w) == n * (n + 1) // 2


def test_eight_heads_of_512_scale_by_sqrt_64():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 512))
    w_q, w_k, w_v, w_o = (rng.normal(size=(512, 512)) / np.sqrt(512) for _ in range(4))
    heads = anp.split_heads(x @ w_q, 8)
    assert heads.shape == (8, 6, 64)
    assert anp.merge_heads(heads).shape == (6, 512)
    _, weights = anp.multi_head_attention(x, x, w_q, w_k, w_v, w_o, 8)
    q, k = anp.split_heads(x @ w_q, 8), anp.split_heads(x @ w_k, 8)
    by_64 = anp.softmax(q @ np.swapaxes(k, -1, -2) / 8.0)
    by_512 = anp.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(512))
    np.testing.assert_allclose(weights, by_64, rtol=1e-10)
    assert not np.allclose(weights, by_512, atol=1e-3)
