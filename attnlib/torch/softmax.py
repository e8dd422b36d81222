"""Numerically stable softmax with temperature and a boolean mask (chapter 5), torch backend."""

from __future__ import annotations

import torch

from .. import _checks
from ._tensors import as_float, as_mask


def softmax(x, axis=-1, *, temperature=1.0, mask=None):
    """Stable softmax of ``x`` along ``axis``; same contract as ``attnlib.numpy.softmax``.

    Parameters
    ----------
    x : tensor of float, any shape
        Scores; ``-inf`` allowed, NaN and ``+inf`` refused. Device and dtype are kept.
    axis : int
    temperature : float > 0
    mask : tensor of bool, optional
        Broadcasts to ``x.shape``; ``True`` = may attend.

    Returns
    -------
    tensor, same shape, dtype and device as ``x``
        Sums to 1 along ``axis``; a fully masked (or all ``-inf``) slice is all zeros.
    """
    x = as_float(x, "x")
    axis = _checks.check_axis(axis, x.dim())
    t = _checks.check_temperature(temperature)
    if bool(torch.isnan(x).any() | torch.isposinf(x).any()):
        raise ValueError("x 含有 NaN 或 +inf (x contains NaN or +inf)；-inf 可以使用，表示该位置权重为 0。")
    s = x / t
    if mask is not None:
        mask = as_mask(mask, tuple(x.shape), x.device, "x")
        s = s.masked_fill(~mask, float("-inf"))
    return softmax_masked(s, axis, s > float("-inf"))


def softmax_masked(s: torch.Tensor, dim: int, allowed, *, inplace: bool = False) -> torch.Tensor:
    """``torch.softmax`` of scores whose disallowed entries are already ``-inf``.

    ``torch.softmax`` (one fused, stable kernel) returns NaN for a row with no
    allowed entry; such rows are set to exactly zero. ``allowed`` is a boolean
    tensor broadcasting to ``s`` or None.  With ``inplace`` the weights
    overwrite ``s`` (only when no gradient is needed: autograd keeps both).
    """
    w = torch.softmax(s, dim=dim, out=s) if inplace else torch.softmax(s, dim=dim)
    empty = empty_rows(allowed, dim)
    if empty is None:  # only pay for the extra pass when some row really is empty
        return w
    return w.masked_fill_(empty, 0.0) if inplace else w.masked_fill(empty, 0.0)


def empty_rows(allowed, dim: int = -1):
    """Where ``allowed`` (bool or None) has no True along ``dim`` (kept as size 1), or None if nowhere."""
    if allowed is None:
        return None
    empty = ~allowed.any(dim=dim, keepdim=True)
    return empty if bool(empty.any()) else None
