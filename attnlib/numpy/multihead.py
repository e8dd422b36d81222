"""Multi-head attention: h scaled dot-product attentions in parallel subspaces (chapter 9)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .attention import scaled_dot_product_attention


def split_heads(x, n_heads):
    """``(..., n, h * d_head) -> (..., h, n, d_head)``: one slice of the width per head."""
    *lead, n, width = x.shape
    d_head = _checks.check_heads(width, n_heads)
    return np.swapaxes(x.reshape(*lead, n, n_heads, d_head), -2, -3)


def merge_heads(x):
    """``(..., h, n, d_head) -> (..., n, h * d_head)``: the inverse of ``split_heads``."""
    *lead, h, n, d_head = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, n, h * d_head)


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, *, mask=None, causal=False,
                         b_q=None, b_k=None, b_v=None, b_o=None, need_weights=True):
    """Multi-head attention, ``concat(head_1, ..., head_h) @ w_o``.

    Parameters
    ----------
    x_q : array_like of float, shape (..., n_q, d_q)
        Inputs that ask (the decoder side in cross-attention).
    x_kv : array_like of float, shape (..., n_k, d_kv)
        Inputs that are looked up; pass ``x_q`` again for self-attention.
    w_q : (d_q, d_model); w_k, w_v : (d_kv, d_model); w_o : (d_model, d_out)
        Used as ``x @ w`` (the paper's ``X W^Q``); head i uses columns
        ``i * d_head : (i + 1) * d_head`` with ``d_head = d_model / n_heads``.
    n_heads : int
        Must divide ``d_model``.
    mask : array_like of bool, optional
        Broadcasts to ``(..., n_q, n_k)`` (the batch shape of the inputs) and
        is shared by all heads; ``True`` = may attend.
    causal : bool
        Also apply the bottom-right aligned causal mask.
    b_q, b_k, b_v : (d_model,), b_o : (d_out,), optional
        Biases.

    Returns
    -------
    output : ndarray, shape (..., n_q, d_out)
    weights : ndarray, shape (..., n_heads, n_q, n_k), or None if ``need_weights=False``
    """
    x_q, x_kv, w_q, w_k, w_v, w_o = as_float_arrays(x_q=x_q, x_kv=x_kv, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o)
    q = split_heads(project(x_q, "x_q", w_q, "w_q", b_q, "b_q"), n_heads)  # (..., h, n_q, d_head)
    k = split_heads(project(x_kv, "x_kv", w_k, "w_k", b_k, "b_k", w_q.shape[1]), n_heads)
    v = split_heads(project(x_kv, "x_kv", w_v, "w_v", b_v, "b_v", w_q.shape[1]), n_heads)
    if mask is not None:
        batch = _checks.broadcast_batch({"x_q": x_q.shape, "x_kv": x_kv.shape})
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]))[..., None, :, :]  # same for every head
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal, need_weights=need_weights)
    return project(merge_heads(out), "concat(heads)", w_o, "w_o", b_o, "b_o"), weights


def project(x, x_name, w, w_name, b=None, b_name="b", width=None):
    """``x @ w (+ b)`` after checking that the shapes fit; ``width`` pins w's column count."""
    _checks.check_min_ndim(x_name, x.shape)
    _checks.check_matrix(w_name, w.shape, x.shape[-1], width)
    y = x @ w
    if b is None:
        return y
    (b,) = as_float_arrays(**{b_name: b})
    _checks.check_same_dtype({w_name: w.dtype, b_name: b.dtype})
    _checks.check_vector(b_name, b.shape, w.shape[1])
    return y + b
