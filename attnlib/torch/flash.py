"""Tiled attention with an online softmax (chapter 10), torch backend.

The same algorithm as ``attnlib.numpy.flash``, on any device, with autograd
through it.  Every step builds new tensors (no in-place update), so autograd
can differentiate the loop as written; the running maximum is detached,
because the result does not depend on which shift is used (softmax is
shift-invariant) and a row that has seen no key yet keeps a maximum of -inf.

This is the algorithm written in Python for reading.  torch's own
``F.scaled_dot_product_attention`` runs fused kernels of the same idea
(FlashAttention on CUDA), which ``scaled_dot_product_attention(...,
need_weights=False)`` uses.
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from ..numpy.flash import block_sizes  # plain integer arithmetic, shared by both backends
from ._tensors import as_float_tensors, as_mask


def flash_attention(q, k, v, *, mask=None, causal=False, block_size=None):
    """Exact attention block by block; same contract as ``attnlib.numpy.flash_attention``.

    q : (..., n_q, d_k); k : (..., n_k, d_k); v : (..., n_k, d_v); one dtype and device.
    ``mask`` broadcasts to ``(..., n_q, n_k)`` (``True`` = may attend); ``block_size`` is an
    int or ``(rows, keys)``.  Returns the output ``(..., n_q, d_v)``; a fully masked row is 0.
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    n_q, n_k = q.shape[-2], k.shape[-2]
    if mask is not None:
        mask = as_mask(mask, batch + (n_q, n_k), q.device)
    rows, cols = block_sizes(block_size, n_q, n_k, math.prod(batch), causal)
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    blocks = [attend_block(q[..., r0:r0 + rows, :], k, v, slice(r0, min(r0 + rows, n_q)), n_q, mask, causal, cols,
                           batch) for r0 in range(0, n_q, rows)]
    if not blocks:
        return q.new_zeros(batch + (0, v.shape[-1]))
    return torch.cat(blocks, dim=-2)  # (..., n_q, d_v)


def attend_block(q_blk, k, v, rows: slice, n_q: int, mask, causal: bool, cols: int, batch: tuple):
    """One block of scaled queries ``(..., r, d_k)`` against the key blocks it may see."""
    n_k = k.shape[-2]
    stop = min(n_k, max(0, rows.stop + n_k - n_q)) if causal else n_k
    r = q_blk.shape[-2]
    m = q_blk.new_full(batch + (r, 1), float("-inf"))  # running maximum (detached)
    denom = q_blk.new_zeros(batch + (r, 1))  # running sum of exp(s - m)
    acc = q_blk.new_zeros(batch + (r, v.shape[-1]))  # running sum of exp(s - m) v
    for k0 in range(0, stop, cols):
        c = slice(k0, min(k0 + cols, stop))
        s = q_blk @ k[..., c, :].mT  # (..., r, c)
        hidden = hidden_(rows, c, n_q, n_k, mask, causal, s.device)
        if hidden is not None:
            s = s.masked_fill(hidden, float("-inf"))
        m_new = torch.maximum(m, s.detach().amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - shift)
        rescale = torch.exp(m - shift)
        denom = denom * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v[..., c, :]
        m = m_new
    # A row that saw no key has acc = 0 and denom = 0; a row that saw one has denom >= 1.
    return acc / denom.clamp_min(torch.finfo(acc.dtype).tiny)


def hidden_(rows: slice, cols: slice, n_q: int, n_k: int, mask, causal: bool, device):
    """Boolean tensor of the scores of block (rows, cols) that the mask or causality hide, or None."""
    hidden = None
    if mask is not None:
        block = mask[..., rows, :] if mask.shape[-2] != 1 else mask
        hidden = ~(block[..., cols] if block.shape[-1] != 1 else block)
    if causal and cols.stop - 1 > rows.start + n_k - n_q:  # the diagonal crosses this block
        last_visible = torch.arange(rows.start, rows.stop, device=device)[:, None] + (n_k - n_q)  # (r, 1)
        future = torch.arange(cols.start, cols.stop, device=device) > last_visible  # (r, c)
        hidden = future if hidden is None else hidden | future
    return hidden
