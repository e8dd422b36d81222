"""Dot-product attention scores, and the cosine similarity they are compared with (chapters 3 and 4)."""

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


def cosine_scores(q, k):
    """The cosine of the angle between every query and every key.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)

    Returns
    -------
    ndarray, shape (..., n_q, n_k)
        ``cos[..., i, j] = q_i . k_j / (|q_i| |k_j|)``, in [-1, 1]: the dot
        product once both lengths are divided out, so only directions count.

    Raises
    ------
    ValueError
        A query or key is the zero vector (it has no direction).
    """
    q, k = as_float_arrays(q=q, k=k)
    _checks.check_qkv(q.shape, k.shape, k.shape)
    q_len = np.linalg.norm(q, axis=-1, keepdims=True)  # (..., n_q, 1)
    k_len = np.linalg.norm(k, axis=-1, keepdims=True)  # (..., n_k, 1)
    _checks.check_no_zero_vector("q", bool((q_len == 0).any()))
    _checks.check_no_zero_vector("k", bool((k_len == 0).any()))
    cos = (q / q_len) @ np.swapaxes(k / k_len, -1, -2)  # unit vectors: (..., n_q, n_k)
    return np.clip(cos, -1.0, 1.0, out=cos)  # rounding may overshoot 1 by an ulp
