"""The key-value cache of autoregressive decoding (chapter 11), torch backend: any device, dtype of the inputs."""

from __future__ import annotations

import math

from .. import _checks
from ._tensors import as_float_tensors
from .attention import fused_attention, scaled_dot_product_attention
from .gqa import grouped_attention, grouped_query_attention


class KVCache:
    """Keys and values of every layer of a decoder; same contract as ``attnlib.numpy.KVCache``.

    ``append(layer, k, v)`` takes (..., n_kv_heads, t_new, d_head) tensors and returns every cached
    key and value of the layer (views); ``read(layer)`` returns them; ``length`` counts cached
    tokens; ``nbytes`` is ``layers x 2 x length x n_kv_heads x d_head x element size (x batch)``.
    Buffers live on the device of the first keys appended and double when full.

    Parameters
    ----------
    n_layers, n_heads, d_head : int >= 1
        The decoder's shape: layers, query heads, width of a head.
    n_kv_heads : int >= 1, optional
        Key/value heads stored (grouped-query attention, chapter 16); it divides ``n_heads``.
        ``None``: ``n_heads``.  Keys and values of one layer are (..., n_kv_heads, tokens, d_head).
    capacity : int >= 1
        Tokens stored before the buffers grow (they double when full).

    Attributes
    ----------
    length : int
        Tokens cached (in every layer, once each layer has received the step).
    nbytes : int
        Bytes of the cached keys and values:
        ``layers x 2 x length x n_kv_heads x d_head x element size (x batch)``;
        the reserved buffers hold up to about twice that once they have grown past ``capacity``.
    """

    def __init__(self, n_layers, n_heads, d_head, *, n_kv_heads=None, capacity=64):
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.n_kv_heads = _checks.check_kv_heads(self.n_heads, n_kv_heads)
        self.d_head = _checks.check_count("d_head", d_head)
        self._capacity = _checks.check_count("capacity", capacity)
        self._keys = [None] * self.n_layers
        self._values = [None] * self.n_layers
        self._lengths = [0] * self.n_layers

    @property
    def length(self) -> int:
        return min(self._lengths)

    @property
    def nbytes(self) -> int:
        total = 0
        for keys, n in zip(self._keys, self._lengths, strict=True):
            if keys is not None:
                total += 2 * n * math.prod(keys.shape[:-2]) * self.d_head * keys.element_size()
        return total

    def append(self, layer, k, v):
        """Add (..., n_kv_heads, t_new, d_head) keys and values to ``layer``; return all of its cache (views)."""
        layer = self._check_layer(layer)
        k, v = as_float_tensors(k=k, v=v)
        return self._store(layer, k, v)

    def _store(self, layer: int, k, v):
        """``append`` after the conversion: ``k``, ``v`` are float tensors of one dtype and device, finite."""
        self._check_step(tuple(k.shape), tuple(v.shape), layer)
        self._check_like(k, layer)
        start, stop = self._lengths[layer], self._lengths[layer] + k.shape[-2]
        if self._keys[layer] is None or stop > self._keys[layer].shape[-2]:
            self._grow(layer, k, stop)
        self._keys[layer][..., start:stop, :] = k.detach()
        self._values[layer][..., start:stop, :] = v.detach()
        self._lengths[layer] = stop
        return self._keys[layer][..., :stop, :], self._values[layer][..., :stop, :]

    def read(self, layer):
        """The cached keys and values of ``layer``: (..., n_kv_heads, length, d_head) each."""
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
        old_k, old_v, n = self._keys[layer], self._values[layer], self._lengths[layer]
        capacity = max(self._capacity, needed, 2 * (old_k.shape[-2] if old_k is not None else 0))
        shape = (*like.shape[:-2], capacity, self.d_head)
        self._keys[layer] = like.new_zeros(shape)
        self._values[layer] = like.new_zeros(shape)
        if old_k is not None:
            self._keys[layer][..., :n, :] = old_k[..., :n, :]
            self._values[layer][..., :n, :] = old_v[..., :n, :]

    def _check_like(self, k, layer: int) -> None:
        """New keys must have the dtype and device of the layer's buffers (no silent conversion)."""
        cached = self._keys[layer]
        if cached is not None and (k.dtype != cached.dtype or k.device != cached.device):
            raise TypeError(f"新的键是 {k.dtype}（{k.device}），缓存中的是 {cached.dtype}（{cached.device}）："
                            f"请先统一 (dtype/device mismatch with the cache)。")

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
        if cached is not None and tuple(cached.shape[:-2]) != k_shape[:-2]:
            raise ValueError(f"新的键的批量形状 {k_shape[:-2]} 与缓存中的 {tuple(cached.shape[:-2])} 不同 "
                             f"(batch mismatch)。")


def cached_attention(q, k, v, cache, layer):
    """Append ``k``, ``v`` to ``cache`` at ``layer`` and attend ``q`` (..., h, t_new, d_head) causally to all of it.

    Same contract as ``attnlib.numpy.cached_attention``; ``k`` and ``v`` may have fewer heads
    (``n_kv_heads``, grouped-query attention).  ``q`` is checked before
    anything is appended, so a refused call leaves the cache as it was.  A single
    new query (one decoding step) sees every cached key: it needs no mask, and the
    keys and values of a ``KVCache``, checked when they were appended, are not
    scanned again (any other object with an ``append`` is checked as usual).  With
    grouped heads each group's queries are folded into the rows of one product
    against its key/value head (:func:`attnlib.torch.gqa.grouped_attention`).
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    if q.dim() >= 3 and k.dim() >= 3 and q.shape[-3] != k.shape[-3]:  # h query heads, h_kv key/value heads
        _checks.check_groups(tuple(q.shape), tuple(k.shape), tuple(v.shape))
        _checks.check_step_query(tuple(q.shape[:-3] + q.shape[-2:]), tuple(k.shape[:-3] + k.shape[-2:]))
        if not isinstance(cache, KVCache):  # another object with an append(): check what it hands back
            keys, values = cache.append(layer, k, v)
            return grouped_query_attention(q, keys, values, causal=q.shape[-2] > 1, need_weights=False)[0]
        keys, values = cache._store(cache._check_layer(layer), k, v)  # (..., h_kv, length, d_head), not re-checked
        batch, _ = _checks.check_groups(tuple(q.shape), tuple(keys.shape), tuple(values.shape))
        return grouped_attention(q, keys, values, None, q.shape[-2] > 1, False, batch)[0]  # groups folded into rows
    batch = _checks.check_step_query(tuple(q.shape), tuple(k.shape))
    if not isinstance(cache, KVCache):  # another object with an append(): check what it hands back
        keys, values = cache.append(layer, k, v)
        return scaled_dot_product_attention(q, keys, values, causal=q.shape[-2] > 1, need_weights=False)[0]
    keys, values = cache._store(cache._check_layer(layer), k, v)  # checked above: append without re-checking
    return fused_attention(q, keys, values, None, q.shape[-2] > 1, batch)
