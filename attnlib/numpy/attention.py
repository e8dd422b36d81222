"""Scaled dot-product attention, ``softmax(q k^T / sqrt(d_k)) v`` (chapter 6).

The textbook version materialises the scores and then makes four more
passes over them (shift, exp, sum, divide), each allocating a new
n_q x n_k array.  This one gives the same numbers with less work:

* dtype discipline: every constant is a Python float, so float32 inputs stay
  float32 (no silent float64 copies), and q is scaled before the product
  (n_q x d_k multiplications instead of n_q x n_k);
* in-place work on query tiles: the scores of a few hundred queries are
  computed straight into their slice of the returned weights (or into one
  reused tile when ``need_weights=False``) and exponentiated there while the
  tile is still in cache, so memory stays one n_q x n_k buffer at most;
* no max pass when it cannot matter: Cauchy-Schwarz bounds every score by
  ``|q_i| max_j |k_j|``; when that bound is small, exp cannot overflow and
  the shift by the row maximum is skipped (softmax is shift-invariant);
* causal tiles stop at the last key their last query sees: the keys to the
  right of it are masked for every row of the tile, so they are neither
  multiplied nor exponentiated (close to half the work when n_q = n_k);
* the softmax denominator comes out of the second matrix product: a column
  of ones appended to v gives ``sum_j exp(s_ij)`` as one more output column,
  so the weights are normalised once, after the product, or never when only
  the output is needed.

What is left is one ``exp`` per score, which NumPy computes on one core; on
some CPUs that pass alone costs as much as both matrix products (``make bench``
prints it as the floor).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .masks import causal_rows
from .softmax import exp_shifted_, safe_reciprocal

# Scores per tile: 1M elements (4 MiB in float32) stay in a shared L3 cache, and with
# n_k <= 4096 a tile has >= 256 query rows, enough for BLAS to run at full speed.
# ``make bench`` measured 1 << 18 (64-256 rows) as 0.1-0.45x of the products slower.
TILE_ELEMENTS = 1 << 20
CAUSAL_TILES = 8


def scaled_dot_product_attention(q, k, v, *, mask=None, causal=False, need_weights=True):
    """Scaled dot-product attention.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
        Leading batch/head dimensions broadcast; all three share one dtype.
    mask : array_like of bool, optional
        Broadcasts to ``(..., n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply ``causal_mask(n_q, n_k)`` (bottom-right aligned).
    need_weights : bool
        If False, the weights are never normalised and ``None`` is returned
        for them; only the output (n_q x d_v) is divided by the row sums.

    Returns
    -------
    output : ndarray, shape (..., n_q, d_v)
    weights : ndarray, shape (..., n_q, n_k), or None
        Rows sum to 1; a fully masked row has all-zero weights and a zero output.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    n_q, n_k = q.shape[-2], k.shape[-2]
    if mask is not None:
        mask = as_mask(mask, batch + (n_q, n_k))
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # Python float: float32 stays float32
    k_t = np.swapaxes(k, -1, -2)  # (..., d_k, n_k), a view
    v_ones = np.concatenate([v, np.ones(v.shape[:-1] + (1,), v.dtype)], axis=-1)  # (..., n_k, d_v + 1)
    # Only without a user mask: a bound over keys a row may not see would let them decide its shift.
    bound = None if mask is not None else score_bound(q, k, causal)  # (..., n_q, 1)
    out = np.empty(batch + (n_q, v.shape[-1]), dtype=q.dtype)  # (..., n_q, d_v)
    weights = np.empty(batch + (n_q, n_k), dtype=q.dtype) if need_weights else None
    step = tile_rows(n_q, n_k, math.prod(batch), causal)
    tile = None if need_weights else np.empty(batch + (step, n_k), dtype=q.dtype)
    for start in range(0, n_q, step):
        rows = slice(start, min(start + step, n_q))
        kv = visible_keys(rows, n_q, n_k) if causal else n_k  # keys >= kv: masked in every row of the tile
        if need_weights:
            weights[..., rows, kv:] = 0
            s = weights[..., rows, :kv]
        else:
            s = tile[..., : rows.stop - start, :kv]
        np.matmul(q[..., rows, :], k_t[..., :kv], out=s)  # (..., rows, kv) scaled scores
        if causal:
            hide_future_(s, rows, n_q, n_k)
        row_bound = None if bound is None else bound[..., rows, :]
        softmax_output_(s, v_ones[..., :kv, :], out[..., rows, :], tile_mask(mask, rows, kv), row_bound, need_weights)
    return out, weights


def softmax_output_(s, v_ones, out, mask, bound, normalise: bool) -> None:
    """Turn one tile of scores into outputs, in place.

    ``s`` (..., rows, kv) holds scaled scores, ``v_ones`` (..., kv, d_v + 1) the
    values with a column of ones.  Writes ``softmax(s) @ v`` into ``out``
    (..., rows, d_v); with ``normalise`` also leaves ``softmax(s)`` in ``s``.
    """
    exp_shifted_(s, mask, bound=bound)
    summed = s @ v_ones  # (..., rows, d_v + 1): unnormalised output | row sums
    recip = safe_reciprocal(summed[..., -1:])  # 0 for a fully masked row
    np.multiply(summed[..., :-1], recip, out=out)
    if normalise:
        np.multiply(s, recip, out=s)


def score_bound(q: np.ndarray, k: np.ndarray, causal: bool) -> np.ndarray:
    """Cauchy-Schwarz: ``|q_i . k_j| <= |q_i| max_j |k_j|`` over the keys row i sees, shape (..., n_q, 1).

    With ``causal`` the maximum runs only over the visible keys ``j <= i + n_k - n_q``
    (a running maximum), so later keys never influence an earlier row.
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    k_norm = np.sqrt(np.einsum("...jd,...jd->...j", k, k))  # (..., n_k)
    q_norm = np.sqrt(np.einsum("...id,...id->...i", q, q))  # (..., n_q)
    if not causal:
        return (q_norm * k_norm.max(axis=-1, initial=0)[..., None])[..., None]
    last = np.arange(n_q) + (n_k - n_q)  # last visible key of each row
    seen = np.maximum.accumulate(k_norm, axis=-1)[..., np.clip(last, 0, max(n_k - 1, 0))] if n_k else 0
    return (q_norm * np.where(last >= 0, seen, 0))[..., None]


def tile_rows(n_q: int, n_k: int, batch_size: int, causal: bool = False) -> int:
    """How many query rows one tile holds: about ``TILE_ELEMENTS`` scores, at least 16 rows.

    Causal attention cuts the queries into at least ``CAUSAL_TILES`` tiles: the
    keys right of a tile's last query are skipped, so finer tiles skip more of
    the masked half (8 tiles skip 7/16 of all scores; ``make bench`` measured
    4 and 16 tiles slower at n = 1024 to 4096).
    """
    rows = TILE_ELEMENTS // max(1, n_k * batch_size)
    if causal:
        rows = min(rows, -(-n_q // CAUSAL_TILES))  # ceil(n_q / CAUSAL_TILES)
    return max(1, min(n_q, max(16, rows)))


def visible_keys(rows: slice, n_q: int, n_k: int) -> int:
    """Under the causal mask, how many leading keys the last of ``rows`` sees (0 to n_k).

    Every row of the tile sees at most these keys, so the rest are never
    multiplied or exponentiated: with n_q = n_k that skips almost half the work.
    """
    return min(n_k, max(0, rows.stop + n_k - n_q))


def tile_mask(mask, rows: slice, width: int):
    """The user's boolean mask for query rows ``rows`` and keys ``:width`` (or None)."""
    if mask is not None and mask.ndim >= 2 and mask.shape[-2] != 1:
        mask = mask[..., rows, :]
    if mask is not None and mask.shape[-1] != 1:
        mask = mask[..., :width]
    return mask


def hide_future_(s: np.ndarray, rows: slice, n_q: int, n_k: int) -> None:
    """Causal mask, in place: scores ``s`` (..., rows, kv) of keys a query may not see become -inf.

    Keys ``:lo`` are visible to every row of the tile, so only the block of
    columns ``lo:kv`` near the diagonal is compared, not the whole tile.
    """
    lo = min(s.shape[-1], max(0, rows.start + n_k - n_q + 1))
    near = causal_rows(rows.start, rows.stop, n_q, n_k, slice(lo, s.shape[-1]))  # (rows, kv - lo)
    np.copyto(s[..., lo:], -np.inf, where=~near)
