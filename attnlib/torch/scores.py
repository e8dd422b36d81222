"""Dot-product attention scores (chapters 3 and 4), torch backend."""

from __future__ import annotations

from .. import _checks
from ._tensors import as_float_tensors


def attention_scores(q, k, *, scale=True):
    """``scale * q @ k^T``, shape (..., n_q, n_k); ``scale=True`` means ``1 / sqrt(d_k)``.

    q : (..., n_q, d_k); k : (..., n_k, d_k).
    """
    q, k = as_float_tensors(q=q, k=k)
    shape_k = tuple(k.shape)
    _checks.check_qkv(tuple(q.shape), shape_k, shape_k)
    factor = _checks.check_scale(scale, q.shape[-1])
    return (q * factor) @ k.mT  # scaling q is cheaper than scaling the scores
