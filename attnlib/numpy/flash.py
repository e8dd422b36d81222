"""Tiled attention with an online softmax: exact attention without the n_q x n_k matrix (chapter 10).

This is the algorithm of FlashAttention (Dao et al., 2022), written in NumPy.
The queries are cut into blocks of rows and the keys into blocks of columns.
One block of queries meets the key blocks one after another and keeps, per
query row, three running quantities instead of a whole row of scores:

* ``m``, the largest score seen so far;
* ``denom``, the sum of ``exp(score - m)`` over the keys seen so far;
* ``acc``, the sum of ``exp(score - m) * v`` over the same keys.

When a new key block raises a row's maximum from ``m`` to ``m'``, everything
accumulated so far is multiplied by ``exp(m - m')``, which is exactly what it
would have been had ``m'`` been used from the start.  After the last block,
``acc / denom`` is ``softmax(scores) @ v`` up to rounding, and at no time does more
than one block of scores exist: the extra memory is O(block), not O(n_q n_k).

Causal attention skips work as well: a query block never looks at the keys
right of its last query's position, and the causal mask is compared only on
the blocks that the diagonal crosses.

FlashAttention's speed-up on a GPU comes from reading and writing the GPU's
high-bandwidth memory less often (the blocks live in on-chip SRAM).  NumPy
controls no such thing: this module shows the algorithm and its memory
saving.  ``scaled_dot_product_attention(..., need_weights=False)`` uses it,
with blocks sized so that one block of scores stays in the CPU's cache.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .masks import causal_rows
from .softmax import safe_reciprocal

#: Default size of one block of scores, in elements (4 MiB in float32): small enough
#: to stay in cache, large enough (>= 256 query rows up to 4096 keys) for fast BLAS calls.
TILE_ELEMENTS = 1 << 20
#: Default number of keys per block.
KEY_BLOCK = 4096
#: Rows whose scores are provably small skip the shift, and blocks made only of them the maximum
#: (see ``rows_with_small_scores``; ``make bench`` shows the gain).
BOUND_SHORTCUT = True
#: Causal attention uses at least this many query blocks by default: a block skips the keys right of
#: its last query, so finer blocks skip more of the hidden half (``make bench`` shows the gain).
CAUSAL_BLOCKS = 8


def flash_attention(q, k, v, *, mask=None, causal=False, block_size=None):
    """Exact scaled dot-product attention, computed block by block with an online softmax.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
        Leading dimensions broadcast; one float dtype.
    mask : array_like of bool, optional
        Broadcasts to ``(..., n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply the bottom-right aligned causal mask.
    block_size : int or (int, int), optional
        Query rows and keys per block (one int: both).  Any positive sizes
        work, dividing n or not.  Default: up to ``KEY_BLOCK`` keys and as
        many query rows as fit ``TILE_ELEMENTS`` scores.

    Returns
    -------
    ndarray, shape (..., n_q, d_v)
        Equal to ``scaled_dot_product_attention(q, k, v, ...)[0]`` up to
        rounding; a fully masked row is zero.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    return tiled_attention(q, k, v, mask=mask, causal=causal, block_size=block_size)


def tiled_attention(q, k, v, *, mask=None, causal=False, block_size=None) -> np.ndarray:
    """:func:`flash_attention` on arrays that are already checked (the output-only path of SDPA)."""
    batch = _checks.broadcast_batch({"q": q.shape, "k": k.shape, "v": v.shape})
    n_q, n_k = q.shape[-2], k.shape[-2]
    rows, cols = block_sizes(block_size, n_q, n_k, math.prod(batch), causal)
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # scale the queries once, not every block of scores
    k_t = np.swapaxes(k, -1, -2)  # (..., d_k, n_k), a view
    small = rows_with_small_scores(q, k, causal) if BOUND_SHORTCUT and mask is None else None  # (..., n_q, 1)
    out = np.empty(batch + (n_q, v.shape[-1]), dtype=q.dtype)  # (..., n_q, d_v)
    for start in range(0, n_q, rows):
        r = slice(start, min(start + rows, n_q))
        stop = min(n_k, max(0, r.stop + n_k - n_q)) if causal else n_k  # keys right of this: hidden from all
        small_rows = None if small is None else small[..., r, :]
        out[..., r, :] = attend_block(q[..., r, :], k_t, v, r, n_q, mask, causal, cols, stop, batch, small_rows)
    return out


def attend_block(q_blk, k_t, v, rows: slice, n_q: int, mask, causal: bool, cols: int, stop: int, batch: tuple,
                 small=None):
    """One block of (scaled) queries against the key blocks it may see (keys ``:stop``), with an online softmax.

    ``q_blk`` (..., r, d_k), ``k_t`` (..., d_k, n_k), ``v`` (..., n_k, d_v); returns the output rows (..., r, d_v).
    ``small`` (..., r, 1), optional: rows whose scores are provably small (see
    :func:`rows_with_small_scores`) keep a shift of 0 instead of their running
    maximum; when every row of the block is small, the maximum is never computed.
    """
    n_k = k_t.shape[-1]
    skip_max = small is not None and bool(small.all())
    m = denom = acc = None  # running max (..., r, 1); sums of exp(s - m) (..., r, 1) and of exp(s - m) v (..., r, d_v)
    for k0 in range(0, stop, cols):
        c = slice(k0, min(k0 + cols, stop))
        s = q_blk @ k_t[..., c]  # (..., r, c): the only block of scores
        hide_(s, rows, c, n_q, n_k, mask, causal)
        if skip_max:  # every score is small: exp needs no shift, so there is nothing to track or rescale
            np.exp(s, out=s)
            m_new = None
        else:
            m_new = s.max(axis=-1, keepdims=True) if m is None else np.maximum(m, s.max(axis=-1, keepdims=True))
            if small is not None:
                m_new = np.where(small, 0.0, m_new)  # a small row keeps shift 0, whatever its neighbours need
            shift = np.where(np.isfinite(m_new), m_new, 0)  # nothing visible yet: exp(-inf) stays 0
            np.exp(np.subtract(s, shift, out=s), out=s)
        if denom is None:  # the first block starts the running sums
            denom, acc = s.sum(axis=-1, keepdims=True), s @ v[..., c, :]
        elif m_new is None:
            denom, acc = denom + s.sum(axis=-1, keepdims=True), acc + s @ v[..., c, :]
        else:  # a later block: what was summed against the old maximum is rescaled to the new one
            rescale = np.exp(m - shift)  # (..., r, 1)
            denom = denom * rescale + s.sum(axis=-1, keepdims=True)
            acc = acc * rescale + s @ v[..., c, :]
        m = m_new
    if acc is None:  # no key is visible to any row of the block (causal, more queries than keys)
        return np.zeros(batch + (q_blk.shape[-2], v.shape[-1]), dtype=q_blk.dtype)
    return acc * safe_reciprocal(denom)  # a row that saw no key stays 0


def rows_with_small_scores(q: np.ndarray, k: np.ndarray, causal: bool) -> np.ndarray:
    """Which query rows can skip the shift: Cauchy-Schwarz bounds every score, ``|q_i . k_j| <= |q_i| |k_j|``.

    ``q`` (scaled) is (..., n_q, d_k), ``k`` (..., n_k, d_k).  Row i's bound uses only the
    keys row i may see (with ``causal``, a running maximum of the key lengths up to its
    last visible key), so what a row computes never depends on keys it cannot see.
    Returns a boolean (..., n_q, 1): True where the bound is at most :func:`exp_safe_limit`.
    Softmax is shift-invariant; the shift only keeps ``exp`` from overflowing and the row
    sums from underflowing, which cannot happen below that bound.
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    q_norm, k_norm = np.linalg.norm(q, axis=-1), np.linalg.norm(k, axis=-1)  # (..., n_q), (..., n_k)
    if causal:
        last = np.arange(n_q) + (n_k - n_q)  # each row's last visible key (< 0: none)
        seen = np.maximum.accumulate(k_norm, axis=-1)[..., np.clip(last, 0, max(n_k - 1, 0))] if n_k else 0.0
        longest = np.where(last >= 0, seen, 0.0)  # (..., n_q)
    else:
        longest = k_norm.max(axis=-1, keepdims=True, initial=0.0)  # (..., 1)
    return (q_norm * longest <= exp_safe_limit(q.dtype))[..., None]


def exp_safe_limit(dtype) -> float:
    """A score bound below which ``exp`` needs no shift: a quarter of ``log(max float)``.

    With every ``|score| <= L``, each ``exp`` lies in ``[e^-L, e^L]``: sums of up to ``e^(2L)`` such
    terms cannot overflow and no row sum is near the denormal range (float32: L = 22.2, float64: L = 177).
    """
    return float(np.log(np.finfo(dtype).max)) / 4


def hide_(s: np.ndarray, rows: slice, cols: slice, n_q: int, n_k: int, mask, causal: bool) -> None:
    """Set to -inf, in place, the scores of block ``s`` (rows x cols) that the mask or causality hide."""
    if mask is not None:
        block = mask[..., rows, :] if mask.shape[-2] != 1 else mask
        block = block[..., cols] if block.shape[-1] != 1 else block
        np.copyto(s, -np.inf, where=~block)
    first_row_sees = rows.start + n_k - n_q  # last key visible to the block's first row
    if causal and cols.stop - 1 > first_row_sees:  # the diagonal crosses this block
        np.copyto(s, -np.inf, where=~causal_rows(rows.start, rows.stop, n_q, n_k, cols))


def block_sizes(block_size, n_q: int, n_k: int, batch_size: int, causal: bool = False) -> tuple[int, int]:
    """``(query rows, keys)`` per block: the caller's, or sized so a block holds ~``TILE_ELEMENTS`` scores.

    With ``causal`` the queries are cut into at least ``CAUSAL_BLOCKS`` blocks (of at least 16 rows).
    """
    if block_size is not None:
        return _checks.check_block_size(block_size)
    cols = max(1, min(n_k, KEY_BLOCK))
    rows = TILE_ELEMENTS // (cols * max(1, batch_size))
    if causal:
        rows = min(rows, -(-n_q // CAUSAL_BLOCKS))  # ceil(n_q / CAUSAL_BLOCKS)
    return max(1, min(n_q, max(16, rows))), cols
