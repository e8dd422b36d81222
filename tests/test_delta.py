"""The delta rule and its chunked form (chapter 19), in both backends."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib.numpy import delta as ndelta
from attnlib.torch import delta as tdelta
from conftest import to_numpy, to_torch, tol

FUNCTIONS = ("delta_rule", "chunked_delta_rule")


def run(backend, fname: str, *arrays, **kwargs):
    """``(out, state)`` of ``fname`` in ``backend``, as numpy arrays."""
    module = ndelta if backend.name == "numpy" else tdelta
    arrays = [backend.arr(a) for a in arrays]
    kwargs = {n: backend.arr(a) if isinstance(a, np.ndarray) else a for n, a in kwargs.items()}
    return tuple(backend.np(r) for r in getattr(module, fname)(*arrays, **kwargs))


def loop_reference(q, k, v, beta, alpha=None, state=None):
    """The formula written out, one (batch, step) at a time: S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1])
    n, d_k, d_v = q.shape[-2], q.shape[-1], v.shape[-1]
    alpha = np.ones(batch + (n,)) if alpha is None else np.broadcast_to(alpha, batch + (n,))
    state = np.zeros(batch + (d_k, d_v)) if state is None else np.broadcast_to(state, batch + (d_k, d_v))
    q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    beta = np.broadcast_to(beta, batch + (n,))
    out, final = np.zeros(batch + (n, d_v)), np.zeros(batch + (d_k, d_v))
    for b in np.ndindex(*batch):
        s = state[b].copy()
        for t in range(n):
            kt = k[b][t][:, None]  # (d_k, 1)
            s = alpha[b][t] * (np.eye(d_k) - beta[b][t] * kt @ kt.T) @ s + beta[b][t] * kt @ v[b][t][None, :]
            out[b][t] = s.T @ q[b][t]
        final[b] = s
    return out, final


def inputs(rng, n=11, d_k=5, d_v=3, gated=True, with_state=True, batch=(2, 3)):
    """Queries, keys, values, beta (and alpha, S_0); keys of norm about 1, not normalised."""
    q = rng.normal(size=batch + (n, d_k))
    k = rng.normal(size=batch + (n, d_k)) / np.sqrt(d_k)
    v = rng.normal(size=batch + (n, d_v))
    beta = rng.uniform(0.1, 1.0, size=batch + (n,))
    alpha = rng.uniform(0.5, 1.0, size=batch + (n,)) if gated else None
    state = rng.normal(size=batch + (d_k, d_v)) if with_state else None
    return q, k, v, beta, alpha, state


def orthonormal(rng, d: int) -> np.ndarray:
    """``d`` orthonormal keys, one per row."""
    return np.linalg.qr(rng.normal(size=(d, d)))[0].T


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrence_is_the_formula(backend, gated, with_state):
    rng = np.random.default_rng(int(gated) + 2 * int(with_state))
    q, k, v, beta, alpha, state = inputs(rng, gated=gated, with_state=with_state)
    got = run(backend, "delta_rule", q, k, v, beta, alpha=alpha, initial_state=state)
    for g, want in zip(got, loop_reference(q, k, v, beta, alpha, state), strict=True):
        np.testing.assert_allclose(g, want, **tol(np.float64))


def test_batch_dimensions_broadcast(backend):
    rng = np.random.default_rng(5)
    q, k, v, beta, alpha, state = inputs(rng, n=6, batch=(2, 3))
    k, alpha, state = k[0], alpha[1], state[0, 0]  # (3, n, d_k), (3, n), (d_k, d_v): shared by the batch
    out, final = run(backend, "delta_rule", q, k, v, beta, alpha=alpha, initial_state=state)
    assert out.shape == (2, 3, 6, 3) and final.shape == (2, 3, 5, 3)
    for g, want in zip((out, final), loop_reference(q, k, v, beta, alpha, state), strict=True):
        np.testing.assert_allclose(g, want, **tol(np.float64))


def fla_naive_recurrent_gated_delta_rule(q, k, v, beta, g):
    """fla's ``naive_recurrent_gated_delta_rule`` (fla/ops/gated_delta_rule/naive.py, MIT), layout [B, H, T, K].

    Transcribed to pin the conventions: the gate ``exp(g)`` before the erase, the state K x V read
    as ``S^T q``, and the default ``scale = K ** -0.5`` on the queries.
    """
    b, h, t, d_k = k.shape
    state = torch.zeros(b, h, d_k, v.shape[-1], dtype=v.dtype)
    q = q * d_k ** -0.5
    o = torch.zeros_like(v)
    for i in range(t):
        state = state * g[:, :, i].exp()[..., None, None]
        b_v = (v[:, :, i] - (state * k[:, :, i][..., None]).sum(-2)) * beta[:, :, i][..., None]
        state = state + k[:, :, i].unsqueeze(-1) * b_v.unsqueeze(-2)
        o[:, :, i] = torch.einsum("bhd,bhdm->bhm", q[:, :, i], state)
    return o, state


def test_matches_fla_naive_recurrence_with_its_query_scale(backend):
    rng = np.random.default_rng(6)
    q, k, v, beta, alpha, _ = inputs(rng, n=9, d_k=4, batch=(2, 2))
    want = fla_naive_recurrent_gated_delta_rule(*(torch.from_numpy(a) for a in (q, k, v, beta, np.log(alpha))))
    got = run(backend, "delta_rule", q * 4 ** -0.5, k, v, beta, alpha=alpha)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), **tol(np.float64))


def test_orthonormal_keys_and_beta_one_make_an_exact_memory(backend):
    rng = np.random.default_rng(7)
    keys = orthonormal(rng, 8)  # (8, 8)
    values = rng.normal(size=(8, 4))
    _, state = run(backend, "delta_rule", keys, keys, values, np.ones(8))
    np.testing.assert_allclose(keys @ state, values, atol=1e-12)  # every value read back: S^T k_i = v_i

    # The same key written twice: the delta rule keeps the last value, linear attention's sum keeps both.
    k2 = np.stack([keys[0], keys[0]])  # (2, 8)
    v2 = rng.normal(size=(2, 4))
    out, state = run(backend, "delta_rule", k2, k2, v2, np.ones(2))
    np.testing.assert_allclose(keys[0] @ state, v2[1], atol=1e-12)
    np.testing.assert_allclose(out[1], v2[1], atol=1e-12)
    linear_state = k2.T @ v2  # chapter 10's S_t = S_{t-1} + k_t v_t^T, without normalisation
    np.testing.assert_allclose(keys[0] @ linear_state, v2[0] + v2[1], atol=1e-12)
    normalised = anp.linear_attention(k2, k2, v2, feature_map=lambda x: x, causal=True)  # divides by q . sum k = 2
    np.testing.assert_allclose(normalised[1], (v2[0] + v2[1]) / 2, atol=1e-12)
    assert np.abs(keys[0] @ linear_state - v2[1]).max() > 0.1


def test_keys_are_used_as_given_and_a_long_key_makes_rewrites_diverge(backend):
    rng = np.random.default_rng(13)
    unit, n = orthonormal(rng, 4)[0], 12
    v = np.tile(rng.normal(size=3), (n, 1))  # the same value written n times under the same key
    for scale, bounded in ((1.0, True), (2.0, False)):  # beta |k|^2 = 1: overwritten; = 4: 1 - 4 = -3 each step
        keys = np.tile(scale * unit, (n, 1))
        _, state = run(backend, "delta_rule", keys, keys, v, np.ones(n))
        read = unit @ state
        if bounded:
            np.testing.assert_allclose(read, v[0], atol=1e-12)
        else:  # the part along k is multiplied by -3 at every step: no normalisation happened inside
            assert np.abs(read).max() > 3.0 ** (n - 2) * np.abs(v[0]).max() / 2


def test_gate_below_one_fades_the_state_geometrically(backend):
    rng = np.random.default_rng(8)
    key, value, a, n = orthonormal(rng, 4)[0], rng.normal(size=3), 0.8, 10
    k = np.zeros((n, 4))
    k[0] = key  # step 0 writes (key, value) with beta = 1; the other steps write nothing
    beta = np.zeros(n)
    beta[0] = 1.0
    alpha = np.full(n, a)
    out, state = run(backend, "delta_rule", np.tile(key, (n, 1)), k, np.tile(value, (n, 1)), beta, alpha=alpha)
    np.testing.assert_allclose(out, a ** np.arange(n)[:, None] * value, atol=1e-12)  # o_t = a^t v
    initial = rng.normal(size=(4, 3))
    _, faded = run(backend, "delta_rule", np.zeros((n, 4)), np.zeros((n, 4)), np.zeros((n, 3)), np.zeros(n),
                   alpha=alpha, initial_state=initial)
    np.testing.assert_allclose(faded, a ** n * initial, atol=1e-12)


@pytest.mark.parametrize("chunk_size", [1, 5, 12, 36, 64])  # 1, not dividing n, dividing it, n, above n
@pytest.mark.parametrize(("gated", "with_state"), [(False, False), (True, False), (False, True), (True, True)])
def test_chunked_equals_the_recurrence(backend, chunk_size, gated, with_state):
    rng = np.random.default_rng(chunk_size)
    q, k, v, beta, alpha, state = inputs(rng, n=36, d_k=6, d_v=4, gated=gated, with_state=with_state, batch=(2,))
    want = run(backend, "delta_rule", q, k, v, beta, alpha=alpha, initial_state=state)
    got = run(backend, "chunked_delta_rule", q, k, v, beta, alpha=alpha, initial_state=state, chunk_size=chunk_size)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-8)


def test_chunked_survives_strong_gates_and_empty_sequences(backend):
    rng = np.random.default_rng(9)
    q, k, v, beta, _, state = inputs(rng, n=70, batch=(2,))
    alpha = rng.uniform(1e-6, 1e-2, size=(2, 70))  # the gate accumulated over a chunk underflows to 0
    want = run(backend, "delta_rule", q, k, v, beta, alpha=alpha, initial_state=state)
    got = run(backend, "chunked_delta_rule", q, k, v, beta, alpha=alpha, initial_state=state, chunk_size=64)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-8)
    for fname in FUNCTIONS:
        out, final = run(backend, fname, q[:, :0], k[:, :0], v[:, :0], beta[:, :0], initial_state=state)
        assert out.shape == (2, 0, 3)
        np.testing.assert_array_equal(final, state)


@pytest.mark.parametrize("size", [1, 2, 3, 8, 13, 64])
def test_unit_lower_inverse_inverts(size):
    rng = np.random.default_rng(size)
    a = np.tril(rng.normal(size=(2, 3, size, size)) * 0.3, -1)
    product = ndelta.unit_lower_inverse(a) @ (np.eye(size) + a)
    np.testing.assert_allclose(product, np.broadcast_to(np.eye(size), a.shape), atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fname", FUNCTIONS)
def test_torch_equals_numpy_and_the_dtype_is_kept(fname, dtype, device):
    rng = np.random.default_rng(10)
    arrays = [None if a is None else a.astype(dtype) for a in inputs(rng, n=40, d_k=8, d_v=4)]
    q, k, v, beta, alpha, state = arrays
    extra = {"chunk_size": 16} if fname == "chunked_delta_rule" else {}
    want = getattr(ndelta, fname)(q, k, v, beta, alpha=alpha, initial_state=state, **extra)
    t = [to_torch(a, device) for a in arrays]
    got = getattr(tdelta, fname)(*t[:4], alpha=t[4], initial_state=t[5], **extra)
    for g, w in zip(got, want, strict=True):
        assert w.dtype == dtype and g.dtype == t[0].dtype and g.device.type == device
        np.testing.assert_allclose(to_numpy(g), w, **tol(dtype))
    if dtype == np.float32:  # float32 results stay within float32 rounding of float64's
        exact = ndelta.delta_rule(*(None if a is None else a.astype(np.float64) for a in arrays[:4]),
                                  alpha=alpha.astype(np.float64), initial_state=state.astype(np.float64))
        np.testing.assert_allclose(want[0], exact[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fname", FUNCTIONS)
def test_gradients_flow_through_the_torch_version(fname):
    rng = np.random.default_rng(11)
    arrays = [torch.from_numpy(a).requires_grad_() for a in inputs(rng, n=4, d_k=3, d_v=2, batch=())]
    extra = {"chunk_size": 3} if fname == "chunked_delta_rule" else {}

    def f(q, k, v, beta, alpha, state):
        return getattr(tdelta, fname)(q, k, v, beta, alpha=alpha, initial_state=state, **extra)

    assert torch.autograd.gradcheck(f, arrays)


def error_cases():
    """(function, arguments changed from a valid call, error type, pattern the message must contain)."""
    return [
        ({"q": (2, 9, 5)}, ValueError, r"长度 n 必须相同.*q.shape=\(2, 9, 5\)"),
        ({"k": (2, 11, 4)}, ValueError, r"d_k.*k.shape=\(2, 11, 4\)"),
        ({"v": (2, 10, 3)}, ValueError, r"序列长度.*v.shape=\(2, 10, 3\)"),
        ({"v": (3, 11, 3)}, ValueError, r"无法广播.*v.shape=\(3, 11, 3\)"),
        ({"beta": (2, 10)}, ValueError, r"beta 的形状应为 \(\.\.\., n\) = \(\.\.\., 11\).*beta.shape=\(2, 10\)"),
        ({"beta": ()}, ValueError, r"beta 的形状应为"),
        ({"alpha": (2, 11, 1)}, ValueError, r"alpha 的形状应为.*alpha.shape=\(2, 11, 1\)"),
        ({"state": (2, 3, 5)}, ValueError, r"initial_state 的形状应为 \(\.\.\., d_k, d_v\) = \(\.\.\., 5, 3\)"),
        ({"state": (4, 5, 3)}, ValueError, r"无法广播.*initial_state.shape=\(4, 5, 3\)"),
        ({"alpha_value": 0.0}, ValueError, r"alpha 是遗忘门.*\(0, 1\]"),
        ({"alpha_value": 1.5}, ValueError, r"alpha 是遗忘门.*1\.5"),
        ({"beta_dtype": np.int64}, TypeError, r"beta 必须是实数浮点数组"),
        ({"beta_dtype": np.float32}, TypeError, r"dtype 不一致"),
    ]


@pytest.mark.parametrize(("change", "error", "pattern"), error_cases())
@pytest.mark.parametrize("fname", FUNCTIONS)
def test_bad_inputs_raise_clear_errors(backend, fname, change, error, pattern):
    shapes = {"q": (2, 11, 5), "k": (2, 11, 5), "v": (2, 11, 3), "beta": (2, 11), "alpha": (2, 11), "state": (2, 5, 3)}
    shapes.update({n: s for n, s in change.items() if n in shapes})
    a = {n: np.full(s, 0.5) for n, s in shapes.items()}
    if "alpha_value" in change:
        a["alpha"][0, 3] = change["alpha_value"]
    a["beta"] = a["beta"].astype(change.get("beta_dtype", np.float64))
    with pytest.raises(error, match=re.compile(pattern)):
        run(backend, fname, a["q"], a["k"], a["v"], a["beta"], alpha=a["alpha"], initial_state=a["state"])


@pytest.mark.parametrize("chunk_size", [0, -1, 2.5, True, None])
def test_chunk_size_must_be_a_positive_int(backend, chunk_size):
    q, k, v, beta, alpha, state = inputs(np.random.default_rng(12), n=4)
    with pytest.raises(ValueError, match="chunk_size 必须是不小于 1 的整数"):
        run(backend, "chunked_delta_rule", q, k, v, beta, chunk_size=chunk_size)
