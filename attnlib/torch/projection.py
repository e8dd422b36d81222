"""Input projections (chapter 2), torch backend."""

from __future__ import annotations

from .. import _checks
from ._tensors import as_float_tensors


def qkv_projection(x, w_q, w_k, w_v):
    """``(x @ w_q, x @ w_k, x @ w_v)``; shapes as in ``attnlib.numpy.qkv_projection``.

    x : (..., n, d_model); w_q, w_k : (d_model, d_k); w_v : (d_model, d_v).
    """
    x, w_q, w_k, w_v = as_float_tensors(x=x, w_q=w_q, w_k=w_k, w_v=w_v)
    _checks.check_min_ndim("x", tuple(x.shape))
    d_model = x.shape[-1]
    _checks.check_matrix("w_q", tuple(w_q.shape), d_model)
    _checks.check_matrix("w_k", tuple(w_k.shape), d_model, w_q.shape[1])
    _checks.check_matrix("w_v", tuple(w_v.shape), d_model)
    return x @ w_q, x @ w_k, x @ w_v
