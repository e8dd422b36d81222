"""Compressing the key/value cache (chapter 23), NumPy backend: quantization and eviction.

Two ways to make the cache of chapter 11 smaller.

Quantization stores every number in ``b`` bits.  The numbers are cut into
groups of ``group_size`` along one axis; each group keeps its minimum ``m``
and a scale ``s`` (asymmetric quantization, as KIVI, Liu et al. 2024)::

    s = (max - m) / (2^b - 1)          # 2^b - 1 steps between 2^b levels
    code = round((x - m) / s)          # an integer in 0 .. 2^b - 1
    x̂ = code · s + m                   # |x - x̂| <= s / 2

For a cache of shape (..., tokens, d_head), ``axis=-1`` makes groups of
``group_size`` channels of one token ("per token", KIVI's values) and
``axis=-2`` groups of ``group_size`` tokens of one channel ("per channel",
KIVI's keys).  The codes take ``b`` bits each once packed; every group adds
its scale and its minimum in the dtype of the input, so a float16 group of 32
costs ``32·b + 2·16`` bits: ``b + 1`` bits per number (:func:`quantized_nbytes`).

Eviction keeps ``budget`` of the cached keys of each head and forgets the
others.  Two rules that score the keys by the attention they received:

* :func:`h2o_keep` (H2O, Zhang et al. 2023): the ``recent`` newest keys always
  stay; the rest of the budget goes to the "heavy hitters", the keys with the
  largest attention accumulated over the queries that could see them
  (:func:`heavy_hitters` does the choosing from the accumulated totals).
* :func:`snapkv_keep` (SnapKV, Li et al. 2024): the last ``window`` queries of
  the prompt vote (their weights summed), the votes are smoothed by an average
  pool of width ``kernel_size``, the top of the older keys stay beside the
  window's own keys.

:func:`compress_cache` applies a keep set to a ``KVCache``: each key/value
head keeps its own keys, gathered in their original order.  The keys were
rotated by RoPE at their original positions before they were cached, so they
keep those positions; a new token must be given its own original position
(``positions=`` of the model's ``step``), not the compressed cache's length.

The torch twin (``attnlib.torch.kv_compress``) has the same names and signatures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _checks
from ._arrays import as_float
from .kv_cache import KVCache


@dataclass(frozen=True)
class QuantizedKV:
    """A tensor quantized by :func:`quantize_kv`.

    Attributes
    ----------
    codes : ndarray of uint8, the shape of the input
        One integer in ``0 .. 2^bits - 1`` per number (unpacked here, for reading;
        :meth:`packed` gives the ``bits``-per-number form that is counted).
    scale, minimum : ndarray, the input's dtype
        One per group: the input's shape with ``shape[axis]`` divided by ``group_size``.
    bits, axis, group_size : int
        How it was quantized; ``axis`` is non-negative.
    """

    codes: object  # an array of the backend
    scale: object  # an array of the backend
    minimum: object  # an array of the backend
    bits: int
    axis: int
    group_size: int

    def packed(self) -> np.ndarray:
        """The codes packed ``bits`` to a number, the first code in the lowest bits: uint8, (⌈size·bits/8⌉,)."""
        bit = (self.codes.reshape(-1, 1) >> np.arange(self.bits, dtype=np.uint8)) & 1  # (size, bits)
        return np.packbits(bit.reshape(-1), bitorder="little")

    @property
    def nbytes(self) -> int:
        """Bytes stored: the packed codes, every scale and every minimum."""
        return int(self.packed().nbytes + self.scale.nbytes + self.minimum.nbytes)


def quantize_kv(x, bits, *, axis, group_size):
    """Asymmetric ``bits``-bit quantization in groups of ``group_size`` along ``axis``.

    Parameters
    ----------
    x : array_like of float, shape (..., n, d)
        Keys or values (any shape of at least one dimension), finite.
    bits : int, 1 .. 8
    axis : int
        The axis along which a group's numbers lie: ``-1`` (channels) quantizes each
        token on its own ("per token"), ``-2`` (tokens) each channel ("per channel").
    group_size : int >= 1
        Numbers per group; it divides ``x.shape[axis]`` (KIVI keeps the tokens that do
        not fill a group yet in full precision).

    Returns
    -------
    QuantizedKV
        For each group, ``minimum = min``, ``scale = (max - min) / (2^bits - 1)``
        (0 for a constant group) and ``codes = round((x - minimum) / scale)``, computed
        in at least float32 from the stored (rounded to ``x.dtype``) minimum and scale.
        :func:`dequantize_kv` then returns ``codes · scale + minimum``, within
        ``scale / 2`` of ``x`` (plus the rounding of a float16 scale and minimum).
    """
    x = as_float(x, "x")
    bits, axis, group_size = _check_quantize(x.shape, bits, axis, group_size)
    if not np.isfinite(x).all():
        raise ValueError("x 含有 NaN 或 inf，无法量化 (non-finite values in x)。")
    work = np.promote_types(x.dtype, np.float32)
    g = _grouped(x.astype(work), axis, group_size)  # (..., n_groups, group_size, ...) along axis
    low = g.min(axis=axis + 1, keepdims=True)
    high = g.max(axis=axis + 1, keepdims=True)
    levels = 2**bits - 1
    minimum = low.astype(x.dtype)  # stored as the input's dtype
    scale = ((high - minimum.astype(work)) / levels).astype(x.dtype)
    s, m = scale.astype(work), minimum.astype(work)
    safe = np.where(s > 0, s, 1)
    codes = np.clip(np.rint((g - m) / safe), 0, levels)
    codes = np.where(s > 0, codes, 0).astype(np.uint8).reshape(x.shape)
    return QuantizedKV(codes, np.squeeze(scale, axis + 1), np.squeeze(minimum, axis + 1), bits, axis, group_size)


def dequantize_kv(q):
    """``codes · scale + minimum`` of a :class:`QuantizedKV`: ndarray, the codes' shape, the scale's dtype."""
    if not isinstance(q, QuantizedKV):
        raise TypeError(f"dequantize_kv 需要 quantize_kv 返回的 QuantizedKV，收到 {type(q).__name__} "
                        f"(expected a QuantizedKV)。")
    g = _grouped(q.codes, q.axis, q.group_size)
    s = np.expand_dims(q.scale, q.axis + 1)
    m = np.expand_dims(q.minimum, q.axis + 1)
    return (g * s + m).astype(q.scale.dtype).reshape(q.codes.shape)


def quantized_nbytes(n_values, bits, *, group_size, scale_bits=16, minimum_bits=16):
    """Bytes of ``n_values`` numbers quantized to ``bits`` in groups of ``group_size``.

    ``⌈n_values · bits / 8⌉`` for the packed codes plus ``⌈n_groups · (scale_bits + minimum_bits) / 8⌉``
    for the groups' scales and minima (float16 both by default; ``minimum_bits=bits``
    stands for an integer zero point instead of a float minimum).  Per number that is
    ``bits + (scale_bits + minimum_bits) / group_size`` bits.
    """
    n_values = _checks.check_count("n_values", n_values, minimum=0)
    bits = _check_bits(bits)
    group_size = _checks.check_count("group_size", group_size)
    scale_bits = _checks.check_count("scale_bits", scale_bits, minimum=0)
    minimum_bits = _checks.check_count("minimum_bits", minimum_bits, minimum=0)
    if n_values % group_size:
        raise ValueError(f"n_values={n_values} 不是 group_size={group_size} 的整数倍 "
                         f"(n_values must be a multiple of group_size)。")
    groups = n_values // group_size
    return -(-n_values * bits // 8) + -(-groups * (scale_bits + minimum_bits) // 8)


def heavy_hitters(totals, budget, *, recent):
    """H2O's choice from accumulated attention: the ``recent`` newest keys and the heaviest of the others.

    Parameters
    ----------
    totals : array_like of float, shape (..., n_k)
        Each key's accumulated attention (oldest key first).
    budget : int >= 1
        Keys kept per row.  ``budget >= n_k`` keeps every key.
    recent : int, 0 <= recent <= budget
        The newest keys, kept whatever their totals.

    Returns
    -------
    ndarray of int64, shape (..., min(budget, n_k))
        The kept keys' indices in increasing order: ``n_k - recent .. n_k - 1`` and the
        ``budget - recent`` older keys of largest total; between equal totals the more
        recent key (larger index) wins.
    """
    totals = as_float(totals, "totals")
    _checks.check_min_ndim("totals", totals.shape, 1)
    n_k = totals.shape[-1]
    budget, recent = _check_budget(budget, recent, "recent")
    if budget >= n_k:
        return np.broadcast_to(np.arange(n_k), totals.shape).copy()
    older = n_k - recent
    j = np.arange(older)
    # order of the older keys: largest total first, then the larger index first
    order = np.lexsort((np.broadcast_to(-j, totals.shape[:-1] + (older,)), -totals[..., :older]), axis=-1)
    heavy = order[..., : budget - recent]
    newest = np.broadcast_to(np.arange(older, n_k), totals.shape[:-1] + (recent,))
    return np.sort(np.concatenate([heavy, newest], axis=-1), axis=-1).astype(np.int64)


def h2o_keep(weights, budget, *, recent):
    """The H2O keep set: heavy hitters by accumulated attention plus a recent window.

    Parameters
    ----------
    weights : array_like of float, shape (..., n_q, n_k)
        Attention weights of the queries at the last ``n_q`` of the ``n_k`` positions
        (bottom-right aligned, as the causal mask: query ``i`` is at ``t = i + n_k - n_q``).
        With grouped heads, sum the weights of a key/value head's query heads first.
    budget : int >= 1
        Keys kept per head.
    recent : int, 0 <= recent <= budget
        The newest keys, always kept.

    Returns
    -------
    ndarray of int64, shape (..., min(budget, n_k))
        :func:`heavy_hitters` of the accumulated attention ``Σ_{i: j <= t_i} weights[..., i, j]``:
        only the queries that can see key ``j`` count (entries above the causal diagonal
        are ignored, whatever they hold).
    """
    weights = as_float(weights, "weights")
    _checks.check_min_ndim("weights", weights.shape)
    n_q, n_k = weights.shape[-2:]
    _check_last_queries(tuple(weights.shape))
    visible = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, n_k)
    totals = np.where(visible, weights, 0).sum(axis=-2)  # (..., n_k)
    return heavy_hitters(totals, budget, recent=recent)


def snapkv_keep(weights, budget, *, window, kernel_size=5):
    """The SnapKV keep set: the last ``window`` queries vote, votes pooled, the window kept.

    Parameters
    ----------
    weights : array_like of float, shape (..., n_q, n_k)
        Attention weights whose last ``window`` rows are the observation window: the
        last ``window`` queries of the prompt over all ``n_k`` keys (``n_q >= window``;
        the rows before them are not read).  With grouped heads, sum the weights of a
        key/value head's query heads first (SnapKV's code chooses per query head).
    budget : int, window <= budget
        Keys kept per head, the window's own ``window`` keys included.
    window : int >= 1
    kernel_size : odd int >= 1
        Width of the average pool (SnapKV's default 5).

    Returns
    -------
    ndarray of int64, shape (..., min(budget, n_k))
        Indices in increasing order.  As ``SnapKVCluster.update_kv``: the votes of the
        ``n_k - window`` older keys are the window rows' weights summed, pooled by
        ``avg_pool1d(kernel_size, stride=1, padding=kernel_size // 2)`` (zeros padded and
        counted: every output divides by ``kernel_size``); the ``budget - window`` largest
        stay (between equal votes the more recent key), with the window's keys.
    """
    weights = as_float(weights, "weights")
    _checks.check_min_ndim("weights", weights.shape)
    n_q, n_k = weights.shape[-2:]
    budget, window = _check_budget(budget, window, "window")
    kernel_size = _check_kernel(kernel_size)
    _check_window(window, n_q)
    if budget >= n_k:
        return np.broadcast_to(np.arange(n_k), weights.shape[:-2] + (n_k,)).copy()
    votes = weights[..., -window:, : n_k - window].sum(axis=-2)  # (..., n_k - window)
    pad = kernel_size // 2
    padded = np.pad(votes, [(0, 0)] * (votes.ndim - 1) + [(pad, pad)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, kernel_size, axis=-1)  # (..., n_k - window, kernel)
    pooled = windows.sum(axis=-1) / kernel_size
    return heavy_hitters(np.concatenate([pooled, np.zeros(pooled.shape[:-1] + (window,))], axis=-1),
                         budget, recent=window)


def compress_cache(cache, keep):
    """A new ``KVCache`` holding, per layer and key/value head, only the keys and values in ``keep``.

    Parameters
    ----------
    cache : KVCache
    keep : sequence of array_like of int, one per layer, shape (..., n_kv_heads, k)
        Each head's kept positions (e.g. from :func:`h2o_keep`); ``k`` may differ between
        layers.  Each head keeps its keys in the order given (increasing: oldest first).

    Returns
    -------
    KVCache
        ``length == k`` (the smallest over the layers).  The kept keys keep the RoPE
        rotation of their original positions: a new token at original position ``p``
        is given ``positions=[p]`` when it is run over this cache.
    """
    if not isinstance(cache, KVCache):
        raise TypeError(f"compress_cache 需要 KVCache，收到 {type(cache).__name__} (expected a KVCache)。")
    keep = _check_keep_list(keep, cache.n_layers)
    new = KVCache(cache.n_layers, cache.n_heads, cache.d_head, n_kv_heads=cache.n_kv_heads)
    for layer, idx in enumerate(keep):
        keys, values = cache.read(layer)
        idx = _check_keep(np.asarray(idx), keys.shape, layer)
        new.append(layer, np.take_along_axis(keys, idx[..., None], axis=-2),
                   np.take_along_axis(values, idx[..., None], axis=-2))
    return new


# --------------------------------------------------------------------------- helpers and checks (shared)


def _grouped(x, axis: int, group_size: int):
    """``x`` with ``axis`` split into (n_groups, group_size): a view for the group reductions."""
    shape = x.shape[:axis] + (x.shape[axis] // group_size, group_size) + x.shape[axis + 1:]
    return x.reshape(shape)


def _check_bits(bits) -> int:
    if not isinstance(bits, (int, np.integer)) or isinstance(bits, bool) or not 1 <= bits <= 8:
        raise ValueError(f"bits（每个数的位数）必须是 1 到 8 之间的整数 (bits must be an int in 1..8)，收到 {bits!r}。")
    return int(bits)


def _check_quantize(shape: tuple, bits, axis, group_size) -> tuple[int, int, int]:
    """bits in 1..8, axis an int naming a dimension (made non-negative), group_size dividing its length."""
    bits = _check_bits(bits)
    if len(shape) < 1:
        raise ValueError("x 至少要有一维 (x must have at least one dimension)。")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis 必须是 x 的一个维度（-{len(shape)} 到 {len(shape) - 1}），收到 {axis!r} "
                         f"(axis out of range)。")
    axis = int(axis) % len(shape)
    group_size = _checks.check_count("group_size", group_size)
    if shape[axis] % group_size:
        raise ValueError(f"x 在 axis={axis} 上的长度 {shape[axis]} 不是 group_size={group_size} 的整数倍 "
                         f"(group_size must divide the axis)：凑不满一组的词元先按原精度存着。")
    return bits, axis, group_size


def _check_budget(budget, kept, name: str) -> tuple[int, int]:
    budget = _checks.check_count("budget", budget)
    if not isinstance(kept, (int, np.integer)) or isinstance(kept, bool) or not 0 <= kept <= budget:
        raise ValueError(f"{name} 必须是 0 到 budget={budget} 之间的整数（它们总被保留，算在预算之内），"
                         f"收到 {kept!r} ({name} must be in 0..budget)。")
    return budget, int(kept)


def _check_kernel(kernel_size) -> int:
    if (not isinstance(kernel_size, (int, np.integer)) or isinstance(kernel_size, bool) or kernel_size < 1
            or kernel_size % 2 == 0):
        raise ValueError(f"kernel_size 必须是正的奇数（池化前后长度不变），收到 {kernel_size!r} "
                         f"(kernel_size must be an odd int >= 1)。")
    return int(kernel_size)


def _check_last_queries(weights_shape: tuple) -> None:
    """The queries are the last n_q of the n_k positions: n_q <= n_k."""
    if weights_shape[-2] > weights_shape[-1]:
        raise ValueError(f"查询是 n_k 个位置里的最后 n_q 个，n_q 不能大于 n_k：收到 weights.shape="
                         f"{weights_shape} (n_q must not exceed n_k)。")


def _check_window(window: int, n_q: int) -> None:
    if window < 1 or window > n_q:
        raise ValueError(f"window 必须在 1 到 n_q={n_q} 之间（观察窗口是最后 window 个查询），收到 {window} "
                         f"(window out of range)。")


def _check_keep_list(keep, n_layers: int) -> list:
    if isinstance(keep, (str, bytes)) or not hasattr(keep, "__len__") or len(keep) != n_layers:
        raise ValueError(f"keep 必须是每层一个下标数组的序列，共 {n_layers} 个 (one keep set per layer)。")
    return list(keep)


def _check_keep(idx, keys_shape: tuple, layer: int):
    """Kept indices: integers (..., n_kv_heads, k) in range, no repeats within a head."""
    if idx.dtype.kind not in "iu":
        raise TypeError(f"第 {layer} 层的 keep 必须是整数下标，收到 dtype={idx.dtype} (keep must be integers)。")
    n = keys_shape[-2]
    if idx.shape[:-1] != tuple(keys_shape[:-2]) or idx.shape[-1] < 1:
        raise ValueError(f"第 {layer} 层的 keep 的形状应为 {tuple(keys_shape[:-2])} + (k,)（每个键值头一行、k ≥ 1），"
                         f"收到 {tuple(idx.shape)} (keep shape mismatch)。")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"第 {layer} 层的 keep 含有 0 到 {n - 1} 之外的位置 (keep index out of range)。")
    s = np.sort(idx, axis=-1)
    if (s[..., 1:] == s[..., :-1]).any():
        raise ValueError(f"第 {layer} 层的 keep 在同一个头里重复了某个位置 (repeated index in keep)。")
    return idx.astype(np.int64)
