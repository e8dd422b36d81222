"""Grouped-query attention (chapter 16), torch backend: any device, dtype of the inputs.

Same contract as ``attnlib.numpy.grouped_query_attention``.  With
``need_weights=True`` the queries are viewed as ``(..., h_kv, g, n_q, d_k)``
and each key/value head is broadcast to its group (no copy); with
``need_weights=False`` the work goes to torch's fused kernel,
``F.scaled_dot_product_attention(..., enable_gqa=True)``, which takes the
``h_kv`` key/value heads as they are.
"""

from __future__ import annotations

import torch.nn.functional as F

from .. import _checks
from ._tensors import as_float_tensors, as_mask
from .attention import as_4d, combined_mask, open_empty_rows, scaled_dot_product_attention


def grouped_query_attention(q, k, v, *, mask=None, causal=False, need_weights=True):
    """Attention with ``h`` query heads sharing ``h_kv`` key/value heads; see ``attnlib.numpy.grouped_query_attention``.

    Parameters
    ----------
    q : tensor of float, shape (..., h, n_q, d_k)
    k : tensor of float, shape (..., h_kv, n_k, d_k)
    v : tensor of float, shape (..., h_kv, n_k, d_v)
        ``h_kv`` divides ``h``; query head ``i`` reads key/value head ``i // (h // h_kv)``.
    mask : tensor of bool, optional
        Broadcasts to ``(..., h, n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply the bottom-right aligned ``causal_mask(n_q, n_k)``.
    need_weights : bool
        False takes the fused kernel (``enable_gqa=True``) and returns ``(output, None)``.

    Returns
    -------
    output : tensor, shape (..., h, n_q, d_v)
    weights : tensor, shape (..., h, n_q, n_k), or None
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch, group = _checks.check_groups(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    h, n_q, n_k, h_kv = q.shape[-3], q.shape[-2], k.shape[-2], k.shape[-3]
    if not need_weights:
        return _fused(q, k, v, mask, causal, batch), None
    q_groups = q.reshape(*q.shape[:-3], h_kv, group, n_q, q.shape[-1])  # (..., h_kv, g, n_q, d_k)
    if mask is not None:
        mask = as_mask(mask, batch + (h, n_q, n_k), q.device)
        if mask.dim() >= 3:  # split the head axis into (h_kv, g), or (1, 1) when it broadcasts
            heads = (h_kv, group) if mask.shape[-3] == h else (1, 1)
            mask = mask.reshape(*mask.shape[:-3], *heads, *mask.shape[-2:])
    out, weights = scaled_dot_product_attention(q_groups, k.unsqueeze(-3), v.unsqueeze(-3), mask=mask,
                                                causal=causal)
    return out.reshape(*batch, h, n_q, v.shape[-1]), weights.reshape(*batch, h, n_q, n_k)


def _fused(q, k, v, mask, causal: bool, batch: tuple):
    """torch's kernel with ``enable_gqa=True``, our mask convention and bottom-right causal alignment."""
    h, n_q, n_k = q.shape[-3], q.shape[-2], k.shape[-2]
    simple_causal = causal and mask is None and n_q == n_k  # torch's is_causal aligns top-left
    allowed = None if simple_causal else combined_mask(mask, causal, batch + (h, n_q, n_k), q.device)
    allowed, empty = open_empty_rows(allowed)
    q4 = as_4d(q, batch + (h,), expand=True)  # (B, h, n_q, d_k)
    k4, v4 = (as_4d(t, batch + (t.shape[-3],), expand=True) for t in (k, v))  # (B, h_kv, n_k, d)
    mask4 = None if allowed is None else as_4d(allowed, batch + (h,), expand=False)
    out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask4, is_causal=simple_causal, enable_gqa=True)
    out = out.reshape(*batch, h, n_q, v.shape[-1])
    return out if empty is None else out.masked_fill(empty, 0.0)
