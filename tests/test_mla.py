"""Multi-head latent attention (chapter 17): naive, absorbed and cached decoding agree with the formulas.

The reference is an explicit per-head computation written here (concatenate [k_c,i; k_r], softmax,
weighted sum, W_o).  Memory claims are measured against the wrong way of doing the same thing
(reconstructing every cached token's keys and values), so the thresholds sit in the gap between the two.
"""

from __future__ import annotations

import inspect
from fractions import Fraction

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from attnlib import numpy as anp
from attnlib.numpy import mla as nmla
from attnlib.torch import mla as tmla
from conftest import peak_bytes, to_numpy, to_torch, tol

H, D_HEAD, D_ROPE, D_LATENT, D_LATENT_Q, D_MODEL = 3, 4, 2, 5, 6, 12
PUBLIC = ("multi_head_latent_attention", "LatentKVCache", "latent_attention_step")


def shapes(h=H, d_head=D_HEAD, d_rope=D_ROPE, d_latent=D_LATENT, d_latent_q=D_LATENT_Q, d_model=D_MODEL) -> dict:
    return {"w_dq": (d_model, d_latent_q), "w_uq": (d_latent_q, h * d_head), "w_qr": (d_latent_q, h * d_rope),
            "w_dkv": (d_model, d_latent), "w_uk": (d_latent, h * d_head), "w_uv": (d_latent, h * d_head),
            "w_kr": (d_model, d_rope), "w_o": (h * d_head, d_model)}


def make_weights(seed=0, dtype=np.float64, **widths) -> dict:
    rng = np.random.default_rng(seed)
    return {name: (rng.normal(size=s) / np.sqrt(s[0])).astype(dtype) for name, s in shapes(**widths).items()}


class MLA:
    """One backend's MLA functions on numpy inputs, returning numpy results."""

    def __init__(self, backend):
        self.backend = backend
        self.mod = nmla if backend.name == "numpy" else tmla

    def w(self, weights: dict) -> dict:
        return {name: self.backend.arr(a) for name, a in weights.items()}

    def forward(self, x, weights, h=H, **kw):
        return self.backend.np(self.mod.multi_head_latent_attention(self.backend.arr(x), self.w(weights), h, **kw))

    def step(self, x, weights, cache, layer, h=H):
        return self.backend.np(self.mod.latent_attention_step(self.backend.arr(x), self.w(weights), h, cache, layer))

    def cache(self, *args, **kw):
        return self.mod.LatentKVCache(*args, **kw)


def explicit_mla(x, w, h=H, *, causal=True, positions=None):
    """MLA head by head, straight from the formulas (float64 NumPy, RoPE from chapter 15)."""
    d_head, d_rope = w["w_uq"].shape[1] // h, w["w_kr"].shape[1]
    n = x.shape[-2]
    c_q, c_kv = x @ w["w_dq"], x @ w["w_dkv"]
    k_r = anp.apply_rope(x @ w["w_kr"], positions)  # (..., n, d_rope), shared by every head
    heads = []
    for i in range(h):
        cols, rope_cols = slice(i * d_head, (i + 1) * d_head), slice(i * d_rope, (i + 1) * d_rope)
        q = np.concatenate([c_q @ w["w_uq"][:, cols], anp.apply_rope(c_q @ w["w_qr"][:, rope_cols], positions)], -1)
        k = np.concatenate([c_kv @ w["w_uk"][:, cols], k_r], -1)  # [k_c,i; k_r]
        v = c_kv @ w["w_uv"][:, cols]
        s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head + d_rope)
        if causal:
            s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        heads.append(p / p.sum(-1, keepdims=True) @ v)
    return np.concatenate(heads, -1) @ w["w_o"]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("absorb", [False, True])
def test_naive_and_absorbed_equal_the_explicit_computation(backend, absorb, causal):
    w = make_weights(1)
    x = np.random.default_rng(2).normal(size=(2, 7, D_MODEL))
    got = MLA(backend).forward(x, w, causal=causal, absorb=absorb)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, explicit_mla(x, w, causal=causal), **tol(np.float64))


@pytest.mark.parametrize("absorb", [False, True])
def test_given_positions_rotate_queries_and_keys_as_apply_rope(backend, absorb):
    """Positions (n,) or one row per batch entry (B, n) reach both the per-head queries and the shared key."""
    w = make_weights(3)
    x = np.random.default_rng(4).normal(size=(2, 6, D_MODEL))
    pos = np.array([[3, 4, 5, 6, 7, 8], [0, 2, 4, 6, 8, 10]])
    got = MLA(backend).forward(x, w, absorb=absorb, positions=pos)
    np.testing.assert_allclose(got, explicit_mla(x, w, positions=pos), **tol(np.float64))
    got = MLA(backend).forward(x, w, absorb=absorb, positions=pos[0])
    np.testing.assert_allclose(got, explicit_mla(x, w, positions=pos[0]), **tol(np.float64))


def test_torch_equals_numpy(device):
    w = make_weights(5)
    x = np.random.default_rng(6).normal(size=(3, 5, D_MODEL))
    tw = {n: to_torch(a, device) for n, a in w.items()}
    for absorb in (False, True):
        got = tmla.multi_head_latent_attention(to_torch(x, device), tw, H, absorb=absorb)
        assert got.device.type == device and got.dtype == torch.float64
        np.testing.assert_allclose(to_numpy(got), nmla.multi_head_latent_attention(x, w, H, absorb=absorb),
                                   **tol(np.float64))


@pytest.mark.parametrize("absorb", [False, True])
def test_float32_is_honoured(backend, absorb):
    w = make_weights(7, np.float32)
    x = np.random.default_rng(8).normal(size=(2, 6, D_MODEL)).astype(np.float32)
    m = MLA(backend)
    got = m.forward(x, w, absorb=absorb)
    assert got.dtype == np.float32
    want = explicit_mla(x.astype(np.float64), {n: a.astype(np.float64) for n, a in w.items()})
    np.testing.assert_allclose(got, want, **tol(np.float32))
    cache = m.cache(1, D_LATENT, D_ROPE)
    step = m.step(x[:, :4], w, cache, 0)
    assert step.dtype == np.float32 and cache.read(0)[0].dtype == (np.float32 if backend.name == "numpy"
                                                                   else torch.float32)
    np.testing.assert_allclose(step, want[:, :4], **tol(np.float32))
    assert cache.nbytes == 2 * 4 * (D_LATENT + D_ROPE) * 4


@pytest.mark.parametrize("steps", [[1] * 9, [4, 1, 1, 3], [2, 3, 4]], ids=["tokens", "prompt-then-tokens", "chunks"])
def test_decoding_equals_the_rows_of_full_causal_mla(backend, steps):
    """Two layers (their own weights and inputs), a tiny capacity that must grow, one step after another."""
    m = MLA(backend)
    n = sum(steps)
    weights = [make_weights(10 + layer) for layer in range(2)]
    xs = np.random.default_rng(12).normal(size=(2, 2, n, D_MODEL))  # (layers, batch, n, d_model)
    cache = m.cache(2, D_LATENT, D_ROPE, capacity=2)
    start = 0
    for t in steps:
        rows = slice(start, start + t)
        for layer in range(2):
            got = m.step(xs[layer][:, rows], weights[layer], cache, layer)
            full = explicit_mla(xs[layer][:, : rows.stop], weights[layer])
            np.testing.assert_allclose(got, full[:, rows], **tol(np.float64))
        start += t
    assert cache.length == n
    c_kv, k_r = cache.read(1)
    np.testing.assert_allclose(backend.np(c_kv), xs[1] @ weights[1]["w_dkv"], **tol(np.float64))
    np.testing.assert_allclose(backend.np(k_r), anp.apply_rope(xs[1] @ weights[1]["w_kr"]), **tol(np.float64))


# --------------------------------------------------------------------------- what the decode step never forms

N_CACHED, WIDE = 1024, {"h": 8, "d_head": 32, "d_rope": 8, "d_latent": 16, "d_latent_q": 16, "d_model": 32}


def filled_cache(mod, conv):
    """A one-layer cache of N_CACHED tokens' latents with room to spare (no growth while measuring), and a new token."""
    rng = np.random.default_rng(21)
    cache = mod.LatentKVCache(1, WIDE["d_latent"], WIDE["d_rope"], capacity=2 * N_CACHED)
    cache.append(0, conv(rng.normal(size=(N_CACHED, WIDE["d_latent"]))),
                 conv(rng.normal(size=(N_CACHED, WIDE["d_rope"]))))
    w = {n: conv(a) for n, a in make_weights(20, **WIDE).items()}
    return w, conv(rng.normal(size=(1, WIDE["d_model"]))), cache


def per_head_keys() -> int:
    """Elements of one head-by-head key tensor for the cached tokens: what absorption avoids."""
    return N_CACHED * WIDE["h"] * WIDE["d_head"]


def test_numpy_decode_step_never_forms_per_head_keys_or_values():
    """Peak memory of a step: the absorbed step stays far below one per-head key tensor; reconstructing exceeds it."""
    steps = {}
    for absorb in (True, False):
        w, x1, cache = filled_cache(nmla, lambda a: a)
        steps[absorb] = peak_bytes(lambda: nmla._step(x1, w, WIDE["h"], cache, 0, absorb=absorb))  # noqa: B023
    keys_bytes = per_head_keys() * 8
    assert steps[False] >= keys_bytes  # the naive step holds at least the reconstructed keys
    assert steps[True] < keys_bytes / 4, steps


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an aten operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        sizes = [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.largest = max([self.largest, *sizes])
        return out


def test_torch_decode_step_never_forms_per_head_keys_or_values(device):
    largest = {}
    for absorb in (True, False):
        w, x1, cache = filled_cache(tmla, lambda a: to_torch(a, device))
        with LargestTensor() as spy:
            tmla._step(x1, w, WIDE["h"], cache, 0, absorb=absorb)
        largest[absorb] = spy.largest
    assert largest[False] >= per_head_keys()
    assert largest[True] < per_head_keys() / 4, largest


# --------------------------------------------------------------------------- why the decoupled key exists


def test_rope_on_the_reconstructed_keys_cannot_be_absorbed():
    """Without RoPE, scoring the latents with q W_uk^T equals scoring the reconstructed keys; with RoPE on
    those keys it does not (the rotation at the key's position sits between W_uk and c_kv), while MLA's
    decoupled key keeps naive and absorbed equal."""
    rng = np.random.default_rng(30)
    n, d_latent, d_head = 8, 6, 4
    c_kv = rng.normal(size=(n, d_latent))
    w_uk = rng.normal(size=(d_latent, d_head))
    q = rng.normal(size=(n, d_head))
    plain = q @ (c_kv @ w_uk).T
    absorbed = (q @ w_uk.T) @ c_kv.T
    np.testing.assert_allclose(absorbed, plain, **tol(np.float64))
    rotated = anp.apply_rope(q) @ anp.apply_rope(c_kv @ w_uk).T  # RoPE on the reconstructed keys
    absorbed_rotated = (anp.apply_rope(q) @ w_uk.T) @ c_kv.T  # the most absorption can do: rotate the query
    gap = np.abs(rotated - absorbed_rotated).max() / np.abs(rotated).max()
    assert gap > 0.1, gap
    assert np.abs(rotated[:, 0] - absorbed_rotated[:, 0]).max() < 1e-12  # key 0 is not rotated: equal there only
    w = make_weights(31)
    x = rng.normal(size=(n, D_MODEL))
    np.testing.assert_allclose(nmla.multi_head_latent_attention(x, w, H, absorb=True),
                               nmla.multi_head_latent_attention(x, w, H), **tol(np.float64))


# --------------------------------------------------------------------------- the cache


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_latent_cache_bytes_are_the_fraction_of_a_kv_cache(backend, dtype):
    layers, batch, tokens, h, d_head, d_latent, d_rope = 3, 2, 10, 4, 8, 6, 4
    latent = MLA(backend).cache(layers, d_latent, d_rope)
    kv = backend.lib.KVCache(layers, h, d_head)
    assert latent.nbytes == 0 and latent.length == 0
    for layer in range(layers):
        latent.append(layer, backend.arr(np.ones((batch, tokens, d_latent), dtype)),
                      backend.arr(np.ones((batch, tokens, d_rope), dtype)))
        keys = backend.arr(np.ones((batch, h, tokens, d_head), dtype))
        kv.append(layer, keys, keys)
    assert latent.nbytes == layers * tokens * (d_latent + d_rope) * np.dtype(dtype).itemsize * batch
    assert Fraction(latent.nbytes, kv.nbytes) == Fraction(d_latent + d_rope, 2 * h * d_head)
    assert latent.length == tokens


def test_length_counts_tokens_every_layer_has(backend):
    cache = MLA(backend).cache(2, 3, 2)
    c, r = backend.arr(np.ones((4, 3))), backend.arr(np.ones((4, 2)))
    cache.append(0, c, r)
    assert cache.length == 0
    cache.append(1, c, r)
    assert cache.length == 4


def test_appending_one_token_at_a_time_copies_linearly_not_quadratically():
    cache = nmla.LatentKVCache(1, 1, 2, capacity=1)
    grows = []
    real = cache._grow
    cache._grow = lambda *a: grows.append(a[-1]) or real(*a)
    for _ in range(1000):
        cache.append(0, np.ones((1, 1)), np.ones((1, 2)))
    assert len(grows) <= 11  # capacity doubles: 1, 2, 4, ... 1024


def test_torch_cache_follows_the_inputs_device_and_dtype(device):
    cache = tmla.LatentKVCache(1, 3, 2)
    c_kv, k_r = cache.append(0, torch.ones(2, 4, 3, device=device), torch.ones(2, 4, 2, device=device))
    assert c_kv.device.type == device and k_r.dtype == torch.float32
    assert cache.nbytes == 2 * 4 * 5 * 4


@pytest.mark.parametrize("absorb", [False, True])
def test_gradients_flow_through_torch_mla(absorb):
    """gradcheck in float64 on x and on the two matrices absorption moves (W_uk into the query, W_uv after the sum)."""
    w = {n: to_torch(a) for n, a in make_weights(40, h=2, d_head=2, d_latent=3, d_latent_q=3, d_model=4).items()}
    x = to_torch(np.random.default_rng(41).normal(size=(3, 4))).requires_grad_()
    w_uk, w_uv = w["w_uk"].requires_grad_(), w["w_uv"].requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w_uk, w_uv: tmla.multi_head_latent_attention(
        x, {**w, "w_uk": w_uk, "w_uv": w_uv}, 2, absorb=absorb), (x, w_uk, w_uv))


def test_same_names_and_signatures_in_both_backends():
    for name in PUBLIC:
        a, b = getattr(nmla, name), getattr(tmla, name)
        assert inspect.signature(a) == inspect.signature(b), name
    for method in ("append", "read"):
        assert inspect.signature(getattr(nmla.LatentKVCache, method)) == \
            inspect.signature(getattr(tmla.LatentKVCache, method))


# --------------------------------------------------------------------------- errors


def replaced(name, shape):
    def change(w):
        w = dict(w)
        w[name] = np.ones(shape)
        return w
    return change


def without(name):
    return lambda w: {n: a for n, a in w.items() if n != name}


@pytest.mark.parametrize(("change", "h", "error", "match"), [
    (without("w_kr"), H, ValueError, "缺少 \\['w_kr'\\]"),
    (lambda w: {**w, "w_q": w["w_dq"]}, H, ValueError, "多出 \\['w_q'\\]"),
    (lambda w: list(w.values()), H, TypeError, "字典"),
    (lambda w: w, 5, ValueError, "不能被 n_heads=5 整除"),
    (lambda w: w, 0, ValueError, "n_heads"),
    (replaced("w_qr", (D_LATENT_Q, D_ROPE)), H, ValueError, "n_heads·d_rope"),  # one rotated query for all heads
    (lambda w: {**w, "w_kr": np.ones((D_MODEL, 3)), "w_qr": np.ones((D_LATENT_Q, 3 * H))}, H, ValueError, "偶数"),
    (replaced("w_uk", (H * D_HEAD, D_LATENT)), H, ValueError, "w_uk 的形状应为 \\(d_latent, n_heads·d_head\\)"),
    (replaced("w_o", (H * D_HEAD, D_MODEL + 1)), H, ValueError, "w_o 的形状"),
    (replaced("w_dkv", (D_MODEL - 1, D_LATENT)), H, ValueError, "w_dkv 的形状"),
    (replaced("w_uv", (D_LATENT, H * D_HEAD, 1)), H, ValueError, "二维"),
    (lambda w: {**w, "w_o": w["w_o"].astype(np.float32)}, H, TypeError, "dtype"),
])
def test_bad_weights_are_refused_in_chinese(backend, change, h, error, match):
    m = MLA(backend)
    w = change(make_weights(50))
    x = np.ones((2, 3, D_MODEL))
    weights = m.w(w) if isinstance(w, dict) else w
    with pytest.raises(error, match=match):
        m.mod.multi_head_latent_attention(backend.arr(x), weights, h)


@pytest.mark.parametrize(("x", "positions", "error", "match"), [
    (np.ones((2, 3, D_MODEL)), np.arange(4), ValueError, "positions"),
    (np.ones((2, 3, D_MODEL)), np.ones((3, 3)), ValueError, "positions"),
    (np.ones((2, 3, D_MODEL)), np.array([True, False, True]), TypeError, "positions"),
    (np.ones((2, 3, D_MODEL), dtype=np.int64), None, TypeError, "浮点"),
    (np.ones(D_MODEL), None, ValueError, "至少需要 2 维"),
    (np.ones((3, D_MODEL + 1)), None, ValueError, "w_dq 的形状"),
])
def test_bad_inputs_are_refused_in_chinese(backend, x, positions, error, match):
    m = MLA(backend)
    pos = positions if positions is None or backend.name == "numpy" else torch.as_tensor(positions)
    with pytest.raises(error, match=match):
        m.mod.multi_head_latent_attention(backend.arr(x), m.w(make_weights(51)), H, positions=pos)


def test_bad_steps_are_refused_and_leave_the_cache_as_it_was(backend):
    m = MLA(backend)
    w = make_weights(52)
    cache = m.cache(2, D_LATENT, D_ROPE)
    m.step(np.ones((2, 3, D_MODEL)), w, cache, 0)
    refused = [
        (lambda: m.step(np.ones((2, 1, D_MODEL)), w, cache, 2), ValueError, "layer"),
        (lambda: m.step(np.ones((3, 1, D_MODEL)), w, cache, 0), ValueError, "批量"),
        (lambda: m.step(np.ones((2, 1, D_MODEL)), w, m.cache(1, D_LATENT + 1, D_ROPE), 0), ValueError, "缓存的宽度"),
        (lambda: m.step(np.ones((2, 1, D_MODEL)), w, backend.lib.KVCache(1, H, D_HEAD), 0), TypeError,
         "LatentKVCache"),
        (lambda: m.step(np.ones((2, 1, D_MODEL), np.float32), {n: a.astype(np.float32) for n, a in w.items()},
                        cache, 0), TypeError, "dtype"),
        (lambda: cache.append(0, backend.arr(np.ones((2, 1, D_LATENT + 1))), backend.arr(np.ones((2, 1, D_ROPE)))),
         ValueError, "形状"),
        (lambda: cache.append(0, backend.arr(np.ones((2, 2, D_LATENT))), backend.arr(np.ones((2, 1, D_ROPE)))),
         ValueError, "前几维"),
        (lambda: cache.read(1), ValueError, "还没有缓存"),
    ]
    for call, error, match in refused:
        with pytest.raises(error, match=match):
            call()
        assert cache._lengths == [3, 0]
