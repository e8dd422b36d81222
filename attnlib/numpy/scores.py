"""Dot-product attention scores (chapters 3 and 4)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays


def attention_scores(q, k, *, scale=True):
    """All query-key dot products at once.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    scale : bool or float
        ``True`` divides by ``sqrt(d_k)`` (keeps the variance near 1 when the
        entries of q and k have unit variance), ``False`` returns raw dot
        products, a positive number multiplies by that number.

    Returns
    -------
    ndarray, shape (..., n_q, n_k)
        ``scores[..., i, j] = scale * q_i . k_j``; not normalised (any real value).
    """
    q, k = as_float_arrays(q=q, k=k)
    _checks.check_qkv(q.shape, k.shape, k.shape)
    factor = _checks.check_scale(scale, q.shape[-1])
    # Scaling q (n_q x d_k) costs far less than scaling the n_q x n_k result.
    return (q * factor) @ np.swapaxes(k, -1, -2)
