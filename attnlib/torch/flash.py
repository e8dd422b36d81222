"""Tiled attention with an online softmax (chapter 10) and its tiled backward pass (chapter 18), torch backend.

The same algorithms as ``attnlib.numpy.flash``, on any device.  The forward
keeps, per query block, a running maximum, a running sum of ``exp(s - m)``
and the running weighted sum of the values; at the end each row's
log-sum-exp ``lse = m + log(denom)`` is what the backward pass needs.

``flash_attention`` is differentiable through :class:`FlashAttentionFunction`,
a ``torch.autograd.Function`` that saves q, k, v, the output and lse (never
the weights) and whose backward recomputes each block of weights from lse, as
FlashAttention-2 does.  Autograd does not go through the block loops.

This is the algorithm written in Python for reading.  torch's own
``F.scaled_dot_product_attention`` runs fused kernels of the same idea
(FlashAttention on CUDA), which ``scaled_dot_product_attention(...,
need_weights=False)`` uses.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from .. import _checks
from ..numpy.flash import block_sizes, check_backward_inputs, query_blocks  # shared by both backends
from ._tensors import as_float, as_float_tensors, as_mask


def flash_attention(q, k, v, *, mask=None, causal=False, block_size=None, return_lse=False):
    """Exact attention block by block; same contract as ``attnlib.numpy.flash_attention``.

    q : (..., n_q, d_k); k : (..., n_k, d_k); v : (..., n_k, d_v); one dtype and device.
    ``mask`` broadcasts to ``(..., n_q, n_k)`` (``True`` = may attend); ``block_size`` is an
    int or ``(rows, keys)``.  Returns the output ``(..., n_q, d_v)``; a fully masked row is 0.
    With ``return_lse=True`` also each row's log-sum-exp ``(..., n_q)`` of the scaled scores over
    its visible keys (``-inf`` on a fully masked row).  Gradients, to q, k, v (and through lse),
    come from the tiled backward (:func:`flash_attention_backward`).
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]), q.device)
    out, lse = FlashAttentionFunction.apply(q, k, v, mask, causal, block_size)
    return (out, lse) if return_lse else out


class FlashAttentionFunction(torch.autograd.Function):
    """Tiled attention whose backward is tiled too: saves q, k, v, out and lse, never the weights.

    ``forward`` returns two tensors, ``out`` and ``lse``, so ``backward`` receives two gradients:
    ``d_out`` and ``d_lse`` (zeros when the loss does not use lse).  Since ``d lse_i / d s_ij = P_ij``,
    ``d_lse`` only changes each row's ``D`` to ``D - d_lse`` (:func:`tiled_backward`).
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, causal, block_size):
        out, lse = tiled_attention(q, k, v, mask, causal, block_size)
        ctx.save_for_backward(q, k, v, out, lse, mask)  # the mask is an input; nothing of size n_q x n_k is made
        ctx.causal, ctx.block_size = causal, block_size
        return out, lse

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse, mask = ctx.saved_tensors
        dq, dk, dv = tiled_backward(q, k, v, out, lse, d_out, mask, ctx.causal, ctx.block_size, d_lse=d_lse)
        return dq, dk, dv, None, None, None  # the mask, causal and block_size have no gradient


def tiled_attention(q, k, v, mask, causal: bool, block_size):
    """The forward on checked tensors: ``(out (..., n_q, d_v), lse (..., n_q))``."""
    batch = _checks.broadcast_batch({"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)})
    n_q, n_k = q.shape[-2], k.shape[-2]
    rows, cols = block_sizes(block_size, n_q, n_k, math.prod(batch), causal)
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    blocks = [attend_block(q[..., r0:r0 + rows, :], k, v, slice(r0, min(r0 + rows, n_q)), n_q, mask, causal, cols,
                           batch) for r0 in range(0, n_q, rows)]
    if not blocks:
        return q.new_zeros(batch + (0, v.shape[-1])), q.new_zeros(batch + (0,))
    return torch.cat([o for o, _ in blocks], dim=-2), torch.cat([lse for _, lse in blocks], dim=-1)


def attend_block(q_blk, k, v, rows: slice, n_q: int, mask, causal: bool, cols: int, batch: tuple):
    """One block of scaled queries ``(..., r, d_k)`` against the key blocks it may see: output rows and their lse."""
    n_k = k.shape[-2]
    stop = min(n_k, max(0, rows.stop + n_k - n_q)) if causal else n_k
    r = q_blk.shape[-2]
    m = q_blk.new_full(batch + (r, 1), float("-inf"))  # running maximum
    denom = q_blk.new_zeros(batch + (r, 1))  # running sum of exp(s - m)
    acc = q_blk.new_zeros(batch + (r, v.shape[-1]))  # running sum of exp(s - m) v
    for k0 in range(0, stop, cols):
        c = slice(k0, min(k0 + cols, stop))
        s = q_blk @ k[..., c, :].mT  # (..., r, c)
        hidden = hidden_(rows, c, n_q, n_k, mask, causal, s.device)
        if hidden is not None:
            s = s.masked_fill(hidden, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - shift)
        rescale = torch.exp(m - shift)
        denom = denom * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v[..., c, :]
        m = m_new
    # A row that saw no key has acc = 0, denom = 0 and m = -inf (so lse = -inf); a row that saw one has denom >= 1.
    return acc / denom.clamp_min(torch.finfo(acc.dtype).tiny), (m + torch.log(denom))[..., 0]


def flash_attention_backward(q, k, v, out, lse, d_out, *, mask=None, causal=False, block_size=None):
    """The gradients ``(dq, dk, dv)`` of :func:`flash_attention`, block by block; same contract as
    ``attnlib.numpy.flash.flash_attention_backward``.

    q, k, v as in the forward; ``out`` and ``d_out`` (..., n_q, d_v), ``lse`` (..., n_q) from
    ``flash_attention(..., return_lse=True)``.  Returns tensors shaped like q, k and v.
    """
    q, k, v, out, d_out = as_float_tensors(q=q, k=k, v=v, out=out, d_out=d_out)
    lse = as_float(lse, "lse")
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    _checks.check_same_dtype({"q": q.dtype, "lse": lse.dtype})
    check_backward_inputs(batch + (q.shape[-2], v.shape[-1]), tuple(out.shape), tuple(d_out.shape),
                          tuple(lse.shape), bool(torch.isnan(lse).any() or (lse == float("inf")).any()))
    if mask is not None:
        mask = as_mask(mask, batch + (q.shape[-2], k.shape[-2]), q.device)
    return tiled_backward(q, k, v, out, lse.to(q.device), d_out, mask, causal, block_size)


def tiled_backward(q, k, v, out, lse, d_out, mask, causal: bool, block_size, d_lse=None):
    """The backward on checked tensors: key blocks outside, query blocks inside (FlashAttention-2).

    ``d_lse`` (..., n_q), optional: a gradient arriving at lse as well; since
    ``d lse_i / d s_ij = P_ij``, it only changes each row's ``D`` to ``D - d_lse``.
    """
    batch = _checks.broadcast_batch({"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)})
    n_q, n_k = q.shape[-2], k.shape[-2]
    # The forward's default blocks, not NumPy's smaller backward ones: fewer, larger products run faster
    # here (make bench BENCH=backward), and memory is not what this twin is measured by.
    rows, cols = block_sizes(block_size, n_q, n_k, math.prod(batch), causal)
    scale = 1.0 / math.sqrt(q.shape[-1])
    q_shape, q = q.shape, q.expand(batch + tuple(q.shape[-2:]))  # a view: every block of scores has all of batch
    q_scaled = q * scale
    delta = (d_out * out).sum(dim=-1, keepdim=True)  # D = rowsum(dO * O): (..., n_q, 1)
    if d_lse is not None:
        delta = delta - d_lse[..., None]
    shift = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))[..., None]  # (..., n_q, 1)
    dq = q.new_zeros(batch + tuple(q.shape[-2:]))  # (..., n_q, d_k)
    dk = q.new_zeros(batch + tuple(k.shape[-2:]))  # (..., n_k, d_k)
    dv = q.new_zeros(batch + tuple(v.shape[-2:]))  # (..., n_k, d_v)
    for k0 in range(0, n_k, cols):
        c = slice(k0, min(k0 + cols, n_k))
        for r0 in query_blocks(c, rows, n_q, n_k, causal):
            r = slice(r0, min(r0 + rows, n_q))
            # In place on the blocks this loop just made: P and dS are the only arrays the size of a block.
            s = q_scaled[..., r, :] @ k[..., c, :].mT  # (..., r, c)
            hidden = hidden_(r, c, n_q, n_k, mask, causal, s.device)
            if hidden is not None:
                s.masked_fill_(hidden, float("-inf"))
            p = s.sub_(shift[..., r, :]).exp_()  # P = exp(S - L): the block's weights, recomputed
            dv[..., c, :] += p.mT @ d_out[..., r, :]  # dV = P^T dO
            ds = (d_out[..., r, :] @ v[..., c, :].mT).sub_(delta[..., r, :]).mul_(p)  # dS = P * (dP - D), dP = dO V^T
            dq[..., r, :] += (ds @ k[..., c, :]) * scale  # dQ = dS K / sqrt(d_k)
            dk[..., c, :] += ds.mT @ q_scaled[..., r, :]  # dK = dS^T Q / sqrt(d_k), Q scaled once above
    return dq.sum_to_size(q_shape), dk.sum_to_size(k.shape), dv.sum_to_size(v.shape)


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
