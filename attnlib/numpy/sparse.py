"""Sparse attention: a sliding window with global tokens (chapter 10) and top-k selection (chapter 20).

Both compute exact softmax attention over a subset of the keys without ever
forming the n x n attention scores.  The window's subset is fixed by positions; top-k's
is chosen per query by a cheap index score (DeepSeek-V3.2's lightning
indexer), in the second section of this module.

**Sliding window, O(n (w + g)) time and memory.**  The Longformer pattern:
query i attends only the keys within ``window - 1`` positions of it (only
the earlier ones with ``causal``), plus a handful of *global* positions that
every query attends; and the queries at the global positions attend every
key.  Its mask is ``masks.sliding_window_mask``; exact attention with that
mask is the reference the function here must equal.

What makes it cheaper is never forming the n x n scores.  The queries are cut
into chunks of ``window / 2`` positions; every query of a chunk can only see
keys in a span of ``chunk + 2 (window - 1)`` positions around it (``chunk +
window - 1`` with ``causal``), so each chunk takes one small dense product
against its span and the exact window is then masked inside it.  The global
keys add ``n g`` scores and the global queries ``g n`` more.  One softmax runs
over each query's local and global scores together (a global key inside the
window is counted once).  The work grows like ``n (2.5 window + 2 g) d``
instead of ``n^2 d``, and the memory like ``n (2.5 window + g)``.

**Top-k selection, O(n k) attention scores.**  DeepSeek-V3.2's sparse attention
(DeepSeek-AI, 2025, "DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency with
DeepSeek Sparse Attention") gives each query ``t`` a score for every earlier
key ``s`` from a small, cheap indexer (:func:`lightning_indexer_scores`), keeps
the ``k`` keys with the highest index scores and attends to those alone:
``n k`` attention scores instead of ``n^2``.  The index scores themselves are
still ``n x n`` (fewer, cheaper heads, but every pair), which is why the
indexer's cost keeps growing with ``n``.  Order matters: the causal mask
comes *first*, so a future key is never selected however high its index
score; ties go to the lower index, so the selection is deterministic.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _checks
from ._arrays import as_float, as_float_arrays
from .masks import causal_rows
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


# --------------------------------------------------------------------------- top-k selection (chapter 20)

def topk_sparse_attention(q, k, v, index_scores, top_k, *, causal=True):
    """Each query attends only to its ``top_k`` visible keys of highest index score (exact softmax over those).

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
    index_scores : array_like of float, shape (..., n_q, n_k)
        How much query i wants key j (e.g. :func:`lightning_indexer_scores`); only its order
        within a row matters.  Leading dimensions broadcast with those of q, k, v.
    top_k : int >= 1
        Keys kept per query; a query that sees fewer keys keeps all it sees.
    causal : bool
        Bottom-right aligned causal mask, applied to the index scores *before* the selection.

    Returns
    -------
    ndarray, shape (..., n_q, d_v)
        ``softmax(q k_S^T / sqrt(d_k)) v_S`` over each query's selected keys ``S``: equal to
        ``scaled_dot_product_attention`` with a mask that is True on the selected keys.  Ties in
        the index scores go to the lower key index.  A query that sees no key gets a zero row.

    Only ``n_q x top_k`` attention scores are computed (:func:`gathered_scores`), from the
    selected keys gathered per query, a block of queries at a time (:func:`query_rows`), so
    the memory stays O(n_q top_k) besides the index scores passed in.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    index_scores = as_float(index_scores, "index_scores")  # scanned for NaN block by block below, not n_q x n_k at once
    batch = check_index_scores(q.shape, k.shape, v.shape, index_scores.shape)
    top_k = _checks.check_count("top_k", top_k)
    n_q, n_k = q.shape[-2], k.shape[-2]
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # (..., n_q, d_k), scaled once
    out = np.zeros(batch + (n_q, v.shape[-1]), dtype=q.dtype)  # (..., n_q, d_v)
    k_rows, v_rows, first = batch_rows(k, batch), batch_rows(v, batch), first_rows(batch, n_k)
    rows = query_rows(n_q, n_k, top_k)
    for start in range(0, n_q if n_k else 0, rows):  # no key at all: the rows stay zero
        r = slice(start, min(start + rows, n_q))
        (block,) = as_float_arrays(index_scores=index_scores[..., r, :])  # (..., c, n_k), finite
        chosen, valid = select_top_k(block, top_k, r, n_q, causal)  # (..., c, kk) each
        keys, values = k_rows[first + chosen], v_rows[first + chosen]  # gathered: (..., c, kk, d_k / d_v)
        weights = softmax_(gathered_scores(q[..., r, :], keys), mask=valid)  # (..., c, kk), padding weighs 0
        out[..., r, :] = (weights[..., None, :] @ values)[..., 0, :]  # (..., c, d_v)
    return out


def select_top_k(scores: np.ndarray, top_k: int, rows: slice, n_q: int, causal: bool):
    """The ``top_k`` visible keys of highest score in each row of ``scores`` (..., c, n_k), ties to the lower index.

    Returns ``(chosen, valid)``, both (..., c, min(top_k, n_k)): the chosen key indices in
    ascending order, and which of them are real (a row that sees fewer keys is padded with
    index 0, ``valid`` False).
    """
    n_k = scores.shape[-1]
    kk = min(top_k, n_k)
    visible = causal_rows(rows.start, rows.stop, n_q, n_k) if causal else np.ones((1, n_k), dtype=bool)  # (c, n_k)
    s = np.where(visible, scores, -np.inf)  # the causal mask first: a future key can never be chosen
    kth = np.partition(s, n_k - kk, axis=-1)[..., n_k - kk, None]  # (..., c, 1): each row's kk-th largest
    above = s > kth  # fewer than kk keys beat it ...
    ties = (s == kth) & visible  # ... and the rest are filled from the keys equal to it, lowest index first
    chosen = above | (ties & (np.cumsum(ties, axis=-1) <= kk - above.sum(axis=-1, keepdims=True)))
    # A row that sees fewer than kk keys has kth = -inf: then above = every visible key and no tie is added.
    order = np.argsort(~chosen, axis=-1, kind="stable")[..., :kk]  # the chosen keys first, in index order
    return order, np.take_along_axis(chosen, order, axis=-1)


def batch_rows(x: np.ndarray, batch: tuple) -> np.ndarray:
    """``x`` (..., n_k, d) with its batch broadcast to ``batch`` and flattened: (B n_k, d), row ``b n_k + j``."""
    return np.broadcast_to(x, batch + x.shape[-2:]).reshape(-1, x.shape[-1])  # a copy only if x was broadcast


def first_rows(batch: tuple, n_k: int) -> np.ndarray:
    """Where each batch element's keys start in :func:`batch_rows`: (..., 1, 1), so key j of it is row start + j."""
    return (np.arange(math.prod(batch)) * n_k).reshape(batch + (1, 1))


def gathered_scores(q_rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Scaled queries (..., c, d_k) against their own gathered keys (..., c, kk, d_k): scores (..., c, kk).

    The only attention scores top-k attention computes (``make bench BENCH=topk`` counts them here).
    """
    return (q_rows[..., None, :] @ np.swapaxes(keys, -1, -2))[..., 0, :]


def query_rows(n_q: int, n_k: int, top_k: int) -> int:
    """Queries per block: a block's n_k-wide selection arrays then hold about as many numbers as the
    n_q x top_k scores of all queries, ``rows x n_k ~ n_q x top_k``, which keeps the memory O(n_q top_k)."""
    return max(1, min(n_q, -(-n_q * min(top_k, n_k) // max(n_k, 1))))


def check_index_scores(q_shape: tuple, k_shape: tuple, v_shape: tuple, index_shape: tuple) -> tuple:
    """q, k, v as for attention and index scores (..., n_q, n_k); returns the broadcast batch shape."""
    _checks.check_qkv(q_shape, k_shape, v_shape)
    want = (q_shape[-2], k_shape[-2])
    if len(index_shape) < 2 or tuple(index_shape[-2:]) != want:
        raise ValueError(f"index_scores 的最后两维应为 (n_q, n_k) = {want}：每个查询对每个键一个索引分数，"
                         f"收到 index_scores.shape={tuple(index_shape)} (index scores shape mismatch)。")
    return _checks.broadcast_batch({"q": q_shape, "k": k_shape, "v": v_shape, "index_scores": index_shape})


def lightning_indexer_scores(q_idx, k_idx, w_idx):
    """DeepSeek-V3.2's lightning indexer: ``I[t, s] = sum_j w[t, j] ReLU(q[t, j] . k[s])``.

    Parameters
    ----------
    q_idx : array_like of float, shape (..., n_q, h_idx, d_idx)
        The indexer's queries, ``h_idx`` small heads per position.
    k_idx : array_like of float, shape (..., n_k, d_idx)
        The indexer's keys, one per position, shared by its heads.
    w_idx : array_like of float, shape (..., n_q, h_idx)
        Each query's weight for each indexer head.

    Returns
    -------
    ndarray, shape (..., n_q, n_k)
        The index scores, to pass to :func:`topk_sparse_attention`.

    The paper's equation (1), with no scale factor.  DeepSeek's inference code
    (``inference/model.py``, class ``Indexer``, and its FP8 kernel ``fp8_index``) computes
    the same sum on FP8 numbers (their quantisation scales undo the rounding) with the
    weights multiplied by ``h_idx ** -0.5 * d_idx ** -0.5``: a positive constant, which
    leaves the order of the scores in a row, hence the top-k selection, unchanged.  The
    causal mask is not part of the score: the ``Indexer`` adds it to the scores before its
    ``topk``, as :func:`topk_sparse_attention` applies it before selecting.
    """
    q_idx, k_idx, w_idx = as_float_arrays(q_idx=q_idx, k_idx=k_idx, w_idx=w_idx)
    batch = check_indexer(q_idx.shape, k_idx.shape, w_idx.shape)
    n_q, h_idx, n_k = q_idx.shape[-3], q_idx.shape[-2], k_idx.shape[-2]
    k_t = np.swapaxes(k_idx, -1, -2)  # (..., d_idx, n_k)
    scores = np.zeros(batch + (n_q, n_k), dtype=q_idx.dtype)
    for j in range(h_idx):  # one head at a time: n_q x n_k numbers alive, not h_idx times that
        scores += w_idx[..., :, j, None] * np.maximum(q_idx[..., :, j, :] @ k_t, 0.0)  # w_tj ReLU(q_tj . k_s)
    return scores


def check_indexer(q_shape: tuple, k_shape: tuple, w_shape: tuple) -> tuple:
    """q_idx (..., n_q, h_idx, d_idx), k_idx (..., n_k, d_idx), w_idx (..., n_q, h_idx); returns the batch shape."""
    ok = (len(q_shape) >= 3 and len(k_shape) >= 2 and len(w_shape) >= 2 and q_shape[-1] == k_shape[-1]
          and tuple(w_shape[-2:]) == tuple(q_shape[-3:-1]) and q_shape[-2] >= 1)
    if not ok:
        raise ValueError(f"索引器的形状应为 q_idx (..., n_q, h_idx, d_idx)、k_idx (..., n_k, d_idx)、"
                         f"w_idx (..., n_q, h_idx)，收到 q_idx.shape={tuple(q_shape)}，k_idx.shape={tuple(k_shape)}，"
                         f"w_idx.shape={tuple(w_shape)} (indexer shape mismatch)。")
    return _checks.broadcast_batch({"q_idx": q_shape[:-1], "k_idx": k_shape, "w_idx": w_shape})
