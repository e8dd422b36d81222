"""Properties of attention that hold for any input: causality, permutations."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import Backend, tol

BACKENDS = [Backend("numpy"), Backend("torch")]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 9), d=st.integers(1, 6), cut=st.data(), seed=st.integers(0, 2**32 - 1),
       need_weights=st.booleans())
def test_causal_outputs_ignore_later_inputs(n, d, cut, seed, need_weights):
    """Changing positions t+1.. of q, k and v never changes outputs 0..t (bit for bit)."""
    t = cut.draw(st.integers(0, n - 2))
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(2, n, d)) for _ in range(3))
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for a in (q2, k2, v2):
        a[:, t + 1:] = rng.normal(scale=100.0, size=a[:, t + 1:].shape)
    for b in BACKENDS:
        out, _ = b.call("scaled_dot_product_attention", q, k, v, causal=True, need_weights=need_weights)
        out2, _ = b.call("scaled_dot_product_attention", q2, k2, v2, causal=True, need_weights=need_weights)
        np.testing.assert_array_equal(out[:, : t + 1], out2[:, : t + 1], err_msg=repr(b))


@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 7), n_k=st.integers(1, 7), d=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_permutations(n_q, n_k, d, seed):
    """Permuting queries permutes outputs; permuting key-value pairs changes nothing."""
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(n_q, d)), rng.normal(size=(n_k, d)), rng.normal(size=(n_k, 3))
    pq, pk = rng.permutation(n_q), rng.permutation(n_k)
    for b in BACKENDS:
        out, w = b.call("scaled_dot_product_attention", q, k, v)
        out_q, w_q = b.call("scaled_dot_product_attention", q[pq], k, v)
        np.testing.assert_allclose(out_q, out[pq], **tol(np.float64))
        np.testing.assert_allclose(w_q, w[pq], **tol(np.float64))
        out_k, w_k = b.call("scaled_dot_product_attention", q, k[pk], v[pk])
        np.testing.assert_allclose(out_k, out, **tol(np.float64))
        np.testing.assert_allclose(w_k, w[:, pk], **tol(np.float64))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**32 - 1))
def test_self_attention_is_permutation_equivariant(n, heads, seed):
    """Multi-head self-attention without positions: permuting the tokens permutes the outputs."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    ws = [rng.normal(size=(8, 8)) for _ in range(4)]
    p = rng.permutation(n)
    for b in BACKENDS:
        out, w = b.call("multi_head_attention", x, x, *ws, heads)
        out_p, w_p = b.call("multi_head_attention", x[p], x[p], *ws, heads)
        np.testing.assert_allclose(out_p, out[p], **tol(np.float64))
        np.testing.assert_allclose(w_p, w[:, p][:, :, p], **tol(np.float64))
