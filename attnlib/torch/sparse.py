"""Sparse attention, torch backend: a sliding window with global tokens (chapter 10) and top-k selection
(chapter 20); the algorithms of ``attnlib.numpy.sparse``, on any device, with autograd."""

from __future__ import annotations

import math

import torch

from .. import _checks
from ..numpy.sparse import check_index_scores, check_indexer, query_rows
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


# --------------------------------------------------------------------------- top-k selection (chapter 20)

def topk_sparse_attention(q, k, v, index_scores, top_k, *, causal=True):
    """Each query attends only to its ``top_k`` visible keys of highest index score; same contract as
    ``attnlib.numpy.sparse.topk_sparse_attention`` (causal mask first, ties to the lower index, exact softmax
    over the selected keys, ``n_q x top_k`` attention scores).

    q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v), index_scores (..., n_q, n_k); returns (..., n_q, d_v).
    Gradients flow to q, k and v (the selection itself is discrete).
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    (index_scores,) = as_float_tensors(index_scores=index_scores)
    if index_scores.device != q.device:
        raise ValueError(f"输入不在同一设备上 (device mismatch): q.device={q.device}, "
                         f"index_scores.device={index_scores.device}。")
    batch = check_index_scores(tuple(q.shape), tuple(k.shape), tuple(v.shape), tuple(index_scores.shape))
    top_k = _checks.check_count("top_k", top_k)
    n_q, n_k = q.shape[-2], k.shape[-2]
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    k_rows, v_rows = batch_rows(k, batch), batch_rows(v, batch)  # (B n_k, d_k), (B n_k, d_v)
    first = (torch.arange(math.prod(batch), device=q.device) * n_k).reshape(batch + (1, 1))  # (..., 1, 1)
    rows = query_rows(n_q, n_k, top_k)
    parts = [] if n_k else [q.new_zeros(batch + (n_q, v.shape[-1]))]  # no key at all: zero rows
    for start in range(0, n_q if n_k else 0, rows):
        r = slice(start, min(start + rows, n_q))
        chosen, valid = select_top_k(index_scores[..., r, :], top_k, r, n_q, causal)  # (..., c, kk)
        keys, values = k_rows[first + chosen], v_rows[first + chosen]  # gathered: (..., c, kk, d_k / d_v)
        scores = gathered_scores(q[..., r, :], keys).masked_fill(~valid, float("-inf"))  # (..., c, kk)
        weights = softmax_masked(scores, -1, valid)
        parts.append((weights[..., None, :] @ values)[..., 0, :])  # (..., c, d_v)
    if not parts:
        return q.new_zeros(batch + (0, v.shape[-1]))
    return torch.cat(parts, dim=-2).expand(*batch, n_q, v.shape[-1])


def select_top_k(scores, top_k: int, rows: slice, n_q: int, causal: bool):
    """``(chosen, valid)`` (..., c, min(top_k, n_k)): each row's top-k visible keys in index order, ties to the
    lower index; see ``attnlib.numpy.sparse.select_top_k``."""
    n_k, device = scores.shape[-1], scores.device
    kk = min(top_k, n_k)
    if causal:
        last_visible = torch.arange(rows.start, rows.stop, device=device)[:, None] + (n_k - n_q)  # (c, 1)
        visible = torch.arange(n_k, device=device) <= last_visible  # (c, n_k)
    else:
        visible = torch.ones(1, n_k, dtype=torch.bool, device=device)
    s = scores.masked_fill(~visible, float("-inf"))  # the causal mask first
    kth = torch.topk(s, kk, dim=-1).values[..., -1:]  # (..., c, 1): each row's kk-th largest
    above = s > kth
    ties = (s == kth) & visible
    chosen = above | (ties & (ties.cumsum(dim=-1) <= kk - above.sum(dim=-1, keepdim=True)))
    order = torch.sort((~chosen).to(torch.uint8), dim=-1, stable=True).indices[..., :kk]  # chosen first, in order
    return order, chosen.gather(-1, order)


def batch_rows(x, batch: tuple):
    """``x`` (..., n_k, d) with its batch broadcast to ``batch`` and flattened: (B n_k, d), row ``b n_k + j``."""
    return x.expand(*batch, *x.shape[-2:]).reshape(-1, x.shape[-1])


def gathered_scores(q_rows, keys):
    """Scaled queries (..., c, d_k) against their gathered keys (..., c, kk, d_k): the only attention scores."""
    return (q_rows[..., None, :] @ keys.mT)[..., 0, :]


def lightning_indexer_scores(q_idx, k_idx, w_idx):
    """DeepSeek-V3.2's indexer ``I[t, s] = sum_j w[t, j] ReLU(q[t, j] . k[s])``; same contract as
    ``attnlib.numpy.sparse.lightning_indexer_scores``: q_idx (..., n_q, h_idx, d_idx), k_idx (..., n_k, d_idx),
    w_idx (..., n_q, h_idx) -> (..., n_q, n_k)."""
    q_idx, k_idx, w_idx = as_float_tensors(q_idx=q_idx, k_idx=k_idx, w_idx=w_idx)
    check_indexer(tuple(q_idx.shape), tuple(k_idx.shape), tuple(w_idx.shape))
    k_t = k_idx.mT  # (..., d_idx, n_k)
    return sum(w_idx[..., :, j, None] * torch.relu(q_idx[..., :, j, :] @ k_t) for j in range(q_idx.shape[-2]))
