"""The paged key-value cache (chapter 20), torch backend: the same block tables, a pool of tensors on any device.

The bookkeeping (block tables, reference counts, the free list, copy-on-write)
is ``attnlib.numpy.paged.BlockManager`` itself, which holds no numbers; this
module adds the pool of tensors and reads it the same way, a group of blocks
at a time with chapter 10's online softmax (``attnlib.torch.flash.attend_block``).
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from ..numpy.paged import BlockManager, check_cache, check_dtype, check_query, check_step
from ._tensors import as_float_tensors
from .flash import attend_block


class PagedKVCache(BlockManager):
    """A paged key-value cache; same contract as ``attnlib.numpy.paged.PagedKVCache``.

    ``PagedKVCache(n_blocks, block_size, n_heads, d_head)``: ``allocate()``, ``append(seq, k, v)`` with
    (n_heads, n_new, d_head) tensors, ``read(seq)``, ``block_table(seq)``, ``length(seq)``, ``fork(seq)``,
    ``free(seq)``, ``ref_count(block)``, ``free_blocks``, ``nbytes``.  The pool, K and V each
    ``(n_blocks, n_heads, block_size, d_head)``, is allocated at the first append on the device and in
    the dtype of those keys; later keys must match both.  What is stored is detached from autograd.
    """

    def __init__(self, n_blocks, block_size, n_heads, d_head):
        super().__init__(n_blocks, block_size)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.d_head = _checks.check_count("d_head", d_head)
        self._k = self._v = None

    @property
    def nbytes(self) -> int:
        if self._k is None:
            return 0
        in_use = self.n_blocks - self.free_blocks
        return in_use * 2 * self.n_heads * self.block_size * self.d_head * self._k.element_size()

    def append(self, seq, k, v) -> None:
        """Add (n_heads, n_new, d_head) keys and values at the end of ``seq``; a refused call changes nothing."""
        seq = self._check_seq(seq)
        k, v = as_float_tensors(k=k, v=v)
        check_step(tuple(k.shape), tuple(v.shape), self.n_heads, self.d_head)
        if self._k is not None:
            check_like("新的键", k, self._k)
        if k.shape[-2] == 0:
            return
        if self._k is None:
            shape = (self.n_blocks, self.n_heads, self.block_size, self.d_head)
            self._k, self._v = k.new_zeros(shape), k.new_zeros(shape)
        self._write(seq, k.detach(), v.detach())

    def _gather(self, blocks: list, n: int):
        ids = torch.tensor(blocks, device=self._k.device)
        shape = (self.n_heads, len(blocks) * self.block_size, self.d_head)
        keys = self._k.index_select(0, ids).transpose(0, 1).reshape(shape)[:, :n]  # (n_heads, n, d_head)
        values = self._v.index_select(0, ids).transpose(0, 1).reshape(shape)[:, :n]
        return keys, values


def check_like(what: str, t, cached) -> None:
    """Tensors that meet the cache must have the dtype and the device of its pool."""
    check_dtype(what, t.dtype, cached.dtype)
    if t.device != cached.device:
        raise TypeError(f"{what}在 {t.device} 上，缓存在 {cached.device} 上：请先移到同一设备 "
                        f"(device mismatch with the cache)。")


def paged_attention(q, cache, seq, *, causal=True):
    """Attention of the newest (n_heads, n_q, d_head) queries of ``seq`` over its cache, read through the block
    table; same contract as ``attnlib.numpy.paged.paged_attention``."""
    check_cache(cache, PagedKVCache)
    (q,) = as_float_tensors(q=q)
    check_query(tuple(q.shape), cache.n_heads, cache.d_head)
    n, n_q = cache._nonempty(seq), q.shape[-2]
    check_like("q ", q, cache._k)
    q = q * (1.0 / math.sqrt(cache.d_head))
    out = lse = None
    for start, blocks in cache._groups(seq):
        keys, values = cache._gather(blocks, min(len(blocks) * cache.block_size, n - start))  # (h, g, d) each
        g = keys.shape[-2]
        mask = None
        if causal and start + g - 1 > n - n_q:  # the first query cannot see the group's last key
            last_visible = torch.arange(n_q, device=q.device)[:, None] + (n - n_q)  # (n_q, 1)
            mask = torch.arange(start, start + g, device=q.device) <= last_visible  # (n_q, g)
        part = attend_block(q, keys, values, slice(0, n_q), n_q, mask, False, g, (cache.n_heads,))
        out, lse = part if out is None else merge_partial(out, lse, *part)
    return out


def merge_partial(out_a, lse_a, out_b, lse_b):
    """Two partial attentions over disjoint keys as one; see ``attnlib.numpy.paged.merge_partial``."""
    both = torch.logaddexp(lse_a, lse_b)
    shift = torch.where(torch.isfinite(both), both, torch.zeros_like(both))
    return out_a * torch.exp(lse_a - shift)[..., None] + out_b * torch.exp(lse_b - shift)[..., None], both
