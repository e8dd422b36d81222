"""Compressing the key/value cache (chapter 23), torch backend: quantization and eviction.

The same names, signatures and results as ``attnlib.numpy.kv_compress`` (read
that module for the formulas).  Dtype and device come from the inputs; the
codes are ``torch.uint8`` tensors, keep sets ``torch.int64``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .. import _checks
from ..numpy.kv_compress import (
    _check_budget,
    _check_keep_list,
    _check_kernel,
    _check_last_queries,
    _check_quantize,
    _check_window,
    _grouped,
    quantized_nbytes,
)
from ..numpy.kv_compress import _check_keep as _check_keep_array
from ._tensors import all_finite, as_float
from .kv_cache import KVCache

__all__ = ["QuantizedKV", "compress_cache", "dequantize_kv", "h2o_keep", "heavy_hitters", "quantize_kv",
           "quantized_nbytes", "snapkv_keep"]


@dataclass(frozen=True)
class QuantizedKV:
    """A tensor quantized by :func:`quantize_kv`; see ``attnlib.numpy.QuantizedKV``."""

    codes: object  # an array of the backend
    scale: object  # an array of the backend
    minimum: object  # an array of the backend
    bits: int
    axis: int
    group_size: int

    def packed(self) -> torch.Tensor:
        """The codes packed ``bits`` to a number, the first code in the lowest bits: uint8, (⌈size·bits/8⌉,)."""
        shifts = torch.arange(self.bits, device=self.codes.device, dtype=torch.uint8)
        bit = ((self.codes.reshape(-1, 1) >> shifts) & 1).reshape(-1)
        bit = F.pad(bit, (0, -bit.numel() % 8)).reshape(-1, 8).to(torch.int32)
        weight = 2 ** torch.arange(8, device=bit.device, dtype=torch.int32)
        return (bit * weight).sum(-1).to(torch.uint8)

    @property
    def nbytes(self) -> int:
        """Bytes stored: the packed codes, every scale and every minimum."""
        p = self.packed()
        groups = (self.scale.numel() + self.minimum.numel()) * self.scale.element_size()
        return int(p.numel() * p.element_size() + groups)


def quantize_kv(x, bits, *, axis, group_size):
    """Asymmetric ``bits``-bit quantization in groups of ``group_size`` along ``axis``; see ``attnlib.numpy``."""
    x = as_float(x, "x")
    bits, axis, group_size = _check_quantize(tuple(x.shape), bits, axis, group_size)
    if not all_finite(x):
        raise ValueError("x 含有 NaN 或 inf，无法量化 (non-finite values in x)。")
    work = torch.promote_types(x.dtype, torch.float32)
    g = _grouped(x.to(work), axis, group_size)
    low = g.amin(dim=axis + 1, keepdim=True)
    high = g.amax(dim=axis + 1, keepdim=True)
    levels = 2**bits - 1
    minimum = low.to(x.dtype)
    scale = ((high - minimum.to(work)) / levels).to(x.dtype)
    s, m = scale.to(work), minimum.to(work)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    codes = torch.clamp(torch.round((g - m) / safe), 0, levels)
    codes = torch.where(s > 0, codes, torch.zeros_like(codes)).to(torch.uint8).reshape(x.shape)
    return QuantizedKV(codes, scale.squeeze(axis + 1), minimum.squeeze(axis + 1), bits, axis, group_size)


def dequantize_kv(q):
    """``codes · scale + minimum`` of a :class:`QuantizedKV`: the codes' shape, the scale's dtype and device."""
    if not isinstance(q, QuantizedKV):
        raise TypeError(f"dequantize_kv 需要 quantize_kv 返回的 QuantizedKV，收到 {type(q).__name__} "
                        f"(expected a QuantizedKV)。")
    work = torch.promote_types(q.scale.dtype, torch.float32)
    g = _grouped(q.codes, q.axis, q.group_size).to(work)
    out = g * q.scale.unsqueeze(q.axis + 1).to(work) + q.minimum.unsqueeze(q.axis + 1).to(work)
    return out.to(q.scale.dtype).reshape(q.codes.shape)


def heavy_hitters(totals, budget, *, recent):
    """The ``recent`` newest keys and the heaviest older ones, ties to the more recent; see ``attnlib.numpy``."""
    totals = as_float(totals, "totals")
    _checks.check_min_ndim("totals", tuple(totals.shape), 1)
    n_k = totals.shape[-1]
    budget, recent = _check_budget(budget, recent, "recent")
    arange = torch.arange(n_k, device=totals.device)
    if budget >= n_k:
        return arange.expand(totals.shape).clone()
    older, m = n_k - recent, budget - recent
    lead = totals.shape[:-1]
    newest = arange[older:].expand(*lead, recent)
    if m == 0:
        return newest.clone()
    scores = totals[..., :older]
    top = torch.topk(scores, m, dim=-1, sorted=False)
    kth = top.values.amin(dim=-1, keepdim=True)  # the m-th largest total of each row
    tied = scores == kth
    if bool((tied.sum(dim=-1) == (top.values == kth).sum(dim=-1)).all()):  # every tied key chosen: no ambiguity
        heavy = torch.sort(top.indices, dim=-1).values
    else:  # more keys tie at the m-th total than places left: the most recent of them stay
        above = scores > kth
        need = m - above.sum(dim=-1, keepdim=True)
        tied = tied & (tied.flip(-1).cumsum(dim=-1).flip(-1) <= need)  # tied keys at this index or later
        heavy = (above | tied).nonzero()[:, -1].reshape(*lead, m)  # exactly m per row, increasing
    return torch.cat([heavy, newest], dim=-1)


def h2o_keep(weights, budget, *, recent):
    """Heavy hitters of the attention accumulated over the visible queries, plus recent keys; see ``attnlib.numpy``."""
    weights = as_float(weights, "weights")
    _checks.check_min_ndim("weights", tuple(weights.shape))
    n_q, n_k = weights.shape[-2:]
    _check_last_queries(tuple(weights.shape))
    j = torch.arange(n_k, device=weights.device)
    t = torch.arange(n_q, device=weights.device)[:, None] + (n_k - n_q)
    totals = torch.where(j <= t, weights, torch.zeros_like(weights)).sum(dim=-2)
    return heavy_hitters(totals, budget, recent=recent)


def snapkv_keep(weights, budget, *, window, kernel_size=5):
    """The last ``window`` queries vote, votes average-pooled, the window kept; see ``attnlib.numpy``."""
    weights = as_float(weights, "weights")
    _checks.check_min_ndim("weights", tuple(weights.shape))
    n_q, n_k = weights.shape[-2:]
    budget, window = _check_budget(budget, window, "window")
    kernel_size = _check_kernel(kernel_size)
    _check_window(window, n_q)
    if budget >= n_k:
        return torch.arange(n_k, device=weights.device).expand(*weights.shape[:-2], n_k).clone()
    votes = weights[..., -window:, : n_k - window].sum(dim=-2)
    lead = votes.shape[:-1]
    pooled = F.avg_pool1d(votes.reshape(-1, 1, votes.shape[-1]), kernel_size, stride=1,
                          padding=kernel_size // 2).reshape(*lead, -1)
    padded = torch.cat([pooled, pooled.new_zeros(*lead, window)], dim=-1)
    return heavy_hitters(padded, budget, recent=window)


def compress_cache(cache, keep):
    """A new ``KVCache`` with only the kept keys and values of each layer and head; see ``attnlib.numpy``."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"compress_cache 需要 KVCache，收到 {type(cache).__name__} (expected a KVCache)。")
    keep = _check_keep_list(keep, cache.n_layers)
    new = KVCache(cache.n_layers, cache.n_heads, cache.d_head, n_kv_heads=cache.n_kv_heads)
    for layer, idx in enumerate(keep):
        keys, values = cache.read(layer)
        idx = _check_keep(idx, tuple(keys.shape), layer, keys.device)
        gather = idx[..., None].expand(*idx.shape, keys.shape[-1])
        new.append(layer, keys.gather(-2, gather), values.gather(-2, gather))
    return new


def _check_keep(idx, keys_shape: tuple, layer: int, device):
    """Kept indices as an int64 tensor on the keys' device; the checks are the NumPy twin's."""
    arr = idx.detach().cpu().numpy() if isinstance(idx, torch.Tensor) else np.asarray(idx)
    return torch.as_tensor(_check_keep_array(arr, keys_shape, layer), device=device)

