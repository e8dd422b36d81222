"""Sliding-window (local) attention with a few global tokens, in O(n (w + g)) time and memory (chapter 10).

The Longformer pattern: query i attends only the keys within ``window - 1``
positions of it (only the earlier ones with ``causal``), plus a handful of
*global* positions that every query attends; and the queries at the global
positions attend every key.  Its mask is ``masks.sliding_window_mask``; exact
attention with that mask is the reference the function here must equal.

What makes it cheaper is never forming the n x n scores.  The queries are cut
into chunks of ``window`` positions; every query of a chunk can only see keys
in a span of ``3 window - 2`` positions around the chunk (``2 window - 1`` with
``causal``), so each chunk takes one small dense product against its span and
the exact window is then masked inside it.  The global keys add ``n g``
scores and the global queries ``g n`` more.  One softmax runs over each query's
local and global scores together (a global key inside the window is counted
once).  The work grows like ``n (3 window + 2 g) d`` instead of ``n^2 d``, and
the memory like ``n (3 window + g)``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays
from .softmax import softmax_


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
    n_chunks = -(-n // window)  # ceil(n / window)
    q_chunks = chunks(q, window, n_chunks)  # (..., C, w, d_k)
    local = q_chunks @ np.swapaxes(spans(k, window, n_chunks, causal), -1, -2)  # (..., C, w, span)
    allowed = span_mask(n, window, n_chunks, causal, glob)  # (C, w, span)
    if glob.size:
        glob_scores = q_chunks @ np.swapaxes(k[..., glob, :], -1, -2)[..., None, :, :]  # (..., C, w, g)
        position = np.arange(n_chunks * window).reshape(n_chunks, window, 1)  # query positions (C, w, 1)
        glob_allowed = glob <= position if causal else np.ones((n_chunks, window, glob.size), dtype=bool)
        scores = np.concatenate([local, glob_scores], axis=-1)  # (..., C, w, span + g)
        allowed = np.concatenate([allowed, glob_allowed], axis=-1)
    else:
        scores = local
    weights = softmax_(scores, mask=allowed)  # in place: (..., C, w, span [+ g])
    span = allowed.shape[-1] - glob.size
    local_weights = np.ascontiguousarray(weights[..., :span])  # BLAS needs contiguous operands
    out = local_weights @ spans(v, window, n_chunks, causal)  # (..., C, w, d_v)
    if glob.size:
        out = out + weights[..., span:] @ v[..., None, glob, :]
    out = out.reshape(out.shape[:-3] + (n_chunks * window, v.shape[-1]))[..., :n, :]  # (..., n, d_v)
    return out if out.shape[:-2] == batch else np.broadcast_to(out, batch + out.shape[-2:]).copy()


def chunks(x: np.ndarray, window: int, n_chunks: int) -> np.ndarray:
    """``x`` (..., n, d) zero-padded to ``n_chunks * window`` rows and cut into chunks: (..., C, w, d)."""
    pad = [(0, 0)] * (x.ndim - 2) + [(0, n_chunks * window - x.shape[-2]), (0, 0)]
    return np.pad(x, pad).reshape(x.shape[:-2] + (n_chunks, window, x.shape[-1]))


def spans(x: np.ndarray, window: int, n_chunks: int, causal: bool) -> np.ndarray:
    """For chunk c, the rows of ``x`` at ``c w - (w - 1) ...``, as far as its last query may look: (..., C, span, d).

    ``span`` is ``3 w - 2`` (``2 w - 1`` with ``causal``); rows outside ``0 .. n-1`` are zero padding.
    """
    span = 2 * window - 1 if causal else 3 * window - 2
    before = window - 1
    after = n_chunks * window - x.shape[-2] + span - window - before
    padded = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(before, after), (0, 0)])  # (..., C w + span - w, d)
    view = np.lib.stride_tricks.sliding_window_view(padded, span, axis=-2)[..., ::window, :, :]  # (..., C, d, span)
    return np.ascontiguousarray(np.swapaxes(view, -1, -2))  # (..., C, span, d): O(n d) copy, fast products


def span_mask(n: int, window: int, n_chunks: int, causal: bool, glob: np.ndarray) -> np.ndarray:
    """Which (query, span key) pairs are inside the window, inside the sequence and not global keys: (C, w, span)."""
    span = 2 * window - 1 if causal else 3 * window - 2
    # query a of a chunk minus key b of its span is a + (window - 1) - b, the same for every chunk
    offset = np.arange(window)[:, None] + (window - 1) - np.arange(span)  # (w, span): i - j
    near = (offset >= 0) & (offset < window) if causal else np.abs(offset) < window
    query = np.arange(n_chunks * window).reshape(n_chunks, window, 1)  # (C, w, 1)
    key = (np.arange(n_chunks) * window - (window - 1))[:, None, None] + np.arange(span)  # (C, 1, span)
    return near & (key >= 0) & (key < n) & ~np.isin(key, glob) & (query < n)
