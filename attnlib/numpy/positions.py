"""Position information (chapter 15): sinusoidal codes, RoPE and ALiBi, NumPy backend.

Attention without a mask is blind to order (chapter 6: permuting the tokens
permutes the outputs); a causal mask already lets a model count how many tokens
it sees (chapter 15).  Three ways to tell it where each token sits:

* ``sinusoidal_positions``: a table of codes added to the token embeddings;
* ``apply_rope``: rotate each query and key by an angle proportional to its
  position, so that a score depends only on the offset between the two;
* ``alibi_bias``: an additive bias on the scores, minus a slope per head times
  the distance from the query to the key.

The checks of the inputs live here as small private functions; the torch twin
(``attnlib.torch.positions``) calls the same ones, so both backends raise the
same errors with the same messages.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks

# --------------------------------------------------------------------------- shared checks (both backends)


def _check_count(name: str, value, minimum: int = 0) -> int:
    """``value`` must be an int (not a bool) of at least ``minimum``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < minimum:
        raise ValueError(f"{name} 必须是不小于 {minimum} 的整数 ({name} must be an int >= {minimum})，"
                         f"收到 {value!r}。")
    return int(value)


def _check_even_width(shape: tuple) -> int:
    """RoPE rotates pairs of features: the last dimension must be even."""
    d = shape[-1]
    if d % 2:
        raise ValueError(f"RoPE 把特征两两配对旋转，最后一维 d 必须是偶数 (d must be even)，"
                         f"收到 x.shape={shape}，d={d}。")
    return d


def _check_positions_shape(p_shape: tuple, x_shape: tuple) -> None:
    """``positions`` has one entry per row of ``x``: shape ``(..., n)`` broadcasting to ``x.shape[:-1]``."""
    rows = tuple(x_shape[:-1])
    ok = len(p_shape) >= 1 and p_shape[-1] == x_shape[-2]
    if ok:
        try:
            ok = _checks.broadcast_shapes(tuple(p_shape), rows) == rows
        except ValueError:
            ok = False
    if not ok:
        raise ValueError(f"positions 要为 x 的每个位置给出一个位置编号：形状应为 (n,)（或能广播到 {rows} 的 "
                         f"(..., n)），n = {x_shape[-2]}；收到 positions.shape={tuple(p_shape)}，"
                         f"x.shape={tuple(x_shape)} (positions length mismatch)。")


def _check_positions_kind(kind: str, dtype) -> None:
    """Positions are real numbers (integers or floats), not booleans or complex numbers."""
    if kind not in "iuf":
        raise TypeError(f"positions 必须是整数或实数数组 (positions must be integers or reals)，"
                        f"收到 dtype={dtype}。")


def _check_finite_positions(all_finite: bool) -> None:
    if not all_finite:
        raise ValueError("positions 里有 NaN 或无穷大 (positions must be finite)：位置必须是有限的数。")


def _alibi_slopes(n_heads: int) -> list:
    """The ALiBi paper's head slopes (Press et al., 2022), largest first.

    For ``h`` a power of two: ``2^(-8 i / h)``, i = 1 .. h.  Otherwise, with
    ``c`` the largest power of two below ``h``: the ``c`` slopes of ``c`` heads,
    then the first ``h - c`` of the odd-numbered slopes of ``2c`` heads
    (``2^(-8 (2j + 1) / (2c))``, j = 0, 1, ...), which interleave with them.
    """
    c = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = [2.0 ** (-8.0 * i / c) for i in range(1, c + 1)]
    slopes += [2.0 ** (-8.0 * (2 * j + 1) / (2 * c)) for j in range(n_heads - c)]
    return slopes


# --------------------------------------------------------------------------- sinusoidal codes


def sinusoidal_positions(n, d, *, start=0, base=10000.0):
    """The sinusoidal position codes of positions ``start .. start + n - 1``.

    ``P[p, 2i] = sin(p · base^(-2i/d))``, ``P[p, 2i + 1] = cos(p · base^(-2i/d))``:
    column pair ``i`` turns at the frequency ``base^(-2i/d)``, from 1 radian per
    position (i = 0) down to about ``1 / base``.

    Parameters
    ----------
    n : int
        Number of positions (rows), >= 0.
    d : int
        Width of a code, >= 1.  An odd ``d`` keeps the sine of the last pair and
        drops its cosine (the formula above, cut at column ``d - 1``).
    start : int
        The first position (a decoder with a cache starts at ``cache.length``).
    base : float
        The base of the frequencies, > 0.

    Returns
    -------
    ndarray, shape (n, d), float64
    """
    n, d = _check_count("n", n), _check_count("d", d, 1)
    start = _check_count("start", start)
    base = _checks.check_positive("base", base)
    pos = np.arange(start, start + n, dtype=np.float64)[:, None]  # (n, 1)
    rates = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (ceil(d/2),): base^(-2i/d)
    angles = pos * rates  # (n, ceil(d/2))
    codes = np.empty((n, 2 * rates.size))
    codes[:, 0::2] = np.sin(angles)  # even columns: sine
    codes[:, 1::2] = np.cos(angles)  # odd columns: cosine
    return codes[:, :d]


# --------------------------------------------------------------------------- RoPE


def apply_rope(x, positions=None, *, base=10000.0):
    """Rotary position embedding: rotate each pair ``(x[..., 2i], x[..., 2i+1])`` by ``p · base^(-2i/d)``.

    For a row at position ``p`` and pair ``i`` with angle ``θ = p · base^(-2i/d)``::

        out[2i]     = x[2i] cos θ - x[2i+1] sin θ
        out[2i + 1] = x[2i] sin θ + x[2i+1] cos θ

    Rotating queries and keys this way makes ``rope(q, m) · rope(k, n)`` depend
    on ``m - n`` only, and keeps every vector's length.

    Parameters
    ----------
    x : array, shape (..., n, d)
        Queries or keys; ``d`` must be even.  Float32 stays float32.
    positions : array of reals, shape (n,) or (..., n) broadcasting to x.shape[:-1], optional
        The position of each row.  Default ``0 .. n - 1``.  With a KV cache the
        new token's position is the number of tokens already cached, not 0.
    base : float
        The base of the frequencies, > 0.

    Returns
    -------
    ndarray, shape (..., n, d), the dtype of ``x``
    """
    x = np.asarray(x)
    _checks.check_float_kind("x", x.dtype.kind, x.dtype)
    _checks.check_min_ndim("x", x.shape)
    d = _check_even_width(x.shape)
    base = _checks.check_positive("base", base)
    if positions is None:
        pos = np.arange(x.shape[-2], dtype=np.float64)  # (n,)
    else:
        pos = np.asarray(positions)
        _check_positions_kind(pos.dtype.kind, pos.dtype)
        _check_positions_shape(pos.shape, x.shape)
        pos = pos.astype(np.float64)
        _check_finite_positions(bool(np.isfinite(pos).all()))
    rates = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    angles = pos[..., None] * rates  # (..., n, d/2), in float64
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., n, d/2) each: the two members of every pair
    out = np.empty(np.broadcast_shapes(x.shape, angles.shape[:-1] + (d,)), dtype=x.dtype)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


# --------------------------------------------------------------------------- ALiBi


def alibi_bias(n_q, n_k, n_heads):
    """ALiBi's additive score bias ``-m_h · |distance|``, shape (n_heads, n_q, n_k).

    Query ``i`` of ``n_q`` sits at key position ``n_k - n_q + i`` (bottom-right
    aligned, as ``causal_mask``); its distance to key ``j`` is that position
    minus ``j``.  Head ``h`` has the slope ``m_h`` of the ALiBi paper:
    ``2^(-8h/H)`` for h = 1 .. H when ``H`` is a power of two (1/2, 1/4, ...,
    1/256 for 8 heads); other head counts take the paper's interleaved slopes.

    ALiBi is used with a causal mask: only the keys at or before the query are
    ALiBi proper.  A key after the query (the future) gets the same
    ``-m_h · |distance|``, finite and never above 0, so the causal mask decides
    about the future keys, and forgetting the mask does not favour them.

    Parameters
    ----------
    n_q, n_k : int
        Numbers of queries and keys, >= 0.
    n_heads : int
        Number of heads, >= 1.

    Returns
    -------
    ndarray, shape (n_heads, n_q, n_k), float64
        Add it to the scaled scores, before the softmax.
    """
    n_q, n_k = _check_count("n_q", n_q), _check_count("n_k", n_k)
    n_heads = _check_count("n_heads", n_heads, 1)
    slopes = np.array(_alibi_slopes(n_heads))  # (n_heads,)
    query_at = np.arange(n_q) + (n_k - n_q)  # (n_q,): bottom-right aligned
    distance = query_at[:, None] - np.arange(n_k)  # (n_q, n_k): > 0 for past keys
    return -slopes[:, None, None] * np.abs(distance)  # (n_heads, n_q, n_k)
