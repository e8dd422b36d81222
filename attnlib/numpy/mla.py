"""Multi-head latent attention, MLA (chapter 17): DeepSeek-V2's cache of one small latent per token.

A KV cache (chapter 11) keeps ``2 · h · d_head`` numbers per token and layer;
grouped-query attention (chapter 16) shrinks ``h`` to ``h_kv``.  MLA
(DeepSeek-V2, section 2.1) caches instead a latent ``c_kv`` of ``d_latent``
numbers, of which every head's key and value are linear images, and one small
rotated key ``k_r`` of ``d_rope`` numbers shared by all heads::

    c_kv  = x W_dkv                                  (..., n, d_latent)    cached
    k_r   = RoPE(x W_kr)                             (..., n, d_rope)      cached, one for all heads
    k_c,i = c_kv W_uk,i      v_c,i = c_kv W_uv,i     (..., n, d_head)      head i
    c_q   = x W_dq           q_c,i = c_q W_uq,i      q_r,i = RoPE(c_q W_qr,i)
    o_i   = softmax([q_c,i; q_r,i] [k_c,i; k_r]^T / sqrt(d_head + d_rope)) v_c,i
    out   = concat(o_1, ..., o_h) W_o

Absorption (``absorb=True``) never forms a head's keys or values:

* ``q_c,i · k_c,i(s) = (q_c,i W_uk,i^T) · c_kv(s)``: the query is carried into
  the latent space and scored against the cached latents themselves;
* ``Σ_s p_s (c_kv(s) W_uv,i) = (Σ_s p_s c_kv(s)) W_uv,i``: the value matrix is
  applied once per query, after the weighted sum of latents.

This works because nothing between the query and ``c_kv`` depends on the
key's position.  RoPE does: a key rotated at its position ``s`` is
``R_s (W_uk,i^T c_kv(s))``, and ``R_s`` cannot be folded into a fixed query
matrix, which is why the positional part of the score goes through the
separate shared key ``k_r``.

Departures from DeepSeek's models, on purpose: no RMSNorm on the latents (the
paper normalises ``c_q`` and ``c_kv``), no RoPE scaling (YaRN), and the values
have the width ``d_head`` of the content keys.  ``weights`` maps names to
``x @ w`` matrices; head ``i`` owns columns ``i·d_head ... (i+1)·d_head - 1`` of
``w_uq``, ``w_uk``, ``w_uv`` (and those rows of ``w_o``), as in chapter 9, and columns
``i·d_rope ... (i+1)·d_rope - 1`` of ``w_qr``, whose blocks are ``d_rope`` wide.

The input checks live here as small private functions working on shapes; the
torch twin (``attnlib.torch.mla``) calls the same ones, so both backends raise
the same errors with the same messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays
from .attention import scaled_dot_product_attention
from .masks import hide_future_
from .multihead import merge_heads, split_heads
from .positions import _check_positions_kind, _check_positions_shape, apply_rope
from .softmax import softmax_

#: The matrices of one MLA layer, in the order of the formulas.
WEIGHT_NAMES = ("w_dq", "w_uq", "w_qr", "w_dkv", "w_uk", "w_uv", "w_kr", "w_o")

# --------------------------------------------------------------------------- shared checks (both backends)


class Dims(NamedTuple):
    """The widths of an MLA layer, read off its weights."""

    d_model: int
    n_heads: int
    d_head: int
    d_rope: int
    d_latent: int
    d_latent_q: int


def _check_weight_names(weights) -> None:
    """``weights`` must be a mapping with exactly the names of ``WEIGHT_NAMES``."""
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights 必须是从名字到矩阵的字典 (a mapping of weight names)，"
                        f"收到 {type(weights).__name__}；需要的名字：{', '.join(WEIGHT_NAMES)}。")
    missing = [n for n in WEIGHT_NAMES if n not in weights]
    unknown = sorted(str(n) for n in weights if n not in WEIGHT_NAMES)
    if missing or unknown:
        raise ValueError(f"weights 缺少 {missing or '无'}，多出 {unknown or '无'} (missing or unknown weight names)；"
                         f"MLA 需要且只需要：{', '.join(WEIGHT_NAMES)}。")


def _check_shape(name: str, shape: tuple, rows: int, cols: int, meaning: str) -> None:
    if tuple(shape) != (rows, cols):
        raise ValueError(f"{name} 的形状应为 {meaning} = ({rows}, {cols})，收到 {name}.shape={tuple(shape)} "
                         f"(MLA weight shape mismatch)。")


def _check_heads_width(name: str, shape: tuple, n_heads: int, what: str) -> int:
    """``name`` has ``n_heads`` blocks of columns; returns the width of one."""
    if shape[1] % n_heads:
        raise ValueError(f"{name} 的列数 {shape[1]} 应为 n_heads × {what}，却不能被 n_heads={n_heads} 整除 "
                         f"(width does not match n_heads)：{name}.shape={tuple(shape)}。")
    return shape[1] // n_heads


def _check_dims(x_shape: tuple, shapes: dict, n_heads) -> Dims:
    """Check x ``(..., n, d_model)`` and every weight against each other; return the layer's widths."""
    _checks.check_min_ndim("x", x_shape)
    n_heads = _checks.check_count("n_heads", n_heads)
    for name in WEIGHT_NAMES:
        if len(shapes[name]) != 2:
            raise ValueError(f"{name} 必须是二维矩阵，收到 {name}.shape={tuple(shapes[name])} (expected a matrix)。")
    d_model, d_latent_q, d_latent = x_shape[-1], shapes["w_dq"][1], shapes["w_dkv"][1]
    d_rope = shapes["w_kr"][1]
    _check_shape("w_dq", shapes["w_dq"], d_model, d_latent_q, "(d_model, d_latent_q)")
    _check_shape("w_dkv", shapes["w_dkv"], d_model, d_latent, "(d_model, d_latent)")
    _check_shape("w_kr", shapes["w_kr"], d_model, d_rope, "(d_model, d_rope)")
    if d_rope % 2 or d_rope == 0:
        raise ValueError(f"RoPE 把特征两两配对旋转，d_rope（w_kr 的列数）必须是正偶数 (d_rope must be even)，"
                         f"收到 w_kr.shape={tuple(shapes['w_kr'])}。")
    d_head = _check_heads_width("w_uq", shapes["w_uq"], n_heads, "d_head")
    _check_shape("w_uq", shapes["w_uq"], d_latent_q, n_heads * d_head, "(d_latent_q, n_heads·d_head)")
    _check_shape("w_qr", shapes["w_qr"], d_latent_q, n_heads * d_rope, "(d_latent_q, n_heads·d_rope)")
    for name in ("w_uk", "w_uv"):
        _check_shape(name, shapes[name], d_latent, n_heads * d_head, "(d_latent, n_heads·d_head)")
    _check_shape("w_o", shapes["w_o"], n_heads * d_head, d_model, "(n_heads·d_head, d_model)")
    return Dims(d_model, n_heads, d_head, d_rope, d_latent, d_latent_q)


def _check_cache_widths(cache, dims: Dims) -> None:
    """A cache must hold latents and rotated keys as wide as the weights make them."""
    if (cache.d_latent, cache.d_rope) != (dims.d_latent, dims.d_rope):
        raise ValueError(f"缓存的宽度 d_latent={cache.d_latent}、d_rope={cache.d_rope} 与权重的 "
                         f"d_latent={dims.d_latent}（w_dkv 的列数）、d_rope={dims.d_rope}（w_kr 的列数）不同 "
                         f"(cache widths do not match the weights)。")


def _check_cache_type(cache, cls) -> None:
    if not isinstance(cache, cls):
        raise TypeError(f"cache 必须是 {cls.__module__}.{cls.__name__}，收到 {type(cache).__name__} "
                        f"(expected a latent cache)。")


def _check_filled(layer: int, buffer) -> None:
    if buffer is None:
        raise ValueError(f"第 {layer} 层还没有缓存任何潜在向量 (layer {layer} is empty)。")


def _check_latent_step(c_shape: tuple, r_shape: tuple, d_latent: int, d_rope: int, cached) -> None:
    """New latents ``(..., t, d_latent)`` and rotated keys ``(..., t, d_rope)``; ``cached``: the layer's batch."""
    for name, shape, width in (("c_kv", c_shape, d_latent), ("k_rope", r_shape, d_rope)):
        if len(shape) < 2 or shape[-1] != width:
            raise ValueError(f"{name} 的形状应为 (..., t, {width})，收到 {name}.shape={tuple(shape)} "
                             f"(cache shape mismatch)。")
    if tuple(c_shape[:-1]) != tuple(r_shape[:-1]):
        raise ValueError(f"c_kv 与 k_rope 的前几维必须相同（同样的词元）：c_kv.shape={tuple(c_shape)}，"
                         f"k_rope.shape={tuple(r_shape)} (shape mismatch)。")
    if cached is not None and tuple(cached) != tuple(c_shape[:-2]):
        raise ValueError(f"新的潜在向量的批量形状 {tuple(c_shape[:-2])} 与缓存中的 {tuple(cached)} 不同 "
                         f"(batch mismatch)。")


def _positions_per_head(positions):
    """Positions ``(n,)`` broadcast over heads as they are; ``(..., n)`` get a head axis: ``(..., 1, n)``."""
    return positions if positions is None or positions.ndim == 1 else positions[..., None, :]


# --------------------------------------------------------------------------- the layer


def multi_head_latent_attention(x, weights, n_heads, *, causal=True, absorb=False, positions=None):
    """Multi-head latent attention (DeepSeek-V2 §2.1, without the latents' RMSNorm).

    Parameters
    ----------
    x : array_like of float, shape (..., n, d_model)
    weights : mapping of str to array_like of float
        ``x @ w`` matrices, one dtype with ``x``: ``w_dq`` (d_model, d_latent_q),
        ``w_uq`` (d_latent_q, h·d_head), ``w_qr`` (d_latent_q, h·d_rope),
        ``w_dkv`` (d_model, d_latent), ``w_uk`` and ``w_uv`` (d_latent, h·d_head),
        ``w_kr`` (d_model, d_rope), ``w_o`` (h·d_head, d_model); ``d_rope`` even.
    n_heads : int
        ``h``, the number of heads.
    causal : bool
        Token t attends to tokens 0..t only.
    absorb : bool
        False: reconstruct every head's keys ``[k_c,i; k_r]`` and values ``v_c,i`` from
        the latents and attend as chapter 9 does.  True: the same result with ``W_uk``
        folded into the queries and ``W_uv`` applied after the weighted sum of latents,
        no head's key or value formed.
    positions : array_like of int or float, shape (n,) or (..., n), optional
        The positions RoPE rotates by (default ``0 .. n - 1``), as ``apply_rope``.

    Returns
    -------
    ndarray, shape (..., n, d_model), the dtype of ``x``
    """
    x, w = _as_inputs(x, weights)
    dims = _check_dims(x.shape, {n: a.shape for n, a in w.items()}, n_heads)
    positions = _as_positions(positions, x.shape)
    q_c, q_r = _queries(x, w, dims.n_heads, positions)
    c_kv, k_r = _latents(x, w, positions)
    attend = _absorbed_attention if absorb else _naive_attention
    return merge_heads(attend(q_c, q_r, c_kv, k_r, w, causal)) @ w["w_o"]  # (..., n, d_model)


def _as_inputs(x, weights) -> tuple[np.ndarray, dict]:
    """``x`` and the weights as float arrays of one dtype, checked finite."""
    _check_weight_names(weights)
    x, *arrays = as_float_arrays(x=x, **{name: weights[name] for name in WEIGHT_NAMES})
    return x, dict(zip(WEIGHT_NAMES, arrays, strict=True))


def _as_positions(positions, x_shape: tuple):
    """``positions`` checked against x ``(..., n, d_model)``: one per token (None stays None)."""
    if positions is None:
        return None
    pos = np.asarray(positions)
    _check_positions_kind(pos.dtype.kind, pos.dtype)
    _check_positions_shape(pos.shape, x_shape)
    return pos


def _queries(x, w, n_heads, positions):
    """Every head's content query (..., h, n, d_head) and rotated query (..., h, n, d_rope)."""
    c_q = x @ w["w_dq"]  # (..., n, d_latent_q): the queries' own latent, never cached
    q_c = split_heads(c_q @ w["w_uq"], n_heads)  # (..., h, n, d_head)
    q_r = apply_rope(split_heads(c_q @ w["w_qr"], n_heads), _positions_per_head(positions))  # (..., h, n, d_rope)
    return q_c, q_r


def _latents(x, w, positions):
    """What the cache keeps of each token: the latent (..., n, d_latent), the shared rotated key (..., n, d_rope)."""
    return x @ w["w_dkv"], apply_rope(x @ w["w_kr"], positions)


def _naive_attention(q_c, q_r, c_kv, k_r, w, causal):
    """Reconstruct each head's keys and values of every token from the latents, then attend: (..., h, n_q, d_head)."""
    h = q_c.shape[-3]
    k_c = split_heads(c_kv @ w["w_uk"], h)  # (..., h, n_k, d_head): formed for every token
    v_c = split_heads(c_kv @ w["w_uv"], h)  # (..., h, n_k, d_head)
    k_r = np.broadcast_to(k_r[..., None, :, :], k_c.shape[:-1] + k_r.shape[-1:])  # the one rotated key, every head
    q = np.concatenate([q_c, q_r], axis=-1)  # (..., h, n_q, d_head + d_rope)
    k = np.concatenate([k_c, k_r], axis=-1)  # (..., h, n_k, d_head + d_rope)
    out, _ = scaled_dot_product_attention(q, k, v_c, causal=causal, need_weights=False)  # / sqrt(d_head + d_rope)
    return out


def _absorbed_attention(q_c, q_r, c_kv, k_r, w, causal):
    """The same attention in the latent space, no head's key or value formed: (..., h, n_q, d_head)."""
    h, n_q = q_c.shape[-3], q_c.shape[-2]
    w_uk, w_uv = split_heads(w["w_uk"], h), split_heads(w["w_uv"], h)  # (h, d_latent, d_head) each: W_uk,i, W_uv,i
    q_latent = q_c @ np.swapaxes(w_uk, -1, -2)  # (..., h, n_q, d_latent): q_c,i W_uk,i^T
    # Every head scores the same cached c_kv and k_r, so the heads' queries are rows of one matrix:
    # (..., h·n_q, d) @ (..., d, n_k), one pass over the cache instead of one per head.
    scores = _rows(q_latent) @ np.swapaxes(c_kv, -1, -2) + _rows(q_r) @ np.swapaxes(k_r, -1, -2)
    scores = scores.reshape(q_c.shape[:-1] + (c_kv.shape[-2],))  # (..., h, n_q, n_k)
    scores *= 1.0 / math.sqrt(q_c.shape[-1] + q_r.shape[-1])  # the width of [k_c,i; k_r], not of c_kv
    if causal:
        hide_future_(scores)
    weights = softmax_(scores, axis=-1)  # in place: (..., h, n_q, n_k)
    latent_out = (_rows(weights) @ c_kv).reshape(q_c.shape[:-2] + (n_q, c_kv.shape[-1]))  # (..., h, n_q, d_latent)
    return latent_out @ w_uv  # (..., h, n_q, d_head): W_uv,i once per query, after the weighted sum


def _rows(a):
    """``(..., h, n, d) -> (..., h·n, d)``: the heads' rows stacked (a view of a contiguous array)."""
    return a.reshape(a.shape[:-3] + (a.shape[-3] * a.shape[-2], a.shape[-1]))


# --------------------------------------------------------------------------- decoding


class LatentKVCache:
    """What MLA caches: per layer, each token's latent ``c_kv`` and its rotated key ``k_r``.

    Parameters
    ----------
    n_layers : int >= 1
    d_latent : int >= 1
        Width of the latent ``c_kv`` (the columns of ``w_dkv``).
    d_rope : int >= 1
        Width of the rotated key ``k_r`` shared by all heads (the columns of ``w_kr``).
    capacity : int >= 1
        Tokens stored before the buffers grow (they double when full, as ``KVCache``'s do).

    Attributes
    ----------
    length : int
        Tokens cached (in every layer, once each layer has received the step).
    nbytes : int
        ``Σ_layers tokens × (d_latent + d_rope) × itemsize (× batch)``, against
        ``KVCache``'s ``layers × 2 × tokens × h × d_head × itemsize``: no head count appears.
    """

    def __init__(self, n_layers, d_latent, d_rope, *, capacity=64):
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.d_latent = _checks.check_count("d_latent", d_latent)
        self.d_rope = _checks.check_count("d_rope", d_rope)
        self._capacity = _checks.check_count("capacity", capacity)
        self._buffers = [None] * self.n_layers  # per layer: (..., capacity, d_latent + d_rope), c_kv then k_r
        self._lengths = [0] * self.n_layers

    @property
    def length(self) -> int:
        return min(self._lengths)

    @property
    def nbytes(self) -> int:
        return sum(n * buf[..., 0, :].nbytes for buf, n in zip(self._buffers, self._lengths, strict=True)
                   if buf is not None)  # one token's row of every batch entry, times the tokens

    def append(self, layer, c_kv, k_rope):
        """Add the latents ``c_kv`` (..., t_new, d_latent) and rotated keys ``k_rope`` (..., t_new, d_rope).

        Returns
        -------
        c_kv, k_rope : ndarray, shape (..., length, d_latent) and (..., length, d_rope)
            Everything this layer has cached, the new tokens last (views, no copy).
        """
        layer = _checks.check_layer(layer, self.n_layers)
        c_kv, k_rope = as_float_arrays(c_kv=c_kv, k_rope=k_rope)
        buf = self._buffers[layer]
        _check_latent_step(c_kv.shape, k_rope.shape, self.d_latent, self.d_rope,
                           None if buf is None else buf.shape[:-2])
        if buf is not None and c_kv.dtype != buf.dtype:
            raise TypeError(f"新的潜在向量是 {c_kv.dtype}，缓存中的是 {buf.dtype}：请先统一 "
                            f"(dtype mismatch with the cache)。")
        start, stop = self._lengths[layer], self._lengths[layer] + c_kv.shape[-2]
        if buf is None or stop > buf.shape[-2]:
            self._grow(layer, c_kv, stop)
        self._buffers[layer][..., start:stop, : self.d_latent] = c_kv
        self._buffers[layer][..., start:stop, self.d_latent:] = k_rope
        self._lengths[layer] = stop
        return self.read(layer)

    def read(self, layer):
        """The cached ``c_kv`` (..., length, d_latent) and ``k_rope`` (..., length, d_rope) of ``layer`` (views)."""
        layer = _checks.check_layer(layer, self.n_layers)
        _check_filled(layer, self._buffers[layer])
        rows = self._buffers[layer][..., : self._lengths[layer], :]
        return rows[..., : self.d_latent], rows[..., self.d_latent:]

    def _grow(self, layer, like, needed: int) -> None:
        """Reallocate ``layer``'s buffer with room for at least ``needed`` tokens, keeping what is cached."""
        old, n = self._buffers[layer], self._lengths[layer]
        capacity = max(self._capacity, needed, 2 * (old.shape[-2] if old is not None else 0))
        self._buffers[layer] = np.zeros(like.shape[:-2] + (capacity, self.d_latent + self.d_rope), dtype=like.dtype)
        if old is not None:
            self._buffers[layer][..., :n, :] = old[..., :n, :]


def latent_attention_step(x_new, weights, n_heads, cache, layer):
    """One decoding step of one MLA layer: cache the new tokens' latents, attend (absorbed) over the whole cache.

    Parameters
    ----------
    x_new : array_like of float, shape (..., t_new, d_model)
        The new tokens (``t_new = 1`` per generated token, the prompt at once first).
    weights, n_heads
        As ``multi_head_latent_attention``.
    cache : LatentKVCache
        Its widths are those of ``w_dkv`` and ``w_kr``.
    layer : int

    Returns
    -------
    ndarray, shape (..., t_new, d_model)
        The rows of causal ``multi_head_latent_attention`` over the whole sequence at the new
        positions.  The new queries and keys are rotated at their true positions
        ``length, ..., length + t_new - 1`` (``length``: tokens this layer had cached); the
        new queries see the cache and the new tokens up to their own (bottom-right causal).

    Everything is checked before anything is appended, so a refused call leaves the cache as it was.
    """
    return _step(x_new, weights, n_heads, cache, layer, absorb=True)


def _step(x_new, weights, n_heads, cache, layer, *, absorb):
    """``latent_attention_step``; ``absorb=False`` reconstructs every cached token's keys and values instead."""
    x_new, w = _as_inputs(x_new, weights)
    dims = _check_dims(x_new.shape, {n: a.shape for n, a in w.items()}, n_heads)
    _check_cache_type(cache, LatentKVCache)
    _check_cache_widths(cache, dims)
    start, t_new = cache._lengths[_checks.check_layer(layer, cache.n_layers)], x_new.shape[-2]
    positions = np.arange(start, start + t_new)  # (t_new,): the true positions, not 0 ...
    q_c, q_r = _queries(x_new, w, dims.n_heads, positions)
    c_kv, k_r = cache.append(layer, *_latents(x_new, w, positions))  # (..., length, d_latent), (..., length, d_rope)
    attend = _absorbed_attention if absorb else _naive_attention
    return merge_heads(attend(q_c, q_r, c_kv, k_r, w, t_new > 1)) @ w["w_o"]  # (..., t_new, d_model)
