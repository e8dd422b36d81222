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
    """In-place stable softmax of the float array ``s`` (no input checks); returns ``s``.

    ``mask`` (bool, broadcasting to ``s``; ``True`` = may attend) sets the
    masked entries to exactly 0; a slice with nothing left is all zeros.
    """
    exp_shifted_(s, mask, axis)
    np.multiply(s, safe_reciprocal(s.sum(axis=axis, keepdims=True)), out=s)
    return s


def exp_shifted_(s: np.ndarray, mask=None, axis: int = -1) -> None:
    """Mask, shift and exponentiate ``s`` in place: ``s <- exp(s - max)``, masked entries 0.

    Softmax is shift-invariant, so subtracting each slice's maximum changes no
    result; it only guarantees that ``exp`` never overflows (the largest entry
    becomes ``exp(0) = 1``) and that the slice does not underflow to all zeros.
    Every pass writes into ``s`` itself, so no second buffer of its size is
    allocated.
    """
    if mask is not None:
        np.copyto(s, -np.inf, where=~mask)
    s_max = s.max(axis=axis, keepdims=True, initial=-np.inf)
    s_max[~np.isfinite(s_max)] = 0  # a fully masked slice: keep its -inf, so exp gives 0
    np.subtract(s, s_max, out=s)
    np.exp(s, out=s)


def safe_reciprocal(total: np.ndarray) -> np.ndarray:
    """``1 / total`` where ``total > 0`` and 0 elsewhere, so empty rows stay zero instead of NaN."""
    return np.divide(1, total, out=np.zeros_like(total), where=total > 0)
