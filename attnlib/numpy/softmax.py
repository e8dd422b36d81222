"""Numerically stable softmax with temperature and a boolean mask (chapter 5)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float, as_mask


def softmax(x, axis=-1, *, temperature=1.0, mask=None):
    """Stable softmax of ``x`` along ``axis``.

    Parameters
    ----------
    x : array_like of float, any shape
        Scores. ``-inf`` is allowed (that entry gets weight 0); NaN and ``+inf`` are refused.
    axis : int
        The axis that is normalised.
    temperature : float > 0
        ``softmax(x / temperature)``: larger is flatter, smaller is sharper.
    mask : array_like of bool, optional
        Broadcasts to ``x.shape``; ``True`` = may attend. Masked entries get exactly 0.

    Returns
    -------
    ndarray, same shape and dtype as ``x``
        Non-negative; sums to 1 along ``axis``, except where every entry of a
        slice is masked (or ``-inf``): that slice is all zeros, never NaN.
    """
    x = as_float(x, "x")
    axis = _checks.check_axis(axis, x.ndim)
    t = _checks.check_temperature(temperature)
    if np.isnan(x).any() or np.isposinf(x).any():
        raise ValueError("x 含有 NaN 或 +inf (x contains NaN or +inf)；-inf 可以使用，表示该位置权重为 0。")
    if mask is not None:
        mask = np.broadcast_to(as_mask(mask, x.shape, "x"), x.shape)
    s = x / t  # a fresh array that the in-place steps below may overwrite
    return softmax_(s, axis, mask)


def softmax_(s: np.ndarray, axis: int = -1, mask=None) -> np.ndarray:
    """In-place stable softmax of the float array ``s`` (no input checks); returns ``s``."""
    exp_shifted_(s, mask, axis)
    np.multiply(s, safe_reciprocal(s.sum(axis=axis, keepdims=True)), out=s)
    return s


def exp_shifted_(s: np.ndarray, mask=None, axis: int = -1, bound=None) -> None:
    """Mask, shift and exponentiate ``s`` in place: ``s <- exp(s - row max)``, masked entries 0.

    Softmax is shift-invariant, so subtracting each row's maximum changes no
    result; it only guarantees that ``exp`` never overflows (the largest entry
    becomes ``exp(0) = 1``) and that the row does not underflow to all zeros.
    ``bound`` (optional, shaped like the row maxima) is a known bound on
    ``|row max|``: where it is small enough that neither can happen, that row
    is not shifted, and when no row needs it the max and subtract passes are
    skipped (attention gets such a bound for free from Cauchy-Schwarz).
    Every pass writes into ``s`` itself, so no second score-sized buffer is
    allocated.
    """
    if mask is not None:
        np.copyto(s, -np.inf, where=~mask)
    limit = exp_safe_limit(s.dtype)
    if bound is None or bound.max(initial=0.0) > limit:
        s_max = s.max(axis=axis, keepdims=True, initial=-np.inf)
        s_max[~np.isfinite(s_max)] = 0  # fully masked: keep -inf, so exp gives 0
        if bound is not None:
            # Rows whose bound is small keep shift 0, so that a row's numbers never
            # depend on whether another row of the same tile needed the shift.
            s_max[np.broadcast_to(bound <= limit, s_max.shape)] = 0
        np.subtract(s, s_max, out=s)
    np.exp(s, out=s)


def exp_safe_limit(dtype) -> float:
    """A score bound below which ``exp`` needs no shift: a quarter of ``log(max float)``.

    With every ``|row max| <= L``: exp(max) <= e^L leaves room for summing
    ~e^(3L) such terms without overflow, and exp(max) >= e^-L stays far from
    the denormal range (float32: L = 22.2, float64: L = 177).
    """
    return float(np.log(np.finfo(dtype).max)) / 4


def safe_reciprocal(total: np.ndarray) -> np.ndarray:
    """``1 / total`` where ``total > 0`` and 0 elsewhere, so empty rows stay zero instead of NaN."""
    return np.divide(1, total, out=np.zeros_like(total), where=total > 0)
