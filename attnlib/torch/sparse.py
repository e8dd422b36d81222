"""Sliding-window attention with global tokens (chapter 10), torch backend: same algorithm, any device, autograd."""

from __future__ import annotations

import math

import torch

from .. import _checks
from ._tensors import as_float_tensors
from .softmax import softmax_masked


def sliding_window_attention(q, k, v, window, *, global_tokens=(), causal=False):
    """Local attention plus global tokens without the n x n matrix; see ``attnlib.numpy.sliding_window_attention``.

    q, k : (..., n, d_k); v : (..., n, d_v); returns (..., n, d_v).
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    n = _checks.check_self_attention(tuple(q.shape), tuple(k.shape))
    window = _checks.check_window(window)
    glob = torch.as_tensor(_checks.check_positions("global_tokens", global_tokens, n), device=q.device)
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    out = local_and_global(q, k, v, window, glob, causal, batch)  # (..., n, d_v)
    if glob.numel():
        rows = q.expand(*batch, *q.shape[-2:])[..., glob, :]  # (..., g, d_k)
        scores = rows @ k.mT  # (..., g, n)
        allowed = torch.arange(n, device=q.device) <= glob[:, None] if causal else None
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        glob_out = softmax_masked(scores, -1, allowed) @ v  # (..., g, d_v)
        out = out.index_copy(-2, glob, glob_out.expand(*batch, *glob_out.shape[-2:]))
    return out


def local_and_global(q, k, v, window: int, glob, causal: bool, batch: tuple):
    """Each chunk of queries against its span of keys and the global keys, one softmax: (..., n, d_v)."""
    n = q.shape[-2]
    n_chunks = -(-n // window)
    q_chunks = chunks(q, window, n_chunks)  # (..., C, w, d_k)
    scores = q_chunks @ spans(k, window, n_chunks, causal).mT  # (..., C, w, span)
    allowed = span_mask(n, window, n_chunks, causal, glob)  # (C, w, span)
    span = allowed.shape[-1]
    if glob.numel():
        glob_scores = q_chunks @ k[..., glob, :].mT[..., None, :, :]  # (..., C, w, g)
        position = torch.arange(n_chunks * window, device=q.device).reshape(n_chunks, window, 1)
        glob_allowed = glob <= position if causal else torch.ones(n_chunks, window, glob.numel(), dtype=torch.bool,
                                                                     device=q.device)
        scores = torch.cat([scores, glob_scores], dim=-1)
        allowed = torch.cat([allowed, glob_allowed], dim=-1)
    weights = softmax_masked(scores.masked_fill(~allowed, float("-inf")), -1, allowed)
    out = weights[..., :span] @ spans(v, window, n_chunks, causal)  # (..., C, w, d_v)
    if glob.numel():
        out = out + weights[..., span:] @ v[..., glob, :][..., None, :, :]
    out = out.reshape(*out.shape[:-3], n_chunks * window, v.shape[-1])[..., :n, :]
    return out.expand(*batch, *out.shape[-2:]).contiguous()


def chunks(x, window: int, n_chunks: int):
    """``x`` (..., n, d) zero-padded to ``n_chunks * window`` rows, as chunks (..., C, w, d)."""
    padded = torch.nn.functional.pad(x, (0, 0, 0, n_chunks * window - x.shape[-2]))
    return padded.reshape(*x.shape[:-2], n_chunks, window, x.shape[-1])


def spans(x, window: int, n_chunks: int, causal: bool):
    """For chunk c, the rows ``c w - (w - 1) ...`` of ``x`` its queries may see: (..., C, span, d)."""
    span = 2 * window - 1 if causal else 3 * window - 2
    before = window - 1
    after = n_chunks * window - x.shape[-2] + span - window - before
    padded = torch.nn.functional.pad(x, (0, 0, before, after))  # (..., C w + span - w, d)
    return padded.unfold(-2, span, window).mT  # unfold: (..., C, d, span) -> (..., C, span, d)


def span_mask(n: int, window: int, n_chunks: int, causal: bool, glob):
    """Which (query, span key) pairs are in the window, in the sequence and not global keys: (C, w, span)."""
    span = 2 * window - 1 if causal else 3 * window - 2
    device = glob.device
    offset = torch.arange(window, device=device)[:, None] + (window - 1) - torch.arange(span, device=device)
    near = (offset >= 0) & (offset < window) if causal else offset.abs() < window
    query = torch.arange(n_chunks * window, device=device).reshape(n_chunks, window, 1)
    key = (torch.arange(n_chunks, device=device) * window - (window - 1))[:, None, None] + torch.arange(span,
                                                                                                        device=device)
    return near & (key >= 0) & (key < n) & ~torch.isin(key, glob) & (query < n)
