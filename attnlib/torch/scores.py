"""Dot-product attention scores and cosine similarity (chapters 3 and 4), torch backend."""

from __future__ import annotations

import torch

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


def cosine_scores(q, k):
    """The cosine of the angle between every query and every key; same contract as ``attnlib.numpy``.

    q : (..., n_q, d_k); k : (..., n_k, d_k); returns (..., n_q, n_k) in [-1, 1].
    A zero query or key raises ``ValueError`` (no direction).
    """
    q, k = as_float_tensors(q=q, k=k)
    shape_k = tuple(k.shape)
    _checks.check_qkv(tuple(q.shape), shape_k, shape_k)
    q_len = torch.linalg.vector_norm(q, dim=-1, keepdim=True)  # (..., n_q, 1)
    k_len = torch.linalg.vector_norm(k, dim=-1, keepdim=True)  # (..., n_k, 1)
    _checks.check_no_zero_vector("q", bool((q_len == 0).any()))
    _checks.check_no_zero_vector("k", bool((k_len == 0).any()))
    return ((q / q_len) @ (k / k_len).mT).clamp(-1.0, 1.0)
