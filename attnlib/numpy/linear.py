"""Linear (kernel) attention: softmax replaced by a feature map, so the product can be reordered (chapter 10).

Softmax attention computes ``softmax(q k^T) v``: the exponential ties every
query to every key, so the n x n scores must exist.  Linear attention replaces
``exp(q_i . k_j)`` by ``phi(q_i) . phi(k_j)`` for a positive feature map
``phi`` (here ``elu(x) + 1``), and then associativity does the rest::

    out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / phi(q_i) . (sum_j phi(k_j))

The two sums (a d x d_v matrix and a d-vector) are computed once, so the cost
is O(n d d_v) instead of O(n^2 d).  With ``causal`` the sums run only up to i:
running (cumulative) sums, still linear in n.  It is a different function from
softmax attention, not an approximation that converges to it: chapter 10
measures how far apart they are.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays


def elu_feature_map(x: np.ndarray) -> np.ndarray:
    """``elu(x) + 1``: ``x + 1`` for ``x > 0``, ``exp(x)`` otherwise; always > 0."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, *, feature_map="elu", causal=False):
    """Linear attention ``phi(Q) (phi(K)^T V)``, normalised row by row.

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
    feature_map : "elu" or callable
        ``phi``, applied to every row of q and k; must give positive numbers.
    causal : bool
        Query i uses only keys ``j <= i + (n_k - n_q)`` (bottom-right aligned, as ``causal_mask``).

    Returns
    -------
    ndarray, shape (..., n_q, d_v)
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    _checks.check_qkv(q.shape, k.shape, v.shape)
    phi = _feature_map(feature_map)
    phi_q, phi_k = phi(q), phi(k)  # (..., n_q, d_k), (..., n_k, d_k)
    if causal:
        return causal_linear(phi_q, phi_k, v)
    kv = np.swapaxes(phi_k, -1, -2) @ v  # (..., d_k, d_v): sum_j phi(k_j)^T v_j
    z = phi_k.sum(axis=-2)  # (..., d_k): sum_j phi(k_j)
    return (phi_q @ kv) / (phi_q @ z[..., None])  # (..., n_q, d_v)


def causal_linear(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal linear attention with running sums over the keys; rows that see no key are 0.

    The running ``sum_{j <= t} phi(k_j)^T v_j`` is an (n_k, d_k, d_v) cumulative sum: memory
    O(n d_k d_v), time O(n d_k d_v), still linear in n.
    """
    n_q, n_k = phi_q.shape[-2], phi_k.shape[-2]
    kv = np.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], axis=-3)  # (..., n_k, d_k, d_v)
    z = np.cumsum(phi_k, axis=-2)  # (..., n_k, d_k)
    last = np.arange(n_q) + (n_k - n_q)  # last key each query sees (may be < 0)
    seen = last >= 0
    idx = np.clip(last, 0, max(n_k - 1, 0))
    num = np.einsum("...id,...ide->...ie", phi_q, kv[..., idx, :, :])  # (..., n_q, d_v)
    den = np.einsum("...id,...id->...i", phi_q, z[..., idx, :])[..., None]  # (..., n_q, 1)
    return np.where(seen[:, None], num / np.where(seen[:, None], den, 1.0), 0.0)


def _feature_map(feature_map):
    if feature_map == "elu":
        return elu_feature_map
    if callable(feature_map):
        return feature_map
    raise ValueError(f"feature_map 必须是 \"elu\" 或一个函数 (must be 'elu' or a callable)，收到 {feature_map!r}。")
