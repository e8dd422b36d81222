"""Input projections: the same ``x`` seen through three learned matrices (chapter 2)."""

from __future__ import annotations

from .. import _checks
from ._arrays import as_float_arrays


def qkv_projection(x, w_q, w_k, w_v):
    """Project the inputs into queries, keys and values.

    Parameters
    ----------
    x : array_like of float, shape (..., n, d_model)
    w_q, w_k : array_like of float, shape (d_model, d_k)
    w_v : array_like of float, shape (d_model, d_v)

    Returns
    -------
    q, k : ndarray, shape (..., n, d_k)
    v : ndarray, shape (..., n, d_v)
        ``q = x @ w_q`` and so on: one linear map per role, applied to every row of ``x``.
    """
    x, w_q, w_k, w_v = as_float_arrays(x=x, w_q=w_q, w_k=w_k, w_v=w_v)
    _checks.check_min_ndim("x", x.shape)
    d_model = x.shape[-1]
    _checks.check_matrix("w_q", w_q.shape, d_model)
    _checks.check_matrix("w_k", w_k.shape, d_model, w_q.shape[1])
    _checks.check_matrix("w_v", w_v.shape, d_model)
    return x @ w_q, x @ w_k, x @ w_v
