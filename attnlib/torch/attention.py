"""Scaled dot-product attention (chapter 6), torch backend.

Two paths give the same output:

* ``need_weights=True``: the manual path, ``softmax(q k^T / sqrt(d_k)) v``,
  which must materialise the weights to return them;
* ``need_weights=False``: ``torch.nn.functional.scaled_dot_product_attention``,
  the fused kernel (FlashAttention or memory-efficient attention on CUDA, a
  fused C++ kernel on CPU) that never stores the n_q x n_k weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import _checks
from ._tensors import as_float_tensors, as_mask
from .masks import causal_mask
from .softmax import empty_rows, softmax_masked


def scaled_dot_product_attention(q, k, v, *, mask=None, causal=False, need_weights=True):
    """Scaled dot-product attention; same contract as ``attnlib.numpy.scaled_dot_product_attention``.

    Parameters
    ----------
    q : tensor of float, shape (..., n_q, d_k)
    k : tensor of float, shape (..., n_k, d_k)
    v : tensor of float, shape (..., n_k, d_v)
        Same dtype and device; leading dimensions broadcast; autograd flows through.
    mask : tensor of bool, optional
        Broadcasts to ``(..., n_q, n_k)``; ``True`` = may attend. Moved to q's device.
    causal : bool
        Also apply the bottom-right aligned ``causal_mask(n_q, n_k)``.
    need_weights : bool
        False takes the fused kernel and returns ``(output, None)``.

    Returns
    -------
    output : tensor, shape (..., n_q, d_v)
    weights : tensor, shape (..., n_q, n_k), or None
        A fully masked row has zero weights and a zero output.
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    n_q, n_k = q.shape[-2], k.shape[-2]
    if not need_weights:
        return fused_attention(q, k, v, mask, causal, batch), None
    allowed = combined_mask(mask, causal, batch + (n_q, n_k), q.device)
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.mT  # (..., n_q, n_k)
    # Without autograd every step may overwrite the scores: one n_q x n_k buffer instead of two.
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if allowed is not None and needs_grad:
        scores.masked_fill_(~allowed, float("-inf"))  # in place: the product is a fresh tensor
    elif allowed is not None:
        torch.where(allowed, scores, scores.new_tensor(float("-inf")), out=scores)  # no negated copy of the mask
    weights = softmax_masked(scores, -1, allowed, inplace=not needs_grad)
    return weights @ v, weights


def combined_mask(mask, causal: bool, target: tuple, device: torch.device):
    """The user's boolean mask and the causal mask as one tensor on ``device`` (or None)."""
    if mask is not None:
        mask = as_mask(mask, target, device)
    if causal:
        c = causal_mask(target[-2], target[-1]).to(device)
        mask = c if mask is None else mask & c
    return mask


def fused_attention(q, k, v, mask, causal: bool, batch: tuple) -> torch.Tensor:
    """torch's fused kernel, with our mask convention and bottom-right causal alignment.

    torch's ``is_causal=True`` aligns top-left, so it is only used when
    n_q == n_k (where both alignments agree); otherwise the causal mask is
    passed explicitly.  The fused kernels only take 4-d ``(B, H, n, d)``
    inputs: given 2-d or 3-d tensors, ``F.scaled_dot_product_attention``
    silently falls back to its unfused "math" path, which stores the
    n_q x n_k scores several times over (measured: 2.3 score matrices at
    n=4096 instead of none).  So the batch dimensions are made exactly two:
    views, no copy, for up to two batch dimensions.  (torch's CPU kernel also
    wants d_v == d_k; otherwise torch itself takes the math path.)
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    simple_causal = causal and mask is None and n_q == n_k
    allowed = None if simple_causal else combined_mask(mask, causal, batch + (n_q, n_k), q.device)
    allowed, empty = open_empty_rows(allowed)
    q4, k4, v4 = (as_4d(t, batch, expand=True) for t in (q, k, v))  # (B, H, n, d)
    mask4 = None if allowed is None else as_4d(allowed, batch, expand=False)  # broadcasts to (B, H, n_q, n_k)
    out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask4, is_causal=simple_causal)
    out = out.reshape(*batch, n_q, v.shape[-1])  # (..., n_q, d_v)
    return out if empty is None else out.masked_fill(empty, 0.0)


def open_empty_rows(allowed):
    """``(mask for the kernel, rows to zero afterwards)``; the second is None when no row is fully masked.

    A fused kernel runs an online softmax over blocks of keys; for a row whose
    scores are all -inf some kernels and devices give NaN, in the output and in
    the gradients (pytorch/pytorch#103749, #110213).  So such a row is opened to
    every key for the kernel, and its output set to 0 afterwards: the contract's
    zero row, with a zero (not NaN) gradient flowing back through it.
    """
    empty = empty_rows(allowed)  # (..., n_q or 1, 1) or None
    return (allowed, None) if empty is None else (allowed | empty, empty)


def as_4d(t: torch.Tensor, batch: tuple, expand: bool) -> torch.Tensor:
    """``t`` of shape (..., a, b), broadcastable to ``batch + (a, b)``, with exactly two batch dimensions.

    ``expand``: give ``t`` the full batch shape (the kernels want it for q, k, v;
    a mask may keep its size-1 dimensions).  Up to two batch dimensions this is
    a view; more are flattened into one, which copies what was broadcast.
    """
    if len(batch) > 2:
        return t.expand(*batch, *t.shape[-2:]).flatten(0, len(batch) - 2)
    lead = (1,) * (2 - len(batch)) + batch
    return t.expand(*lead, *t.shape[-2:]) if expand else t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
