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

The backward pass (chapter 18) is tiled the same way, as in FlashAttention-2
(Dao, 2023, Algorithm 2).  The forward keeps one number per query row, its
log-sum-exp ``L_i = m_i + log(denom_i)``; from it any block of weights is
recomputed exactly, ``P_ij = exp(S_ij - L_i)``, and with
``D_i = rowsum(dO_i * O_i)`` the softmax backward of a block needs nothing
else from the other blocks.  :func:`flash_attention_backward` therefore holds
one block of scores at a time, never the n_q x n_k weights that
:func:`backward_from_weights` (the same formulas, untiled) needs.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float, as_float_arrays, as_mask
from .masks import causal_rows
from .scaling import softmax_vjp
from .softmax import safe_reciprocal

#: Default size of one block of scores, in elements (4 MiB in float32): small enough
#: to stay in cache, large enough (>= 256 query rows up to 4096 keys) for fast BLAS calls.
TILE_ELEMENTS = 1 << 20
#: Default number of keys per block.
KEY_BLOCK = 4096
#: Default block of the backward pass, in elements: it holds three arrays of a block's size (P, dP, dS)
#: where the forward holds about two, so half the forward's (``make bench BENCH=backward`` measures it).
BACKWARD_TILE_ELEMENTS = TILE_ELEMENTS // 2
#: Rows whose scores are provably small skip the shift, and blocks made only of them the maximum
#: (see ``rows_with_small_scores``; ``make bench`` shows the gain).
BOUND_SHORTCUT = True
#: Causal attention uses at least this many query blocks by default: a block skips the keys right of
#: its last query, so finer blocks skip more of the hidden half (``make bench`` shows the gain).
CAUSAL_BLOCKS = 8


def flash_attention(q, k, v, *, mask=None, causal=False, block_size=None, return_lse=False):
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
    return_lse : bool
        Also return each query row's log-sum-exp, what the backward pass needs.

    Returns
    -------
    out : ndarray, shape (..., n_q, d_v)
        Equal to ``scaled_dot_product_attention(q, k, v, ...)[0]`` up to
        rounding; a fully masked row is zero.
    lse : ndarray, shape (..., n_q), only with ``return_lse=True``
        ``log sum_j exp(s_ij)`` over the keys row i may see (``s`` the scaled
        scores); ``-inf`` on a fully masked row.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    return tiled_attention(q, k, v, mask=mask, causal=causal, block_size=block_size, return_lse=return_lse)


def tiled_attention(q, k, v, *, mask=None, causal=False, block_size=None, return_lse=False):
    """:func:`flash_attention` on arrays that are already checked (the output-only path of SDPA)."""
    batch = _checks.broadcast_batch({"q": q.shape, "k": k.shape, "v": v.shape})
    n_q, n_k = q.shape[-2], k.shape[-2]
    rows, cols = block_sizes(block_size, n_q, n_k, math.prod(batch), causal)
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # scale the queries once, not every block of scores
    k_t = np.swapaxes(k, -1, -2)  # (..., d_k, n_k), a view
    small = rows_with_small_scores(q, k, causal) if BOUND_SHORTCUT and mask is None else None  # (..., n_q, 1)
    out = np.empty(batch + (n_q, v.shape[-1]), dtype=q.dtype)  # (..., n_q, d_v)
    lse = np.empty(batch + (n_q,), dtype=q.dtype)  # (..., n_q)
    for start in range(0, n_q, rows):
        r = slice(start, min(start + rows, n_q))
        stop = min(n_k, max(0, r.stop + n_k - n_q)) if causal else n_k  # keys right of this: hidden from all
        small_rows = None if small is None else small[..., r, :]
        out[..., r, :], lse[..., r] = attend_block(q[..., r, :], k_t, v, r, n_q, mask, causal, cols, stop, batch,
                                                   small_rows)
    return (out, lse) if return_lse else out


def attend_block(q_blk, k_t, v, rows: slice, n_q: int, mask, causal: bool, cols: int, stop: int, batch: tuple,
                 small=None):
    """One block of (scaled) queries against the key blocks it may see (keys ``:stop``), with an online softmax.

    ``q_blk`` (..., r, d_k), ``k_t`` (..., d_k, n_k), ``v`` (..., n_k, d_v); returns the output rows (..., r, d_v)
    and their log-sum-exp (..., r), ``shift + log(denom)``.
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
        r = q_blk.shape[-2]
        return np.zeros(batch + (r, v.shape[-1]), dtype=q_blk.dtype), np.full(batch + (r,), -np.inf, q_blk.dtype)
    with np.errstate(divide="ignore"):  # a row that saw no key: log 0 = -inf
        lse = np.log(denom) + (0.0 if m is None else np.where(np.isfinite(m), m, 0.0))  # the last shift used
    return acc * safe_reciprocal(denom), lse[..., 0]  # a row that saw no key stays 0


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


def block_sizes(block_size, n_q: int, n_k: int, batch_size: int, causal: bool = False,
                tile: int | None = None) -> tuple[int, int]:
    """``(query rows, keys)`` per block: the caller's, or sized so a block holds ~``tile`` scores.

    ``tile`` defaults to ``TILE_ELEMENTS`` (read at each call: tests change it).

    With ``causal`` the queries are cut into at least ``CAUSAL_BLOCKS`` blocks (of at least 16 rows).
    """
    if block_size is not None:
        return _checks.check_block_size(block_size)
    cols = max(1, min(n_k, KEY_BLOCK))
    rows = (TILE_ELEMENTS if tile is None else tile) // (cols * max(1, batch_size))
    if causal:
        rows = min(rows, -(-n_q // CAUSAL_BLOCKS))  # ceil(n_q / CAUSAL_BLOCKS)
    return max(1, min(n_q, max(16, rows))), cols


# --------------------------------------------------------------------------- the backward pass (chapter 18)

def flash_attention_backward(q, k, v, out, lse, d_out, *, mask=None, causal=False, block_size=None):
    """The gradients of :func:`flash_attention`, block by block, from the row statistics the forward kept.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
        The forward's inputs; leading dimensions broadcast.
    out : array_like of float, shape (..., n_q, d_v)
    lse : array_like of float, shape (..., n_q)
        The forward's output and log-sum-exp (``flash_attention(..., return_lse=True)``);
        ``...`` the broadcast batch shape.  ``lse`` is ``-inf`` on a fully masked row.
    d_out : array_like of float, shape (..., n_q, d_v)
        The gradient of the loss with respect to ``out``.
    mask, causal
        As in the forward.
    block_size : int or (int, int), optional
        Query rows and keys per block (one int: both), any positive sizes.  Default: up to
        ``KEY_BLOCK`` keys and as many query rows as fit ``BACKWARD_TILE_ELEMENTS`` scores, so
        while n_k <= KEY_BLOCK (4096) a block is a strip of rows spanning every key: its number of elements,
        not its shape, stays the same as n grows.  Pass square tiles (``block_size=(128, 128)``)
        for blocks whose shape does not depend on n.

    Returns
    -------
    dq, dk, dv : ndarray, the shapes of q, k and v
        A fully masked row contributes zero gradients (never NaN).
    """
    q, k, v, out, d_out = as_float_arrays(q=q, k=k, v=v, out=out, d_out=d_out)
    lse = as_float(lse, "lse")
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    _checks.check_same_dtype({"q": q.dtype, "lse": lse.dtype})
    check_backward_inputs(batch + (q.shape[-2], v.shape[-1]), out.shape, d_out.shape, lse.shape,
                          bool(np.isnan(lse).any() or (lse == np.inf).any()))
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    return tiled_backward(q, k, v, out, lse, d_out, mask=mask, causal=causal, block_size=block_size)


def tiled_backward(q, k, v, out, lse, d_out, *, mask=None, causal=False, block_size=None):
    """:func:`flash_attention_backward` on checked arrays.

    Key blocks outside, query blocks inside, as in FlashAttention-2: a key block's
    ``dK`` and ``dV`` are complete when its inner loop ends; ``dQ`` sums over the key blocks.
    """
    batch = _checks.broadcast_batch({"q": q.shape, "k": k.shape, "v": v.shape})
    n_q, n_k = q.shape[-2], k.shape[-2]
    rows, cols = block_sizes(block_size, n_q, n_k, math.prod(batch), causal, tile=BACKWARD_TILE_ELEMENTS)
    scale = 1.0 / math.sqrt(q.shape[-1])
    q_shape, q = q.shape, np.broadcast_to(q, batch + q.shape[-2:])  # a view: every block of scores has all of batch
    q_scaled = q * scale  # the scores use scaled queries, as in the forward
    delta = np.sum(d_out * out, axis=-1, keepdims=True)  # D = rowsum(dO * O): (..., n_q, 1)
    shift = np.where(np.isfinite(lse), lse, 0.0)[..., None]  # L, and 0 where a row sees no key: (..., n_q, 1)
    dq = np.zeros(batch + q.shape[-2:], dtype=q.dtype)  # (..., n_q, d_k), summed over the key blocks
    dk = np.zeros(batch + k.shape[-2:], dtype=q.dtype)  # (..., n_k, d_k)
    dv = np.zeros(batch + v.shape[-2:], dtype=q.dtype)  # (..., n_k, d_v)
    for k0 in range(0, n_k, cols):
        c = slice(k0, min(k0 + cols, n_k))
        for r0 in query_blocks(c, rows, n_q, n_k, causal):  # every query block that sees key block c
            r = slice(r0, min(r0 + rows, n_q))
            p = recompute_weights(q_scaled[..., r, :], k[..., c, :], shift[..., r, :], r, c, n_q, n_k, mask, causal)
            dq_r, dk_rc, dv_rc = block_gradients(q[..., r, :], k[..., c, :], v[..., c, :], p, d_out[..., r, :],
                                                 delta[..., r, :], scale)
            dq[..., r, :] += dq_r
            dk[..., c, :] += dk_rc
            dv[..., c, :] += dv_rc
    return sum_to(dq, q_shape), sum_to(dk, k.shape), sum_to(dv, v.shape)


def recompute_weights(q_blk, k_blk, shift, rows: slice, cols: slice, n_q: int, n_k: int, mask, causal: bool):
    """One block of attention weights from its scores and each row's log-sum-exp: ``P = exp(S - L)``.

    ``q_blk`` (..., r, d_k) scaled, ``k_blk`` (..., c, d_k), ``shift`` (..., r, 1) the rows' L;
    returns (..., r, c), exactly the softmax weights of these rows (a hidden score gives 0).
    """
    s = q_blk @ np.swapaxes(k_blk, -1, -2)  # (..., r, c): the only block of scores
    hide_(s, rows, cols, n_q, n_k, mask, causal)
    return np.exp(np.subtract(s, shift, out=s), out=s)  # in place: still the only block of scores


def block_gradients(q_blk, k_blk, v_blk, p, d_out_blk, delta, scale: float):
    """What one block of weights sends back to its queries, keys and values (the formulas of the backward pass).

    ``q_blk`` (..., r, d_k), ``k_blk`` (..., c, d_k), ``v_blk`` (..., c, d_v), ``p`` (..., r, c) the
    weights, ``d_out_blk`` (..., r, d_v), ``delta`` (..., r, 1) the rows' ``D = rowsum(dO * O)``
    (None: computed from ``p`` and ``dP``); ``scale`` is ``1 / sqrt(d_k)``.
    Returns ``(dq, dk, dv)``, shapes (..., r, d_k), (..., c, d_k), (..., c, d_v).
    """
    dv = np.swapaxes(p, -1, -2) @ d_out_blk  # dV = P^T dO: (..., c, d_v)
    dp = d_out_blk @ np.swapaxes(v_blk, -1, -2)  # dP = dO V^T: (..., r, c)
    ds = softmax_vjp(p, dp, row_dots=delta)  # dS = P * (dP - D): (..., r, c)
    dq = (ds @ k_blk) * scale  # dQ = dS K / sqrt(d_k): (..., r, d_k)
    dk = np.swapaxes(ds, -1, -2) @ (q_blk * scale)  # dK = dS^T Q / sqrt(d_k): (..., c, d_k)
    return dq, dk, dv


def backward_from_weights(q, k, v, weights, out, d_out):
    """The same gradients in one block: from the stored n_q x n_k weights, as autograd keeps them.

    ``weights`` (..., n_q, n_k) and ``out`` (..., n_q, d_v) as returned by
    ``scaled_dot_product_attention`` (masks and causality are already zeros in
    the weights); returns ``(dq, dk, dv)`` with the shapes of q, k and v.
    """
    delta = np.sum(d_out * out, axis=-1, keepdims=True)  # D = rowsum(dO * O): (..., n_q, 1)
    dq, dk, dv = block_gradients(q, k, v, weights, d_out, delta, 1.0 / math.sqrt(q.shape[-1]))
    return sum_to(dq, q.shape), sum_to(dk, k.shape), sum_to(dv, v.shape)


def query_blocks(cols: slice, rows: int, n_q: int, n_k: int, causal: bool) -> range:
    """Starts of the query blocks that see some key of block ``cols``: with ``causal``, none before the first
    row whose last visible key (``i + n_k - n_q``) reaches ``cols.start``."""
    first = max(0, cols.start - (n_k - n_q)) if causal else 0
    return range(first // rows * rows, n_q, rows)


def sum_to(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """A gradient summed back to an input's ``shape``, over the leading dimensions that broadcasting stretched."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


def check_backward_inputs(expected: tuple, out_shape: tuple, d_out_shape: tuple, lse_shape: tuple,
                          lse_bad: bool) -> None:
    """``out`` and ``d_out`` have the forward output's shape ``expected``, ``lse`` one entry per row of it.

    ``lse`` may be ``-inf`` (a fully masked row), never NaN or ``+inf``.
    """
    _checks.check_same_shape({"out": out_shape, "d_out": d_out_shape, "forward output": expected})
    if tuple(lse_shape) != expected[:-1]:
        raise ValueError(f"lse 的形状应为 {expected[:-1]}（每个查询行一个数），收到 {tuple(lse_shape)} "
                         f"(lse must have shape out.shape[:-1])。")
    if lse_bad:
        raise ValueError("lse 含有 NaN 或 +inf：它应当是前向传播返回的每行 log-sum-exp，只有整行被掩码时为 -inf "
                         "(lse must come from flash_attention(..., return_lse=True))。")
