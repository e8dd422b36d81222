"""Boolean attention masks (chapter 8), torch backend. ``True`` = may attend.

Masks are built on the CPU (or on the device of ``lengths``); the attention
functions move a mask to the device of their inputs.
"""

from __future__ import annotations

import torch

from .. import _checks


def causal_mask(n_q, n_k=None):
    """Bottom-right aligned causal mask, shape (n_q, n_k): ``mask[i, j] = j <= i + (n_k - n_q)``."""
    n_k = n_q if n_k is None else n_k
    _checks.check_sizes(n_q=n_q, n_k=n_k)
    return torch.ones(n_q, n_k, dtype=torch.bool).tril_(diagonal=n_k - n_q)  # in place: one n_q x n_k buffer


def padding_mask(lengths, n_k):
    """Mask of shape (B, 1, n_k): sequence b may attend to its first ``lengths[b]`` keys."""
    _checks.check_sizes(n_k=n_k)
    lengths = lengths if isinstance(lengths, torch.Tensor) else torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise TypeError(f"lengths 必须是一维整数序列 (1-D integer lengths)，收到 shape={tuple(lengths.shape)}, "
                        f"dtype={lengths.dtype}。")
    _checks.check_lengths(lengths.tolist(), n_k)
    return (torch.arange(n_k, device=lengths.device) < lengths[:, None])[:, None, :]


def sliding_window_mask(n, window, *, causal=False, global_tokens=()):
    """Local attention mask (n, n): keys at most ``window - 1`` away (past ones if causal), plus global rows/cols."""
    _checks.check_sizes(n=n)
    window = _checks.check_window(window)
    glob = torch.as_tensor(_checks.check_positions("global_tokens", global_tokens, n))
    offset = torch.arange(n)[:, None] - torch.arange(n)  # i - j
    mask = (offset >= 0) & (offset < window) if causal else offset.abs() < window
    is_global = torch.zeros(n, dtype=torch.bool)
    is_global[glob] = True
    mask |= is_global[:, None] | is_global[None, :]
    return mask & (offset >= 0) if causal else mask
