"""multi_head_attention equals torch.nn.MultiheadAttention loaded with the same weights."""

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from conftest import to_numpy, tol


def torch_mha(d_model, n_heads, kdim=None, vdim=None, seed=0):
    """A torch.nn.MultiheadAttention (float64, batch_first) with random weights and biases."""
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(d_model, n_heads, bias=True, kdim=kdim, vdim=vdim,
                                      batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_(0, 0.5)
    return mha.eval()


def our_weights(mha):
    """Translate torch's (out, in) weights into attnlib's ``x @ w`` convention."""
    e = mha.embed_dim
    if mha._qkv_same_embed_dim:
        w_q, w_k, w_v = mha.in_proj_weight[:e], mha.in_proj_weight[e:2 * e], mha.in_proj_weight[2 * e:]
    else:
        w_q, w_k, w_v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    b = mha.in_proj_bias
    weights = [to_numpy(w.T) for w in (w_q, w_k, w_v, mha.out_proj.weight)]
    biases = {"b_q": to_numpy(b[:e]), "b_k": to_numpy(b[e:2 * e]), "b_v": to_numpy(b[2 * e:]),
              "b_o": to_numpy(mha.out_proj.bias)}
    return weights, biases


CASES = {
    # name: (batch, n_q, n_k, d_model, heads, kdim, vdim); other key widths: see the next test
    "self": (2, 5, 5, 8, 2, None, None),
    "self-4-heads": (3, 6, 6, 12, 4, None, None),
    "cross": (2, 3, 7, 8, 4, None, None),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
def test_equals_torch_multihead_attention(backend, name, masking):
    batch, n_q, n_k, d_model, heads, kdim, vdim = CASES[name]
    mha = torch_mha(d_model, heads, kdim, vdim)
    rng = np.random.default_rng(0)
    x_q = rng.normal(size=(batch, n_q, d_model))
    x_k = x_q if n_q == n_k and kdim is None else rng.normal(size=(batch, n_k, kdim or d_model))
    x_v = x_k
    lengths = rng.integers(1, n_k + 1, size=batch)
    padding = anp.padding_mask(lengths, n_k) if "padding" in masking else None
    causal = "causal" in masking
    allowed = np.ones((batch, n_q, n_k), bool) if padding is None else np.broadcast_to(padding, (batch, n_q, n_k))
    if causal:
        allowed = allowed & anp.causal_mask(n_q, n_k)
    allowed = allowed.copy()
    allowed[~allowed.any(-1)] = True  # torch's module gives NaN for empty rows; keep every row non-empty here
    expected, expected_w = mha(*(torch.as_tensor(a) for a in (x_q, x_k, x_v)),
                               attn_mask=torch.as_tensor(~allowed).repeat_interleave(heads, 0),
                               average_attn_weights=False)
    weights, biases = our_weights(mha)
    mask = None if masking == "none" else allowed
    out, w = backend.call("multi_head_attention", x_q, x_k, *weights, heads, mask=mask, **biases)
    np.testing.assert_allclose(out, to_numpy(expected), **tol(np.float64))
    np.testing.assert_allclose(w, to_numpy(expected_w), **tol(np.float64))
    assert w.shape == (batch, heads, n_q, n_k)


def test_different_key_and_query_widths(backend):
    """Cross-attention where x_kv is narrower than x_q: torch's kdim == vdim case."""
    mha = torch_mha(8, 2, kdim=5, vdim=5)
    rng = np.random.default_rng(1)
    x_q, x_kv = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 5))
    mask = rng.random((2, 3, 4)) < 0.8
    mask[..., 0] = True
    expected, expected_w = mha(torch.as_tensor(x_q), torch.as_tensor(x_kv), torch.as_tensor(x_kv),
                               attn_mask=torch.as_tensor(~mask).repeat_interleave(2, 0), average_attn_weights=False)
    weights, biases = our_weights(mha)
    out, w = backend.call("multi_head_attention", x_q, x_kv, *weights, 2, mask=mask, **biases)
    np.testing.assert_allclose(out, to_numpy(expected), **tol(np.float64))
    np.testing.assert_allclose(w, to_numpy(expected_w), **tol(np.float64))


def test_without_weights_gives_the_same_output(backend):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 5, 8))
    ws = [rng.normal(size=(8, 8)) for _ in range(4)]
    out, w = backend.call("multi_head_attention", x, x, *ws, 4, causal=True)
    out2, w2 = backend.call("multi_head_attention", x, x, *ws, 4, causal=True, need_weights=False)
    np.testing.assert_allclose(out2, out, **tol(np.float64))
    assert w2 is None and w.shape == (2, 4, 5, 5)


def test_one_head_is_single_head_attention(backend):
    rng = np.random.default_rng(3)
    x_q, x_kv = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 5, 6))
    w_q, w_k, w_v, w_o = (rng.normal(size=(6, 6)) for _ in range(4))
    out, w = backend.call("multi_head_attention", x_q, x_kv, w_q, w_k, w_v, w_o, 1)
    single, single_w = anp.scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v)
    np.testing.assert_allclose(out, single @ w_o, **tol(np.float64))
    np.testing.assert_allclose(w[:, 0], single_w, **tol(np.float64))


def test_heads_are_column_slices(backend):
    """Head i is attention on columns i*d_head:(i+1)*d_head of the projections."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 6))
    w_q, w_k, w_v = (rng.normal(size=(6, 6)) for _ in range(3))
    _, w = backend.call("multi_head_attention", x, x, w_q, w_k, w_v, np.eye(6), 3)
    for i in range(3):
        cols = slice(2 * i, 2 * i + 2)
        _, head = anp.scaled_dot_product_attention(x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols])
        np.testing.assert_allclose(w[i], head, **tol(np.float64))


def test_split_and_merge_heads_are_inverse(backend):
    x = np.arange(2 * 5 * 12, dtype=float).reshape(2, 5, 12)
    heads = backend.call("split_heads", x, 3)
    assert heads.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(heads[:, 1], x[..., 4:8])
    np.testing.assert_array_equal(backend.call("merge_heads", heads), x)
