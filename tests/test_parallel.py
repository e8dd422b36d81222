"""attnlib.*.parallel (chapter 7): the loop form is the matrix form, the scan is the recurrence, in both backends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import to_numpy, to_torch, tol


def reference_scan(x, w, u, h0=None):
    """The recurrence written out for one sequence (x: (n, d_in)), step by step."""
    h = np.zeros(w.shape[1]) if h0 is None else np.asarray(h0, dtype=float)
    states = []
    for x_t in x:
        h = np.tanh(x_t @ w + h @ u)
        states.append(h)
    return np.array(states).reshape(len(x), w.shape[1])


SHAPES = [  # (q, k, v) shapes: self-attention, cross-attention with d_v != d_k, broadcast batch and heads
    ((5, 4), (5, 4), (5, 4)),
    ((3, 8), (7, 8), (7, 2)),
    ((2, 1, 6, 4), (1, 3, 9, 4), (9, 5)),
]


@pytest.mark.parametrize(("sq", "sk", "sv"), SHAPES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_loop_form_equals_the_matrix_form(backend, sq, sk, sv, dtype):
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=s).astype(dtype) for s in (sq, sk, sv))
    got = backend.call("attention_loop", q, k, v)
    want = anp.scaled_dot_product_attention(q, k, v)[0]
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **tol(dtype))


def test_each_pass_of_the_loop_needs_no_other_pass():
    """Any subset of the queries, in any order, gives the same rows as all of them at once."""
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(9, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    order = rng.permutation(9)
    full = anp.attention_loop(q, k, v)
    one_by_one = np.stack([anp.attention_loop(q[i:i + 1], k, v)[0] for i in order])
    assert np.array_equal(one_by_one, full[order])


def test_large_scores_stay_finite_and_no_query_gives_an_empty_output(backend):
    rng = np.random.default_rng(3)
    q, k, v = 1e3 * rng.normal(size=(4, 8)), rng.normal(size=(5, 8)), rng.normal(size=(5, 2))
    got = backend.call("attention_loop", q, k, v)
    np.testing.assert_allclose(got, anp.scaled_dot_product_attention(q, k, v)[0], **tol(np.float64))
    assert backend.call("attention_loop", q[:0], k, v).shape == (0, 2)


@pytest.mark.parametrize("with_h0", [False, True])
def test_the_scan_is_the_recurrence(backend, with_h0):
    rng = np.random.default_rng(4)
    x, w, u = rng.normal(size=(7, 3)), rng.normal(size=(3, 5)), rng.normal(size=(5, 5))
    h0 = rng.normal(size=5) if with_h0 else None
    got = backend.call("rnn_scan", x, w, u, h0)
    np.testing.assert_allclose(got, reference_scan(x, w, u, h0), **tol(np.float64))


def test_the_scan_runs_every_sequence_of_a_batch_and_keeps_float32(backend):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 6, 4)).astype(np.float32)
    w, u = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3, 3)).astype(np.float32)
    h0 = rng.normal(size=(3, 3)).astype(np.float32)  # one initial state per sequence of the second axis
    got = backend.call("rnn_scan", x, w, u, h0)
    assert got.dtype == np.float32 and got.shape == (2, 3, 6, 3)
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(got[a, b], reference_scan(x[a, b], w, u, h0[b]), rtol=1e-5, atol=1e-5)
    assert backend.call("rnn_scan", x[..., :0, :], w, u).shape == (2, 3, 0, 3)


def test_every_state_depends_on_the_order_of_the_steps():
    """Step t needs h_{t-1}: reading the same inputs in another order gives other states, unlike attention."""
    rng = np.random.default_rng(6)
    x, w, u = rng.normal(size=(8, 4)), rng.normal(size=(4, 4)) / 2, rng.normal(size=(4, 4)) / 2
    hs = anp.rnn_scan(x, w, u)
    swapped = x.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert np.abs(anp.rnn_scan(swapped, w, u)[1:] - hs[1:]).min(axis=-1).max() > 1e-3
    changed = x.copy()
    changed[0] += 1.0
    assert (np.abs(anp.rnn_scan(changed, w, u) - hs).max(axis=-1) > 0).all()  # x_0 reaches every later state


def test_gradients_flow_through_both_torch_loops():
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(att.attention_loop, (q, k, v))
    x = torch.randn(5, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    u = torch.randn(3, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(att.rnn_scan, (x, w, u))


def test_the_torch_twins_run_on_every_device(device):
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 3))
    got = att.attention_loop(*(to_torch(a, device) for a in (q, k, v)))
    assert got.device.type == device
    np.testing.assert_allclose(to_numpy(got), anp.attention_loop(q, k, v), rtol=1e-10, atol=1e-12)
    x, w, u = rng.normal(size=(6, 4)), rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    got = att.rnn_scan(*(to_torch(a, device) for a in (x, w, u)))
    assert got.device.type == device
    np.testing.assert_allclose(to_numpy(got), anp.rnn_scan(x, w, u), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("name", "args", "error", "fragment"), [
    ("attention_loop", ((3, 4), (5, 2), (5, 2)), ValueError, "d_k"),
    ("attention_loop", ((3, 4), (5, 4), (6, 2)), ValueError, "(6, 2)"),
    ("rnn_scan", ((6, 4), (3, 2), (2, 2)), ValueError, "(3, 2)"),
    ("rnn_scan", ((6, 4), (4, 2), (3, 3)), ValueError, "(3, 3)"),
    ("rnn_scan", ((6, 4), (4, 2), (2, 2), (3,)), ValueError, "(3,)"),
])
def test_bad_shapes_are_refused_with_the_shapes_named(backend, name, args, error, fragment):
    arrays = [np.ones(s) for s in args]
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        backend.call(name, *arrays)


def test_integer_inputs_are_refused(backend):
    with pytest.raises(TypeError):
        backend.call("rnn_scan", np.ones((3, 2), dtype=int), np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(TypeError):
        backend.call("attention_loop", np.ones((3, 2)), np.ones((3, 2), dtype=int), np.ones((3, 2)))
