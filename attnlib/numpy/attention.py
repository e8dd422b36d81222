"""Scaled dot-product attention, ``softmax(q k^T / sqrt(d_k)) v`` (chapter 6).

The function below is the formula, one line per step.  Two habits keep it
honest about memory, and they are part of what it teaches:

* dtype discipline: every constant is a Python float, so float32 inputs stay
  float32 (no silent float64 copy of anything), and q is scaled before the
  product (n_q x d_k multiplications instead of n_q x n_k);
* in-place work: the scores are computed once into a fresh n_q x n_k array,
  and masking, the softmax and the normalisation all overwrite that array,
  so the weights it returns are the only n_q x n_k buffer ever allocated.

With ``need_weights=False`` no n_q x n_k array is needed at all: the output
comes from :func:`attnlib.numpy.flash.tiled_attention`, which computes it
block by block (chapter 10), as the torch twin hands that case to a fused
kernel.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .flash import tiled_attention
from .masks import hide_future_
from .softmax import softmax_


def scaled_dot_product_attention(q, k, v, *, mask=None, causal=False, need_weights=True):
    """Scaled dot-product attention.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
        Leading batch/head dimensions broadcast; all three share one dtype.
    mask : array_like of bool, optional
        Broadcasts to ``(..., n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply ``causal_mask(n_q, n_k)`` (bottom-right aligned).
    need_weights : bool
        If False, the output is computed block by block without ever holding
        the n_q x n_k weights, and ``None`` is returned for them.

    Returns
    -------
    output : ndarray, shape (..., n_q, d_v)
    weights : ndarray, shape (..., n_q, n_k), or None
        Rows sum to 1; a fully masked row has all-zero weights and a zero output.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    if not need_weights:
        return tiled_attention(q, k, v, mask=mask, causal=causal), None
    d_k = q.shape[-1]
    # Q K^T / sqrt(d_k), (..., n_q, n_k): scaling q costs n_q d_k products, not n_q n_k
    scores = (q * (1.0 / math.sqrt(d_k))) @ np.swapaxes(k, -1, -2)
    if causal:
        hide_future_(scores)  # keys after a query's own position: -inf
    weights = softmax_(scores, axis=-1, mask=mask)  # in place: scores become weights
    return weights @ v, weights  # (..., n_q, d_v), (..., n_q, n_k)
