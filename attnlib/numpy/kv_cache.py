"""The key-value cache of autoregressive decoding (chapter 11).

When a decoder generates token t, causal attention lets the new query look at
the keys and values of positions 0..t, and those of positions 0..t-1 are the
same as at the previous step (a causal layer's output at a position never
depends on later positions).  So they are kept, per layer, and only the new
position's key and value are computed and appended: the attention work of step
t drops from a t x t score matrix (recomputing the prefix) to one row of t
scores.  The price is memory that grows with every token::

    bytes = layers x 2 (K and V) x tokens x heads x d_head x bytes per number  (x batch)

``KVCache`` stores them; :func:`cached_attention` appends a step's keys and
values to a layer and attends the step's queries to everything cached.  With
grouped-query attention (chapter 16) the ``n_heads`` query heads share
``n_kv_heads`` key/value heads, and only those are stored: "heads" in the
formula above is then ``n_kv_heads``.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays
from .attention import scaled_dot_product_attention
from .flash import tiled_attention
from .gqa import grouped_attention, grouped_query_attention


class KVCache:
    """Keys and values of every layer of a decoder, growing by the tokens appended.

    Parameters
    ----------
    n_layers, n_heads, d_head : int >= 1
        The decoder's shape: layers, query heads, width of a head.
    n_kv_heads : int >= 1, optional
        Key/value heads stored (grouped-query attention, chapter 16); it divides ``n_heads``.
        ``None``: ``n_heads`` (multi-head attention).  Keys and values of one layer are
        (..., n_kv_heads, tokens, d_head).
    capacity : int >= 1
        Tokens stored before the buffers grow (they double when full, so appending
        t tokens one by one copies O(t) numbers in total, not O(t^2)).

    Attributes
    ----------
    length : int
        Tokens cached (in every layer, once each layer has received the step).
    nbytes : int
        Bytes of the cached keys and values:
        ``layers x 2 x length x n_kv_heads x d_head x itemsize (x batch)``.
    """

    def __init__(self, n_layers, n_heads, d_head, *, n_kv_heads=None, capacity=64):
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.n_kv_heads = _checks.check_kv_heads(self.n_heads, n_kv_heads)
        self.d_head = _checks.check_count("d_head", d_head)
        self._capacity = _checks.check_count("capacity", capacity)
        self._keys = [None] * self.n_layers  # per layer: (..., heads, capacity, d_head)
        self._values = [None] * self.n_layers
        self._lengths = [0] * self.n_layers

    @property
    def length(self) -> int:
        return min(self._lengths)

    @property
    def nbytes(self) -> int:
        return sum(self._stored_bytes(layer) for layer in range(self.n_layers))

    def append(self, layer, k, v):
        """Add keys ``k`` and values ``v`` of new positions, (..., n_kv_heads, t_new, d_head), to ``layer``.

        Returns
        -------
        keys, values : ndarray, shape (..., n_kv_heads, length, d_head)
            Everything this layer has cached, the new positions last (views, no copy).
        """
        layer = self._check_layer(layer)
        k, v = as_float_arrays(k=k, v=v)
        self._check_step(k.shape, v.shape, layer)
        self._check_dtype(k.dtype, layer)
        start, stop = self._lengths[layer], self._lengths[layer] + k.shape[-2]
        if self._keys[layer] is None or stop > self._keys[layer].shape[-2]:
            self._grow(layer, k, stop)
        self._keys[layer][..., start:stop, :] = k
        self._values[layer][..., start:stop, :] = v
        self._lengths[layer] = stop
        return self.read(layer)

    def read(self, layer):
        """The cached keys and values of ``layer``: (..., n_kv_heads, length, d_head) each (views)."""
        layer = self._check_layer(layer)
        if self._keys[layer] is None:
            raise ValueError(f"第 {layer} 层还没有缓存任何键和值 (layer {layer} is empty)。")
        n = self._lengths[layer]
        return self._keys[layer][..., :n, :], self._values[layer][..., :n, :]

    def truncate(self, length):
        """Forget every cached position from ``length`` on, in every layer (the rollback of chapter 24).

        Speculative decoding appends the draft's tokens, then keeps only those the target
        accepted: ``truncate(n)`` leaves positions ``0 .. n - 1``; the next ``append`` writes
        at position ``n``.  Nothing is copied (the buffers keep their room).

        Parameters
        ----------
        length : int, 0 <= length <= every layer's cached length
        """
        longest = min(self._lengths)
        if not isinstance(length, int) or isinstance(length, bool) or not 0 <= length <= longest:
            raise ValueError(f"truncate 的长度必须是 0 到 {longest} 之间的整数（每层都已缓存的位置数）"
                             f"(length out of range)，收到 {length!r}。")
        self._lengths = [length] * self.n_layers

    def _grow(self, layer, like, needed: int) -> None:
        """Reallocate ``layer``'s buffers with at least ``needed`` tokens of room, keeping what is cached."""
        old_k, old_v, n = self._keys[layer], self._values[layer], self._lengths[layer]
        capacity = max(self._capacity, needed, 2 * (old_k.shape[-2] if old_k is not None else 0))
        shape = like.shape[:-2] + (capacity, self.d_head)
        self._keys[layer] = np.zeros(shape, dtype=like.dtype)
        self._values[layer] = np.zeros(shape, dtype=like.dtype)
        if old_k is not None:
            self._keys[layer][..., :n, :] = old_k[..., :n, :]
            self._values[layer][..., :n, :] = old_v[..., :n, :]

    def _stored_bytes(self, layer: int) -> int:
        keys = self._keys[layer]
        if keys is None:
            return 0
        per_token = int(np.prod(keys.shape[:-2], dtype=np.int64)) * self.d_head * keys.itemsize
        return 2 * self._lengths[layer] * per_token

    def _check_layer(self, layer) -> int:
        return _checks.check_layer(layer, self.n_layers)

    def _check_step(self, k_shape: tuple, v_shape: tuple, layer: int) -> None:
        want = f"(..., {self.n_kv_heads}, t, {self.d_head})"
        for name, shape in (("k", k_shape), ("v", v_shape)):
            if len(shape) < 3 or shape[-3] != self.n_kv_heads or shape[-1] != self.d_head:
                raise ValueError(f"{name} 的形状应为 {want}，收到 {name}.shape={shape} (cache shape mismatch)。")
        if k_shape != v_shape:
            raise ValueError(f"k 与 v 的形状必须相同：k.shape={k_shape}，v.shape={v_shape} (shape mismatch)。")
        cached = self._keys[layer]
        if cached is not None and cached.shape[:-2] != k_shape[:-2]:
            raise ValueError(f"新的键的批量形状 {k_shape[:-2]} 与缓存中的 {cached.shape[:-2]} 不同 (batch mismatch)。")

    def _check_dtype(self, dtype, layer: int) -> None:
        """New keys must have the dtype of the layer's buffers (no silent conversion)."""
        cached = self._keys[layer]
        if cached is not None and dtype != cached.dtype:
            raise TypeError(f"新的键是 {dtype}，缓存中的是 {cached.dtype}：请先统一 (dtype mismatch with the cache)。")


def cached_attention(q, k, v, cache, layer):
    """One decoding step of one layer: append ``k``, ``v`` to the cache, attend ``q`` to everything cached.

    Parameters
    ----------
    q : array_like of float, shape (..., n_heads, t_new, d_head)
    k, v : array_like of float, shape (..., n_kv_heads, t_new, d_head)
        The new positions' queries, keys and values (``t_new = 1`` per generated
        token; the whole prompt at once for the first step).  With fewer key/value
        heads than query heads the step is grouped-query attention (chapter 16).
    cache : KVCache
    layer : int

    Returns
    -------
    ndarray, shape (..., n_heads, t_new, d_head)
        Causal attention of the new queries over all cached positions (bottom-right
        aligned: new query i sees the cache and new positions up to i), equal to
        full causal attention over the whole sequence at these positions.

    ``q`` is checked before anything is appended, so a refused call leaves the
    cache as it was.  A single new query (one decoding step) sees every cached
    key: the causal mask only matters when several positions arrive at once.
    The keys and values of a ``KVCache``, checked when they were appended, are
    not scanned again (any other object with an ``append`` is checked as usual);
    with grouped heads the step reads each cached key/value head once, for the
    whole group of its query heads (:func:`attnlib.numpy.gqa.grouped_attention`).
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    causal = q.shape[-2] > 1 if q.ndim >= 2 else False
    if q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:  # h query heads, h_kv key/value heads
        _checks.check_groups(q.shape, k.shape, v.shape)
        _checks.check_step_query(q.shape[:-3] + q.shape[-2:], k.shape[:-3] + k.shape[-2:])
        keys, values = cache.append(layer, k, v)  # (..., h_kv, length, d_head)
        if not isinstance(cache, KVCache):  # another object with an append(): check what it hands back
            return grouped_query_attention(q, keys, values, causal=causal, need_weights=False)[0]
        batch, _ = _checks.check_groups(q.shape, keys.shape, values.shape)
        return grouped_attention(q, keys, values, None, causal, False, batch)[0]  # each group's rows in one product
    _checks.check_step_query(q.shape, k.shape)
    keys, values = cache.append(layer, k, v)  # (..., h, length, d_head)
    if not isinstance(cache, KVCache):
        return scaled_dot_product_attention(q, keys, values, causal=causal, need_weights=False)[0]
    return tiled_attention(q, keys, values, causal=causal)  # checked when appended: not scanned again
