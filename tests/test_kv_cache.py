"""KVCache and cached_attention (chapter 11): cached decoding equals full causal attention; memory is the formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import to_torch, tol


@pytest.mark.parametrize("prompt", [1, 5])
def test_decoding_step_by_step_equals_full_causal_attention(backend, prompt):
    """A 2-layer stack: the prompt at once, then one token per step; every step's outputs equal full attention's."""
    rng = np.random.default_rng(prompt)
    layers, heads, d, n = 2, 3, 4, 12
    q, k, v = rng.normal(size=(3, layers, 2, heads, n, d))  # (layers, batch, heads, n, d_head) each
    cache = backend.lib.KVCache(layers, heads, d, capacity=2)  # tiny capacity: the buffers must grow
    steps = [slice(0, prompt)] + [slice(t, t + 1) for t in range(prompt, n)]
    for s in steps:
        for layer in range(layers):
            got = backend.call("cached_attention", q[layer][..., s, :], k[layer][..., s, :], v[layer][..., s, :],
                               cache, layer)
            full, _ = anp.scaled_dot_product_attention(q[layer][..., : s.stop, :], k[layer][..., : s.stop, :],
                                                       v[layer][..., : s.stop, :], causal=True)
            np.testing.assert_allclose(got, full[..., s, :], **tol(np.float64))
    assert cache.length == n


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nbytes_is_the_formula(backend, dtype):
    layers, heads, d, batch, tokens = 3, 4, 8, 2, 10
    cache = backend.lib.KVCache(layers, heads, d)
    assert cache.nbytes == 0 and cache.length == 0
    x = np.ones((batch, heads, tokens, d), dtype=dtype)
    for layer in range(layers):
        cache.append(layer, backend.arr(x), backend.arr(x))
    itemsize = np.dtype(dtype).itemsize
    assert cache.nbytes == layers * 2 * tokens * heads * d * itemsize * batch
    keys, values = cache.read(1)
    assert tuple(keys.shape) == (batch, heads, tokens, d) and tuple(values.shape) == (batch, heads, tokens, d)


def test_length_counts_tokens_every_layer_has(backend):
    cache = backend.lib.KVCache(2, 1, 2)
    x = backend.arr(np.ones((1, 3, 2)))
    cache.append(0, x, x)
    assert cache.length == 0  # layer 1 has nothing yet
    cache.append(1, x, x)
    assert cache.length == 3


def test_appending_one_token_at_a_time_copies_linearly_not_quadratically():
    cache = anp.KVCache(1, 1, 1, capacity=1)
    grows = []
    real = cache._grow
    cache._grow = lambda *a: grows.append(a[-1]) or real(*a)
    for _ in range(1000):
        cache.append(0, np.ones((1, 1, 1)), np.ones((1, 1, 1)))
    assert len(grows) <= 11  # capacity doubles: 1, 2, 4, ... 1024


@pytest.mark.parametrize(("call", "match"), [
    (lambda lib, c: c.append(2, np.ones((1, 1, 2)), np.ones((1, 1, 2))), "layer"),
    (lambda lib, c: c.append(0, np.ones((2, 1, 2)), np.ones((2, 1, 2))), "形状"),
    (lambda lib, c: c.append(0, np.ones((1, 1, 2)), np.ones((1, 2, 2))), "形状"),
    (lambda lib, c: c.read(1), "还没有缓存"),
])
def test_bad_use_is_refused_in_chinese(backend, call, match):
    cache = backend.lib.KVCache(2, 1, 2)
    wrap = (lambda a: a) if backend.name == "numpy" else to_torch
    with pytest.raises(ValueError, match=match):
        call(backend.lib, _Wrapped(cache, wrap))


class _Wrapped:
    """The cache with numpy arguments converted for the torch backend."""

    def __init__(self, cache, wrap):
        self.cache, self.wrap = cache, wrap

    def append(self, layer, k, v):
        return self.cache.append(layer, self.wrap(k), self.wrap(v))

    def read(self, layer):
        return self.cache.read(layer)


def test_torch_cache_follows_the_inputs_device_and_dtype(device):
    cache = att.KVCache(1, 2, 3)
    x = torch.ones(2, 4, 3, dtype=torch.float32, device=device)
    keys, _ = cache.append(0, x, x)
    assert keys.device.type == device and keys.dtype == torch.float32
    assert cache.nbytes == 2 * 4 * 2 * 3 * 4


@pytest.mark.parametrize("t_q", [1, 3])
def test_a_refused_step_leaves_the_cache_as_it_was(backend, t_q):
    """q is checked before k and v are appended: a bad query must not grow the cache."""
    cache = backend.lib.KVCache(1, 2, 4)
    x = np.ones((2, 3, 4))
    backend.call("cached_attention", x, x, x, cache, 0)
    assert cache.length == 3
    bad_q = np.ones((2, t_q, 5))  # d_head 5 against keys of width 4 (and, for t_q = 1, one query for 3 keys)
    with pytest.raises(ValueError, match="q"):
        backend.call("cached_attention", bad_q, np.ones((2, 3, 4)), np.ones((2, 3, 4)), cache, 0)
    assert cache.length == 3


def test_one_query_per_new_key(backend):
    cache = backend.lib.KVCache(1, 1, 2)
    with pytest.raises(ValueError, match="每个新位置一个查询"):
        backend.call("cached_attention", np.ones((1, 2, 2)), np.ones((1, 1, 2)), np.ones((1, 1, 2)), cache, 0)
    assert cache.length == 0


def test_new_keys_of_another_dtype_are_refused(backend):
    """No silent conversion: float64 keys into a float32 cache are a TypeError."""
    cache = backend.lib.KVCache(1, 1, 2)
    cache.append(0, backend.arr(np.ones((1, 2, 2), dtype=np.float32)), backend.arr(np.ones((1, 2, 2), np.float32)))
    with pytest.raises(TypeError, match="dtype"):
        cache.append(0, backend.arr(np.ones((1, 1, 2))), backend.arr(np.ones((1, 1, 2))))
    assert cache.length == 2


def test_torch_cached_attention_takes_any_cache_with_append():
    """Duck typing: an object whose append returns every key and value works too (the NumPy twin's contract)."""

    class ListCache:
        def __init__(self):
            self.k = self.v = None

        def append(self, layer, k, v):
            self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
            self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
            return self.k, self.v

    rng = np.random.default_rng(5)
    q, k, v = (torch.as_tensor(a) for a in rng.normal(size=(3, 2, 6, 4)))
    own, ours = ListCache(), att.KVCache(1, 2, 4)
    for s in (slice(0, 3), slice(3, 4), slice(4, 6)):
        got = att.cached_attention(q[:, s], k[:, s], v[:, s], own, 0)
        torch.testing.assert_close(got, att.cached_attention(q[:, s], k[:, s], v[:, s], ours, 0))


def test_truncate_rolls_back_and_the_next_append_overwrites(backend):
    rng = np.random.default_rng(3)
    cache = backend.lib.KVCache(2, 2, 3, n_kv_heads=1, capacity=2)
    first, second = (backend.arr(rng.normal(size=(1, 4, 3))) for _ in range(2))
    for layer in range(2):
        cache.append(layer, first, first)
    cache.truncate(1)
    assert cache.length == 1
    assert cache.nbytes == 2 * 2 * 1 * 1 * 3 * backend.np(first).itemsize  # layers x (k, v) x tokens x heads x d
    for layer in range(2):
        keys, values = cache.append(layer, second, 2 * second)
        kept_then_new = np.concatenate([backend.np(first)[:, :1], backend.np(second)], axis=1)
        np.testing.assert_array_equal(backend.np(keys), kept_then_new)
        np.testing.assert_array_equal(backend.np(values)[:, 1:], 2 * backend.np(second))
    assert cache.length == 5
    for bad in (6, -1, 1.0, True):
        with pytest.raises(ValueError, match="truncate"):
            cache.truncate(bad)
    assert cache.length == 5
