"""Attention sinks and streaming generation (chapter 22), NumPy backend.

Three pieces, each one formula or one rule:

* :func:`sink_attention`: attention with one extra logit ``b`` per head in the
  softmax denominator (the learned "sinks" of the gpt-oss models; ``b = 0`` is
  "softmax plus one")::

      w_ij = exp(s_ij) / (exp(b) + Σ_l exp(s_il)),   s = q kᵀ / √d

  The weights of a row sum to ``1 - exp(b) / (exp(b) + Σ_l exp(s_il)) < 1``;
  what is missing went to the sink, whose value is zero.  A head can thus put
  (almost) all its weight on nothing, and a fully masked row gives all of it
  to the sink: zero weights, zero output.
* :func:`streaming_mask`: the mask of StreamingLLM (Xiao et al., 2023): under
  the causal mask, each query sees the first ``n_sink`` keys and the most
  recent ``window`` keys (its own position included), bottom-right aligned
  when ``n_q < n_k``.
* :class:`SinkKVCache`: the rolling key/value cache that computes the same
  thing one token at a time: it keeps the first ``n_sink`` tokens for ever and
  the most recent ones, so that a new token's query sees at most
  ``n_sink + window`` keys; it says which tokens it holds (their original
  indices) and the positions StreamingLLM hands to RoPE (their slots in the
  cache, ``0, 1, …``).

The torch twin (``attnlib.torch.sinks``) has the same names and signatures.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .masks import hide_future_
from .softmax import safe_reciprocal


def sink_attention(q, k, v, sink_logits, *, mask=None, causal=False):
    """Scaled dot-product attention with a sink logit per head in the softmax denominator.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
        Leading batch/head dimensions broadcast; all three share one dtype.
    sink_logits : number or array_like of float, broadcasting to the leading dimensions
        The sink's logit ``b`` of each head (shape ``(h,)`` for ``q`` of shape
        ``(h, n_q, d_k)``; one number for every head).  It is not scaled by
        ``1/√d_k``.  ``0`` is "softmax plus one"; ``-inf`` is ordinary attention.
    mask : array_like of bool, optional
        Broadcasts to ``(..., n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply the bottom-right aligned causal mask.

    Returns
    -------
    output : ndarray, shape (..., n_q, d_v)
        ``weights @ v``: the sink adds nothing (its value is zero).
    weights : ndarray, shape (..., n_q, n_k)
        The weights of the real keys; ``1 - weights.sum(-1)`` is the sink's share.
        A fully masked row is all zeros (everything went to the sink).

    Computed stably: each row is shifted by the largest of its visible scores
    and its sink logit, so no exponential overflows and the denominator is at
    least 1 (whenever the sink is finite).
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    sink = _sink_logits(np.asarray(sink_logits), batch, q.dtype)  # (..., 1, 1)
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)
    if causal:
        hide_future_(scores)
    if mask is not None:
        np.copyto(scores, -np.inf, where=~np.broadcast_to(mask, scores.shape))
    # the shift m: the largest of a row's visible scores and its sink logit
    m = np.maximum(scores.max(axis=-1, keepdims=True, initial=-np.inf), sink)  # (..., n_q, 1)
    m = np.where(np.isfinite(m), m, 0.0).astype(q.dtype)  # only when the row and the sink are all -inf
    e = np.exp(scores - m)  # (..., n_q, n_k), masked entries exp(-inf) = 0
    e_sink = np.exp(sink - m)  # (..., n_q, 1)
    weights = e * safe_reciprocal(e.sum(axis=-1, keepdims=True) + e_sink)  # the sink only in the denominator
    return weights @ v, weights


def streaming_mask(n_q, n_k=None, *, n_sink, window):
    """The StreamingLLM mask: causal, the first ``n_sink`` keys and the ``window`` most recent ones.

    Parameters
    ----------
    n_q : int
        Number of queries: the last ``n_q`` of the ``n_k`` positions (bottom-right
        aligned, as ``causal_mask``).
    n_k : int, optional
        Number of keys (default ``n_q``).
    n_sink : int >= 0
        The first positions every query may attend to (the attention sinks).
    window : int >= 1
        How many of the most recent positions a query sees, its own included.

    Returns
    -------
    ndarray of bool, shape (n_q, n_k)
        ``mask[i, j]`` is True iff ``j <= t`` and (``j < n_sink`` or ``t - j < window``),
        where ``t = i + n_k - n_q`` is query i's position.  ``n_sink = 0`` is the causal
        sliding window of chapter 10; ``window >= n_k`` is the causal mask.
    """
    n_k = n_q if n_k is None else n_k
    _checks.check_sizes(n_q=n_q, n_k=n_k)
    n_sink, window = _check_sink_window(n_sink, window)
    _check_queries_fit(n_q, n_k)
    t = np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, 1): each query's position
    j = np.arange(n_k)[None, :]  # (1, n_k)
    return (j <= t) & ((j < n_sink) | (t - j < window))


class SinkKVCache:
    """A rolling key/value cache with attention sinks (StreamingLLM), for every layer of a decoder.

    The cache keeps the first ``n_sink`` tokens it is given for ever and, beside
    them, the most recent ones.  When a new token arrives, every token it may
    not attend to under :func:`streaming_mask` leaves first: token ``t`` arriving
    evicts token ``t - window`` (unless that is a sink).  So, one token at a time,
    a query sees at most ``capacity = n_sink + window`` keys, its own included,
    and that is all the cache holds.

    Parameters
    ----------
    n_layers, n_heads, d_head : int >= 1
        The decoder's shape, as ``KVCache``.
    n_sink : int >= 0
        Tokens kept from the start of the stream.
    window : int >= 1
        Recent tokens a query sees, its own included.
    n_kv_heads : int, optional
        Key/value heads stored (grouped-query attention); it divides ``n_heads``.

    Attributes
    ----------
    capacity : int
        ``n_sink + window``.
    length : int
        Tokens held now.
    seen : int
        Tokens appended since the start (the next token's original index).
    nbytes : int
        Bytes of the keys and values held.

    Positions.  :meth:`tokens` gives the original index of each held token;
    :meth:`positions` gives what StreamingLLM hands to RoPE: the slot of each
    token in the cache, ``0 .. length - 1``.  Their reference code caches the
    keys *before* the rotation and rotates the whole cache at every step with
    these slots; the new token's query is rotated by its own slot (the last).
    Once tokens have been evicted, the distance from a query to a sink is then
    smaller than in the original text, while the distances inside the window are
    the original ones.  (Their evaluation script trims the cache to
    ``start_size + recent_size`` tokens after each step, so the next query sees
    ``recent_size`` earlier tokens and itself: ``n_sink = start_size``,
    ``window = recent_size + 1`` here.)  Rotating the held keys by :meth:`tokens`
    instead gives exactly the rows of one parallel attention under
    :func:`streaming_mask` at the original positions.
    """

    def __init__(self, n_layers, n_heads, d_head, *, n_sink, window, n_kv_heads=None):
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.n_kv_heads = _checks.check_kv_heads(self.n_heads, n_kv_heads)
        self.d_head = _checks.check_count("d_head", d_head)
        self.n_sink, self.window = _check_sink_window(n_sink, window)
        self._keys = [None] * self.n_layers  # per layer: (..., n_kv_heads, held, d_head)
        self._values = [None] * self.n_layers
        self._tokens = [np.zeros(0, dtype=np.int64) for _ in range(self.n_layers)]  # original indices held
        self._seen = [0] * self.n_layers

    @property
    def capacity(self) -> int:
        return self.n_sink + self.window

    @property
    def length(self) -> int:
        return min(len(t) for t in self._tokens)

    @property
    def seen(self) -> int:
        return min(self._seen)

    @property
    def nbytes(self) -> int:
        return sum(0 if k is None else 2 * k.nbytes for k in self._keys)

    def append(self, layer, k, v):
        """Evict what the new tokens may not see, add their keys ``k`` and values ``v``, return what is held.

        Parameters
        ----------
        layer : int
        k, v : array_like of float, shape (..., n_kv_heads, t, d_head)
            The next ``t`` tokens of the stream (``t = 1`` per generated token).

        Returns
        -------
        keys, values : ndarray, shape (..., n_kv_heads, length, d_head)
            Everything this layer now holds, oldest first: the sinks, the recent
            tokens the first new query still sees, the new tokens.  With ``t = 1``
            the new query attends to all of them; with ``t > 1`` new query ``i``
            attends under ``streaming_mask(t, length, n_sink=…, window=…)``.
        """
        layer = _checks.check_layer(layer, self.n_layers)
        k, v = as_float_arrays(k=k, v=v)
        self._check_step(k.shape, v.shape, k.dtype, layer)
        first = self._seen[layer]  # original index of the first new token
        held = self._tokens[layer]
        stay = (held < self.n_sink) | (held > first - self.window)  # what the first new query still sees
        new = np.arange(first, first + k.shape[-2])
        if self._keys[layer] is None:
            self._keys[layer], self._values[layer] = k.copy(), v.copy()
        else:
            self._keys[layer] = np.concatenate([self._keys[layer][..., stay, :], k], axis=-2)
            self._values[layer] = np.concatenate([self._values[layer][..., stay, :], v], axis=-2)
        self._tokens[layer] = np.concatenate([held[stay], new])
        self._seen[layer] = first + k.shape[-2]
        return self.read(layer)

    def read(self, layer):
        """The keys and values ``layer`` holds: (..., n_kv_heads, length, d_head) each."""
        layer = _checks.check_layer(layer, self.n_layers)
        if self._keys[layer] is None:
            raise ValueError(f"第 {layer} 层还没有缓存任何键和值 (layer {layer} is empty)。")
        return self._keys[layer], self._values[layer]

    def tokens(self, layer=0):
        """The original index of each token ``layer`` holds, oldest first: ndarray of int, shape (length,)."""
        layer = _checks.check_layer(layer, self.n_layers)
        return self._tokens[layer].copy()

    def positions(self, layer=0):
        """The positions StreamingLLM gives RoPE for the held tokens: their slots ``0 .. length - 1``."""
        layer = _checks.check_layer(layer, self.n_layers)
        return np.arange(len(self._tokens[layer]))

    def _check_step(self, k_shape: tuple, v_shape: tuple, dtype, layer: int) -> None:
        want = f"(..., {self.n_kv_heads}, t, {self.d_head})"
        for name, shape in (("k", k_shape), ("v", v_shape)):
            if len(shape) < 3 or shape[-3] != self.n_kv_heads or shape[-1] != self.d_head or shape[-2] < 1:
                raise ValueError(f"{name} 的形状应为 {want}（t ≥ 1），收到 {name}.shape={tuple(shape)} "
                                 f"(cache shape mismatch)。")
        if tuple(k_shape) != tuple(v_shape):
            raise ValueError(f"k 与 v 的形状必须相同：k.shape={tuple(k_shape)}，v.shape={tuple(v_shape)} "
                             f"(shape mismatch)。")
        held = self._keys[layer]
        if held is not None and tuple(held.shape[:-2]) != tuple(k_shape[:-2]):
            raise ValueError(f"新的键的批量形状 {tuple(k_shape[:-2])} 与缓存中的 {tuple(held.shape[:-2])} 不同 "
                             f"(batch mismatch)。")
        if held is not None and held.dtype != dtype:
            raise TypeError(f"新的键是 {dtype}，缓存中的是 {held.dtype}：请先统一 (dtype mismatch with the cache)。")


# --------------------------------------------------------------------------- checks shared with the torch twin


def _check_sink_window(n_sink, window) -> tuple[int, int]:
    """``n_sink`` an int >= 0, ``window`` an int >= 1."""
    if not isinstance(n_sink, (int, np.integer)) or isinstance(n_sink, bool) or n_sink < 0:
        raise ValueError(f"n_sink（汇聚点的个数）必须是非负整数 (n_sink must be an int >= 0)，收到 {n_sink!r}。")
    if not isinstance(window, (int, np.integer)) or isinstance(window, bool) or window < 1:
        raise ValueError(f"window（窗口里最近的键数，含查询自己）必须是正整数 (window must be an int >= 1)，"
                         f"收到 {window!r}。")
    return int(n_sink), int(window)


def _check_queries_fit(n_q: int, n_k: int) -> None:
    if n_q > n_k:
        raise ValueError(f"查询是 n_k 个位置里的最后 n_q 个，n_q 不能大于 n_k：收到 n_q={n_q}，n_k={n_k} "
                         f"(n_q must not exceed n_k)。")


def _check_sink_shape(shape: tuple, kind: str, dtype, batch: tuple) -> None:
    """Sink logits are real numbers that broadcast to the leading (batch/head) dimensions of the scores."""
    if kind not in "iuf":
        raise TypeError(f"sink_logits 必须是实数（每个头一个 logit），收到 dtype={dtype} (sink logits must be real)。")
    try:
        ok = _checks.broadcast_shapes(tuple(shape), tuple(batch)) == tuple(batch)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"sink_logits.shape={tuple(shape)} 无法广播到前导的批量/头维度 {tuple(batch)}：每个头一个 "
                         f"logit，例如 q 的形状为 (h, n_q, d) 时 sink_logits 的形状为 (h,) "
                         f"(sink logits must broadcast to the heads)。")


def _check_sink_values(has_nan: bool, has_pos_inf: bool) -> None:
    if has_nan or has_pos_inf:
        raise ValueError("sink_logits 含有 NaN 或 +inf (sink logits contain NaN or +inf)；"
                         "-inf 可以使用，表示没有汇聚点。")


def _sink_logits(b: np.ndarray, batch: tuple, dtype) -> np.ndarray:
    """The sink logits as an array (..., 1, 1) of ``dtype`` that broadcasts against the scores."""
    _check_sink_shape(b.shape, b.dtype.kind, b.dtype, batch)
    b = b.astype(dtype, copy=False)
    _check_sink_values(bool(np.isnan(b).any()), bool(np.isposinf(b).any()))
    return b[..., None, None]
