"""Boolean attention masks (chapter 8). Convention everywhere: ``True`` = may attend."""

from __future__ import annotations

import numpy as np

from .. import _checks


def causal_mask(n_q, n_k=None):
    """Causal mask aligned bottom-right.

    Parameters
    ----------
    n_q : int
        Number of queries.
    n_k : int, optional
        Number of keys (default ``n_q``). With ``n_q < n_k`` the queries are the
        *last* ``n_q`` positions, so the last query sees every key, which is
        what decoding with a KV cache needs.

    Returns
    -------
    ndarray of bool, shape (n_q, n_k)
        ``mask[i, j]`` is True iff ``j <= i + (n_k - n_q)``.
    """
    n_k = n_q if n_k is None else n_k
    _checks.check_sizes(n_q=n_q, n_k=n_k)
    return causal_rows(0, n_q, n_q, n_k)


def causal_rows(start: int, stop: int, n_q: int, n_k: int, cols: slice = slice(None)) -> np.ndarray:
    """Rows ``start:stop`` and columns ``cols`` of ``causal_mask(n_q, n_k)``, without building the rest."""
    last_visible = np.arange(start, stop) + (n_k - n_q)  # (rows,)
    return np.arange(n_k)[cols] <= last_visible[:, None]  # (rows, len(cols))


def hide_future_(scores: np.ndarray) -> None:
    """Apply the causal mask in place: ``scores[..., i, j] = -inf`` wherever ``causal_mask`` is False.

    ``scores`` has shape (..., n_q, n_k).  Row by row, so that no n_q x n_k
    boolean mask is built beside the scores: query i sees keys
    ``j <= i + (n_k - n_q)`` and everything right of that is hidden.
    """
    n_q, n_k = scores.shape[-2:]
    for i in range(n_q):
        scores[..., i, max(0, i + n_k - n_q + 1):] = -np.inf


def padding_mask(lengths, n_k):
    """Mask out the padding at the end of each sequence of a batch.

    Parameters
    ----------
    lengths : sequence of int, shape (B,)
        Real length of each sequence; keys ``j >= lengths[b]`` are padding.
    n_k : int
        Padded length.

    Returns
    -------
    ndarray of bool, shape (B, 1, n_k)
        Broadcasts against scores ``(B, n_q, n_k)``; every query of sequence b
        may attend to its first ``lengths[b]`` keys.
    """
    _checks.check_sizes(n_k=n_k)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise TypeError(f"lengths 必须是一维整数序列 (1-D integer lengths)，收到 shape={lengths.shape}, "
                        f"dtype={lengths.dtype}。")
    _checks.check_lengths(lengths.tolist(), n_k)
    return (np.arange(n_k) < lengths[:, None])[:, None, :]


def sliding_window_mask(n, window, *, causal=False, global_tokens=()):
    """Local attention: each query sees keys at most ``window - 1`` positions away, plus global positions.

    Parameters
    ----------
    n : int
        Sequence length (queries and keys).
    window : int >= 1
        Window size in positions, the query's own position included.
    causal : bool
        If True, only the ``window`` most recent positions (``i - window < j <= i``).
    global_tokens : sequence of int
        Positions that attend every key and are attended by every query (the
        Longformer pattern; with ``causal`` still only ``j <= i``).

    Returns
    -------
    ndarray of bool, shape (n, n)
        The dense reference of ``sliding_window_attention`` (chapter 10), which never builds it.
    """
    _checks.check_sizes(n=n)
    window = _checks.check_window(window)
    glob = _checks.check_positions("global_tokens", global_tokens, n)
    offset = np.arange(n)[:, None] - np.arange(n)  # i - j
    mask = (offset >= 0) & (offset < window) if causal else np.abs(offset) < window
    is_global = np.zeros(n, dtype=bool)
    is_global[glob] = True
    mask |= is_global[:, None] | is_global[None, :]
    return mask & (offset >= 0) if causal else mask
