"""Sliding-window (local) attention with a few global tokens, in O(n (w + g)) time and memory (chapter 10).

The Longformer pattern: query i attends only the keys within ``window - 1``
positions of it (only the earlier ones with ``causal``), plus a handful of
*global* positions that every query attends; and the queries at the global
positions attend every key.  Its mask is ``masks.sliding_window_mask``; exact
attention with that mask is the reference the function here must equal.

What makes it cheaper is never forming the n x n scores.  The queries are cut
into chunks of ``window / 2`` positions; every query of a chunk can only see
keys in a span of ``chunk + 2 (window - 1)`` positions around it (``chunk +
window - 1`` with ``causal``), so each chunk takes one small dense product
against its span and the exact window is then masked inside it.  The global
keys add ``n g`` scores and the global queries ``g n`` more.  One softmax runs
over each query's local and global scores together (a global key inside the
window is counted once).  The work grows like ``n (2.5 window + 2 g) d``
instead of ``n^2 d``, and the memory like ``n (2.5 window + g)``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays
from .softmax import safe_reciprocal, softmax_

#: Chunks hold ``window // CHUNK_DIVISOR`` queries (see :func:`chunk_size`).
CHUNK_DIVISOR = 2  # measured: about 10% faster than chunks of a whole window (n = 16384, window 256)


def sliding_window_attention(q, k, v, window, *, global_tokens=(), causal=False):
    """Local attention over a window plus global tokens, without the n x n matrix.

    Parameters
    ----------
    q, k : array_like of float, shape (..., n, d_k)
    v : array_like of float, shape (..., n, d_v)
        Self-attention: queries, keys and values of the same n positions.
    window : int >= 1
        Query i attends key j when ``|i - j| < window`` (``0 <= i - j < window`` with ``causal``).
    global_tokens : sequence of int
        Positions that attend, and are attended by, every position (with
        ``causal``: every earlier position).
    causal : bool
        Only keys at or before the query's position.

    Returns
    -------
    ndarray, shape (..., n, d_v)
        Equal to ``scaled_dot_product_attention(q, k, v, mask=sliding_window_mask(n, window, ...))[0]``.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    n = _checks.check_self_attention(q.shape, k.shape)
    window = _checks.check_window(window)
    glob = _checks.check_positions("global_tokens", global_tokens, n)
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # (..., n, d_k), scaled once
    out = local_and_global(q, k, v, window, glob, causal, batch)  # (..., n, d_v)
    if glob.size:
        # The global queries see every (earlier) key: ordinary attention for those g rows.
        rows = np.broadcast_to(q, batch + q.shape[-2:])[..., glob, :]  # (..., g, d_k)
        scores = rows @ np.swapaxes(k, -1, -2)  # (..., g, n)
        allowed = np.arange(n) <= glob[:, None] if causal else None  # (g, n)
        out[..., glob, :] = softmax_(scores, mask=allowed) @ v
    return out


def local_and_global(q, k, v, window: int, glob: np.ndarray, causal: bool, batch: tuple) -> np.ndarray:
    """Every query against the keys of its window and the global keys, one softmax over both: (..., n, d_v)."""
    n = q.shape[-2]
    size = chunk_size(window)
    n_chunks = -(-n // size)  # ceil(n / size)
    q_chunks = chunks(q, size, n_chunks)  # (..., C, c, d_k)
    local = q_chunks @ np.swapaxes(spans(k, window, size, n_chunks, causal), -1, -2)  # (..., C, c, span)
    np.copyto(local, -np.inf, where=span_hidden(n, window, size, n_chunks, causal, tuple(glob)))
    parts = [local]  # the scores of each query: its span, then the global keys
    if glob.size:
        far = q_chunks @ np.swapaxes(k[..., glob, :], -1, -2)[..., None, :, :]  # (..., C, c, g)
        if causal:
            position = np.arange(n_chunks * size).reshape(n_chunks, size, 1)  # (C, c, 1)
            np.copyto(far, -np.inf, where=glob > position)
        parts.append(far)
    # One softmax over the parts together, without joining them into one array: shift by the common
    # maximum, exponentiate in place, and divide the output (c x d_v) rather than the weights by the total.
    shift = np.maximum.reduce([part.max(axis=-1, keepdims=True) for part in parts])  # (..., C, c, 1)
    shift[~np.isfinite(shift)] = 0  # a query that sees nothing (padding past n): exp(-inf) = 0, not nan
    for part in parts:
        np.exp(np.subtract(part, shift, out=part), out=part)
    total = sum(part.sum(axis=-1, keepdims=True) for part in parts)  # (..., C, c, 1)
    out = local @ spans(v, window, size, n_chunks, causal)  # (..., C, c, d_v)
    if glob.size:
        out += parts[1] @ v[..., None, glob, :]
    out *= safe_reciprocal(total)
    out = out.reshape(out.shape[:-3] + (n_chunks * size, v.shape[-1]))[..., :n, :]  # (..., n, d_v)
    return out if out.shape[:-2] == batch else np.broadcast_to(out, batch + out.shape[-2:]).copy()


def chunk_size(window: int) -> int:
    """Queries per chunk: smaller chunks waste fewer scores on keys outside the window (the span is
    ``chunk + 2 (window - 1)``), larger ones make bigger, faster matrix products."""
    return max(1, window // CHUNK_DIVISOR)


def chunks(x: np.ndarray, size: int, n_chunks: int) -> np.ndarray:
    """``x`` (..., n, d) zero-padded to ``n_chunks * size`` rows and cut into chunks: (..., C, size, d)."""
    pad = [(0, 0)] * (x.ndim - 2) + [(0, n_chunks * size - x.shape[-2]), (0, 0)]
    return np.pad(x, pad).reshape(x.shape[:-2] + (n_chunks, size, x.shape[-1]))


def span_length(window: int, size: int, causal: bool) -> int:
    """Keys a chunk of ``size`` queries may see: ``window - 1`` before it, and after it too unless causal."""
    return size + (window - 1) + (0 if causal else window - 1)


def spans(x: np.ndarray, window: int, size: int, n_chunks: int, causal: bool) -> np.ndarray:
    """For chunk c, the rows of ``x`` from ``c size - (window - 1)`` on that its queries may see: (..., C, span, d).

    Rows outside ``0 .. n-1`` are zero padding (hidden by :func:`span_hidden`).
    """
    span = span_length(window, size, causal)
    before = window - 1
    after = (n_chunks - 1) * size + span - before - x.shape[-2]
    padded = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(before, max(after, 0)), (0, 0)])
    view = np.lib.stride_tricks.sliding_window_view(padded, span, axis=-2)[..., ::size, :, :]  # (..., C, d, span)
    return np.ascontiguousarray(np.swapaxes(view, -1, -2))  # (..., C, span, d): O(n d) copy, fast products


@functools.lru_cache(maxsize=4)  # a few MB each at n = 16384
def span_hidden(n: int, window: int, size: int, n_chunks: int, causal: bool, glob: tuple) -> np.ndarray:
    """Which (query, span key) pairs are *not* attended: outside the window or the sequence, or a global key
    (scored with the global keys instead): (C, size, span), read-only.

    It depends on the sizes only, so it is computed once per shape and kept (the last few shapes).
    """
    span = span_length(window, size, causal)
    # query a of a chunk minus key b of its span is a + (window - 1) - b, the same for every chunk
    offset = np.arange(size)[:, None] + (window - 1) - np.arange(span)  # (size, span): i - j
    near = (offset >= 0) & (offset < window) if causal else np.abs(offset) < window
    query = np.arange(n_chunks * size).reshape(n_chunks, size, 1)  # (C, size, 1)
    key = (np.arange(n_chunks) * size - (window - 1))[:, None, None] + np.arange(span)  # (C, 1, span)
    hidden = ~(near & (key >= 0) & (key < n) & ~np.isin(key, glob) & (query < n))
    hidden.flags.writeable = False
    return hidden
