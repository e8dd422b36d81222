"""Grouped-query attention (chapter 16): several query heads share one key/value head.

Multi-head attention gives each of its ``h`` query heads its own keys and
values.  Grouped-query attention (GQA) keeps ``h`` query heads but only
``h_kv`` key/value heads, ``h_kv`` dividing ``h``: the query heads form
``h_kv`` groups of ``g = h / h_kv`` neighbours, and query head ``i`` reads
key/value head ``i // g``.  ``h_kv = h`` is multi-head attention again,
``h_kv = 1`` is multi-query attention (MQA).  Each head's attention is the
usual formula::

    out_i = softmax(q_i K_{i//g}^T / sqrt(d_k)) V_{i//g}

The keys and values are never copied ``g`` times.  The ``g`` query heads of a
group are folded into the rows of one matrix: ``q`` is viewed as
``(..., h_kv, g·n_q, d_k)`` against ``k`` ``(..., h_kv, n_k, d_k)``, so each
key/value head meets its whole group in one matrix product and is read once
(a decoding step, ``n_q = 1``, becomes a ``g x d_k`` by ``d_k x n_k`` product
instead of ``g`` matrix-vector products over the same keys).  Row ``r`` of a
group is query ``r % n_q``: the rows of one group share their queries' key mask.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .attention import scaled_dot_product_attention
from .flash import tiled_attention
from .masks import causal_mask


def grouped_query_attention(q, k, v, *, mask=None, causal=False, need_weights=True):
    """Attention with ``h`` query heads sharing ``h_kv`` key/value heads (GQA; MQA when ``h_kv = 1``).

    Parameters
    ----------
    q : array_like of float, shape (..., h, n_q, d_k)
    k : array_like of float, shape (..., h_kv, n_k, d_k)
    v : array_like of float, shape (..., h_kv, n_k, d_v)
        ``h_kv`` divides ``h``; query head ``i`` reads key/value head ``i // (h // h_kv)``
        (contiguous groups, as ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``).
        Leading batch dimensions broadcast; one dtype.
    mask : array_like of bool, optional
        Broadcasts to ``(..., h, n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply ``causal_mask(n_q, n_k)`` (bottom-right aligned).
    need_weights : bool
        If False, the output is computed block by block and ``None`` is returned for the weights.

    Returns
    -------
    output : ndarray, shape (..., h, n_q, d_v)
    weights : ndarray, shape (..., h, n_q, n_k), or None
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch, _ = _checks.check_groups(q.shape, k.shape, v.shape)
    return grouped_attention(q, k, v, mask, causal, need_weights, batch)


def grouped_attention(q, k, v, mask, causal: bool, need_weights: bool, batch: tuple):
    """:func:`grouped_query_attention` on arrays already checked; ``batch`` from ``_checks.check_groups``.

    The cached decoding step calls it directly: the keys and values of a
    ``KVCache`` were checked when they were appended, and scanning the whole
    cache again at every step would cost as much as the step itself.
    """
    h, n_q, n_k, h_kv = q.shape[-3], q.shape[-2], k.shape[-2], k.shape[-3]
    q_rows = q.reshape(q.shape[:-3] + (h_kv, (h // h_kv) * n_q, q.shape[-1]))  # (..., h_kv, g·n_q, d_k)
    mask, causal = folded_mask(mask, causal, batch + (h, n_q, n_k), h_kv)
    if need_weights:
        out, weights = scaled_dot_product_attention(q_rows, k, v, mask=mask, causal=causal)  # k, v as they are
        weights = weights.reshape(batch + (h, n_q, n_k))
    else:
        out, weights = tiled_attention(q_rows, k, v, mask=mask, causal=causal), None  # block by block (chapter 10)
    return out.reshape(batch + (h, n_q, v.shape[-1])), weights  # rows back to heads: (..., h, n_q, d_v)


def folded_mask(mask, causal: bool, target: tuple, h_kv: int):
    """``(mask, causal)`` for the folded rows ``(..., h_kv, g·n_q, n_k)``, given for ``target`` ``(..., h, n_q, n_k)``.

    With one query head per group (``g = 1``) nothing is folded and both pass through.
    Otherwise the causal mask cannot be applied to the folded rows as they are
    (row ``r`` of a group is query ``r % n_q``), so it joins the mask, which the
    ``g`` heads of a group stack row-wise; a single query (``n_q = 1``, bottom-right
    aligned) sees every key and needs neither.  Only the mask is copied, never k or v.
    """
    h, n_q, n_k = target[-3:]
    group = h // h_kv
    if group == 1:
        return (None if mask is None else as_mask(mask, target)), causal
    causal = causal and n_q > 1
    if mask is None and not causal:
        return None, False
    mask = as_mask(True if mask is None else mask, target)
    if causal:
        mask = mask & causal_mask(n_q, n_k)  # (..., n_q, n_k)
    lead, heads = mask.shape[:-3], (mask.shape[-3] if mask.ndim >= 3 else 1)
    kv = h_kv if heads == h else 1  # a mask without its own heads is the same for every group
    per_head = np.broadcast_to(mask, lead + (heads, n_q, n_k)).reshape(lead + (kv, heads // kv, n_q, n_k))
    return np.broadcast_to(per_head, lead + (kv, group, n_q, n_k)).reshape(lead + (kv, group * n_q, n_k)), False
