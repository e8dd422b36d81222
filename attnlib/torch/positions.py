"""Position information (chapter 15): sinusoidal codes, RoPE and ALiBi, torch backend.

``apply_rope`` takes its dtype and device from ``x``.  ``sinusoidal_positions``
and ``alibi_bias`` have no input tensor to take them from: like their NumPy
twins they return float64 on the CPU (exact to float64, whatever the default
dtype), and the caller converts, e.g. ``alibi_bias(4, 4, 2).to(scores)`` or
``sinusoidal_positions(n, d).to(dtype=emb.dtype, device=emb.device)``.
The input checks are the NumPy backend's, so both raise the same errors.
"""

from __future__ import annotations

import torch

from .. import _checks
from ..numpy.positions import (
    _alibi_slopes,
    _check_count,
    _check_even_width,
    _check_finite_positions,
    _check_positions_kind,
    _check_positions_shape,
)
from ._tensors import as_float, kind


def sinusoidal_positions(n, d, *, start=0, base=10000.0):
    """The sinusoidal position codes of positions ``start .. start + n - 1``.

    ``P[p, 2i] = sin(p · base^(-2i/d))``, ``P[p, 2i + 1] = cos(p · base^(-2i/d))``;
    an odd ``d`` drops the last cosine.

    Returns
    -------
    tensor, shape (n, d), float64 on the CPU (convert with ``.to(...)``)
    """
    n, d = _check_count("n", n), _check_count("d", d, 1)
    start = _check_count("start", start)
    base = _checks.check_positive("base", base)
    pos = torch.arange(start, start + n, dtype=torch.float64)[:, None]  # (n, 1)
    rates = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (ceil(d/2),)
    angles = pos * rates  # (n, ceil(d/2))
    codes = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # sin, cos, sin, cos, ...
    return codes[:, :d]


def apply_rope(x, positions=None, *, base=10000.0):
    """Rotate each pair ``(x[..., 2i], x[..., 2i+1])`` by ``p · base^(-2i/d)`` (RoPE).

    ``x`` is ``(..., n, d)`` with ``d`` even; ``positions`` (default ``0 .. n - 1``)
    is ``(n,)`` or ``(..., n)`` broadcasting to ``x.shape[:-1]``.  The angles are
    computed in float64 and the result has the dtype and device of ``x``.

    Returns
    -------
    tensor, shape (..., n, d)
    """
    x = as_float(x, "x")
    _checks.check_min_ndim("x", tuple(x.shape))
    d = _check_even_width(tuple(x.shape))
    base = _checks.check_positive("base", base)
    angle_device = "cpu" if x.device.type == "mps" else x.device  # mps has no float64
    if positions is None:
        pos = torch.arange(x.shape[-2], dtype=torch.float64, device=angle_device)
    else:
        pos = positions if isinstance(positions, torch.Tensor) else torch.as_tensor(positions)
        _check_positions_kind(kind(pos), pos.dtype)
        _check_positions_shape(tuple(pos.shape), tuple(x.shape))
        pos = pos.to(dtype=torch.float64, device=angle_device)
        _check_finite_positions(bool(torch.isfinite(pos).all()))
    rates = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=angle_device) / d)  # (d/2,)
    angles = pos[..., None] * rates  # (..., n, d/2)
    cos = angles.cos().to(dtype=x.dtype, device=x.device)
    sin = angles.sin().to(dtype=x.dtype, device=x.device)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def alibi_bias(n_q, n_k, n_heads):
    """ALiBi's additive bias ``-m_h · |distance|``, shape (n_heads, n_q, n_k), bottom-right aligned.

    The slopes and the treatment of future keys are those of ``attnlib.numpy.alibi_bias``.

    Returns
    -------
    tensor, shape (n_heads, n_q, n_k), float64 on the CPU (convert with ``.to(scores)``)
    """
    n_q, n_k = _check_count("n_q", n_q), _check_count("n_k", n_k)
    n_heads = _check_count("n_heads", n_heads, 1)
    slopes = torch.tensor(_alibi_slopes(n_heads), dtype=torch.float64)  # (n_heads,)
    query_at = torch.arange(n_q) + (n_k - n_q)  # bottom-right aligned
    distance = (query_at[:, None] - torch.arange(n_k)).abs().to(torch.float64)  # (n_q, n_k)
    return -slopes[:, None, None] * distance
