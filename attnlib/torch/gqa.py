"""Grouped-query attention (chapter 16), torch backend: any device, dtype of the inputs.

Same contract as ``attnlib.numpy.grouped_query_attention``, and the same layout:
the ``g`` query heads of a group are folded into the rows of one matrix,
``q`` viewed as ``(..., h_kv, g·n_q, d_k)`` against ``k`` ``(..., h_kv, n_k, d_k)``,
so every key/value head is used as it is.  (Broadcasting ``k`` as
``(..., h_kv, 1, n_k, d_k)`` against ``(..., h_kv, g, n_q, d_k)`` would not
do: ``torch.matmul`` materialises a broadcast operand, ``g`` copies of the keys.)

With ``need_weights=False`` the work goes to torch's fused kernel, given either
the folded rows or the ``h_kv`` heads as they are with ``enable_gqa=True``; see
:func:`_folds` for which.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import _checks
from ._tensors import as_float_tensors
from .attention import as_4d, combined_mask, fused_attention, open_empty_rows, scaled_dot_product_attention

FOLD_QUERIES = 16  # on the CPU, fold at most this many queries per head into rows (see _folds)


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
        False takes the fused kernel and returns ``(output, None)``.

    Returns
    -------
    output : tensor, shape (..., h, n_q, d_v)
    weights : tensor, shape (..., h, n_q, n_k), or None
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch, _ = _checks.check_groups(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    return grouped_attention(q, k, v, mask, causal, need_weights, batch)


def grouped_attention(q, k, v, mask, causal: bool, need_weights: bool, batch: tuple):
    """:func:`grouped_query_attention` on tensors already checked; ``batch`` from ``_checks.check_groups``.

    The cached decoding step calls it directly: the keys and values of a
    ``KVCache`` were checked when they were appended, and scanning the whole
    cache again at every step would cost as much as the step itself.
    """
    h, n_q, n_k, h_kv = q.shape[-3], q.shape[-2], k.shape[-2], k.shape[-3]
    if not need_weights and not _folds(q.device, n_q):
        return _fused(q, k, v, mask, causal, batch), None
    q_rows = q.reshape(*q.shape[:-3], h_kv, (h // h_kv) * n_q, q.shape[-1])  # (..., h_kv, g·n_q, d_k)
    rows_mask, rows_causal = folded_mask(mask, causal, batch + (h, n_q, n_k), h_kv, q.device)
    if not need_weights:
        out = fused_attention(q_rows, k, v, rows_mask, rows_causal, batch + (h_kv,))
        return out.reshape(*batch, h, n_q, v.shape[-1]), None
    out, weights = scaled_dot_product_attention(q_rows, k, v, mask=rows_mask, causal=rows_causal)
    return out.reshape(*batch, h, n_q, v.shape[-1]), weights.reshape(*batch, h, n_q, n_k)


def _folds(device: torch.device, n_q: int) -> bool:
    """Whether the fused kernel gets the folded rows rather than the heads with ``enable_gqa=True``.

    On CUDA the fused kernels take grouped key/value heads themselves: they keep
    them.  On the CPU, measured in ``bench/bench_gqa.py`` (one thread, a decoding
    step over 4,096 cached tokens, 32 query heads), the kernel with
    ``enable_gqa=True`` took several times as long as the same kernel on the
    folded rows, and barely less for 8 key/value heads than for 32.  With many
    queries (prefill, training) the kernel with ``enable_gqa=True`` was as fast
    or faster, and it keeps its own ``is_causal``, which the folded rows would
    have to replace by an explicit ``g·n_q x n_k`` mask: so only a few queries
    (``n_q <= FOLD_QUERIES``: decoding steps, short chunks) are folded.
    """
    return device.type == "cpu" and n_q <= FOLD_QUERIES


def folded_mask(mask, causal: bool, target: tuple, h_kv: int, device: torch.device):
    """``(mask, causal)`` for the folded rows ``(..., h_kv, g·n_q, n_k)``; see ``attnlib.numpy.gqa.folded_mask``."""
    h, n_q, n_k = target[-3:]
    group = h // h_kv
    if group == 1:
        return mask, causal
    causal = causal and n_q > 1  # one query, bottom-right aligned, sees every key
    if mask is None and not causal:
        return None, False
    mask = combined_mask(mask, causal, target, device)  # broadcasts to (..., h, n_q, n_k)
    lead, heads = tuple(mask.shape[:-3]), (mask.shape[-3] if mask.dim() >= 3 else 1)
    kv = h_kv if heads == h else 1  # a mask without its own heads is the same for every group
    per_head = mask.expand(*lead, heads, n_q, n_k).reshape(*lead, kv, heads // kv, n_q, n_k)
    return per_head.expand(*lead, kv, group, n_q, n_k).reshape(*lead, kv, group * n_q, n_k), False


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
