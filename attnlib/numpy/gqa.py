"""Grouped-query attention (chapter 16): several query heads share one key/value head.

Multi-head attention gives each of its ``h`` query heads its own keys and
values.  Grouped-query attention (GQA) keeps ``h`` query heads but only
``h_kv`` key/value heads, ``h_kv`` dividing ``h``: the query heads form
``h_kv`` groups of ``g = h / h_kv`` neighbours, and query head ``i`` reads
key/value head ``i // g``.  ``h_kv = h`` is multi-head attention again,
``h_kv = 1`` is multi-query attention (MQA).  Each head's attention is the
usual formula::

    out_i = softmax(q_i K_{i//g}^T / sqrt(d_k)) V_{i//g}

The keys and values are never copied ``g`` times: the queries are viewed as
``(..., h_kv, g, n_q, d_k)`` and the keys as ``(..., h_kv, 1, n_k, d_k)``, so
broadcasting hands one key/value head to the ``g`` query heads of its group.
"""

from __future__ import annotations

from .. import _checks
from ._arrays import as_float_arrays, as_mask
from .attention import scaled_dot_product_attention


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
    batch, group = _checks.check_groups(q.shape, k.shape, v.shape)
    h, n_q, n_k, h_kv = q.shape[-3], q.shape[-2], k.shape[-2], k.shape[-3]
    q_groups = q.reshape(q.shape[:-3] + (h_kv, group, n_q, q.shape[-1]))  # (..., h_kv, g, n_q, d_k), a view
    k_shared = k[..., None, :, :]  # (..., h_kv, 1, n_k, d_k): one head for the g queries of its group
    v_shared = v[..., None, :, :]  # (..., h_kv, 1, n_k, d_v)
    if mask is not None:
        mask = _grouped_mask(mask, batch + (h, n_q, n_k), h_kv, group)
    out, weights = scaled_dot_product_attention(q_groups, k_shared, v_shared, mask=mask, causal=causal,
                                                need_weights=need_weights)
    out = out.reshape(batch + (h, n_q, v.shape[-1]))  # groups back to heads: (..., h, n_q, d_v)
    return out, None if weights is None else weights.reshape(batch + (h, n_q, n_k))


def _grouped_mask(mask, target: tuple, h_kv: int, group: int):
    """A mask broadcasting to ``(..., h, n_q, n_k)``, its head axis split into ``(h_kv, g)``."""
    mask = as_mask(mask, target)
    if mask.ndim < 3:  # (n_q, n_k) or (n_k,): the same for every head
        return mask
    heads = (h_kv, group) if mask.shape[-3] == target[-3] else (1, 1)
    return mask.reshape(mask.shape[:-3] + heads + mask.shape[-2:])
