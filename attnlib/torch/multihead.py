"""Multi-head attention (chapter 9), torch backend."""

from __future__ import annotations

import torch

from .. import _checks
from ._tensors import as_float_tensors, as_mask
from .attention import scaled_dot_product_attention


def split_heads(x, n_heads):
    """``(..., n, h * d_head) -> (..., h, n, d_head)``."""
    *lead, n, width = x.shape
    d_head = _checks.check_heads(width, n_heads)
    return x.reshape(*lead, n, n_heads, d_head).transpose(-2, -3)


def merge_heads(x):
    """``(..., h, n, d_head) -> (..., n, h * d_head)``."""
    *lead, h, n, d_head = x.shape
    return x.transpose(-2, -3).reshape(*lead, n, h * d_head)


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, *, mask=None, causal=False,
                         b_q=None, b_k=None, b_v=None, b_o=None, need_weights=True):
    """Multi-head attention; same contract as ``attnlib.numpy.multi_head_attention``.

    x_q : (..., n_q, d_q); x_kv : (..., n_k, d_kv); w_q : (d_q, d_model);
    w_k, w_v : (d_kv, d_model); w_o : (d_model, d_out); optional biases.
    The mask broadcasts to ``(..., n_q, n_k)`` and is shared by the heads.

    Returns output ``(..., n_q, d_out)`` and weights ``(..., n_heads, n_q, n_k)`` (or None).
    """
    x_q, x_kv, w_q, w_k, w_v, w_o = as_float_tensors(x_q=x_q, x_kv=x_kv, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o)
    q = split_heads(project(x_q, "x_q", w_q, "w_q", b_q, "b_q"), n_heads)  # (..., h, n_q, d_head)
    k = split_heads(project(x_kv, "x_kv", w_k, "w_k", b_k, "b_k", w_q.shape[1]), n_heads)
    v = split_heads(project(x_kv, "x_kv", w_v, "w_v", b_v, "b_v", w_q.shape[1]), n_heads)
    if mask is not None:
        batch = _checks.broadcast_batch({"x_q": tuple(x_q.shape), "x_kv": tuple(x_kv.shape)})
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]), q.device)[..., None, :, :]
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal, need_weights=need_weights)
    return project(merge_heads(out), "concat(heads)", w_o, "w_o", b_o, "b_o"), weights


def project(x, x_name, w, w_name, b=None, b_name="b", width=None) -> torch.Tensor:
    """``x @ w (+ b)`` after checking that the shapes fit; ``width`` pins w's column count."""
    _checks.check_min_ndim(x_name, tuple(x.shape))
    _checks.check_matrix(w_name, tuple(w.shape), x.shape[-1], width)
    y = x @ w
    if b is None:
        return y
    (b,) = as_float_tensors(**{b_name: b})
    _checks.check_same_dtype({w_name: w.dtype, b_name: b.dtype})
    _checks.check_vector(b_name, tuple(b.shape), w.shape[1])
    return y + b.to(y.device)
