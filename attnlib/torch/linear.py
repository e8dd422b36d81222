"""Linear (kernel) attention (chapter 10), torch backend: same formulas, any device, autograd."""

from __future__ import annotations

import torch

from .. import _checks
from ._tensors import as_float_tensors


def elu_feature_map(x):
    """``elu(x) + 1``, always > 0."""
    return torch.nn.functional.elu(x) + 1.0


def linear_attention(q, k, v, *, feature_map="elu", causal=False):
    """``phi(Q) (phi(K)^T V)`` normalised by ``phi(Q) sum_j phi(k_j)``; see ``attnlib.numpy.linear_attention``.

    q : (..., n_q, d_k); k : (..., n_k, d_k); v : (..., n_k, d_v); returns (..., n_q, d_v).
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    phi = _feature_map(feature_map)
    phi_q, phi_k = phi(q), phi(k)
    if causal:
        return causal_linear(phi_q, phi_k, v)
    kv = phi_k.mT @ v  # (..., d_k, d_v)
    z = phi_k.sum(dim=-2)  # (..., d_k)
    return (phi_q @ kv) / (phi_q @ z[..., None])


def causal_linear(phi_q, phi_k, v):
    """Running sums over the keys (bottom-right aligned); rows that see no key are 0."""
    n_q, n_k = phi_q.shape[-2], phi_k.shape[-2]
    kv = torch.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], dim=-3)  # (..., n_k, d_k, d_v)
    z = torch.cumsum(phi_k, dim=-2)  # (..., n_k, d_k)
    last = torch.arange(n_q, device=phi_q.device) + (n_k - n_q)
    seen = (last >= 0)[:, None]  # (n_q, 1)
    idx = last.clamp(0, max(n_k - 1, 0))
    num = torch.einsum("...id,...ide->...ie", phi_q, kv[..., idx, :, :])
    den = torch.einsum("...id,...id->...i", phi_q, z[..., idx, :])[..., None]
    return torch.where(seen, num / torch.where(seen, den, torch.ones_like(den)), torch.zeros_like(num))


def _feature_map(feature_map):
    if feature_map == "elu":
        return elu_feature_map
    if callable(feature_map):
        return feature_map
    raise ValueError(f"feature_map 必须是 \"elu\" 或一个函数 (must be 'elu' or a callable)，收到 {feature_map!r}。")
