"""The paged key-value cache (chapter 20), torch backend: the same block tables, a pool of tensors on any device.

The bookkeeping (block tables, reference counts, the free list, copy-on-write)
is ``attnlib.numpy.paged.BlockManager`` itself, which holds no numbers; this
module adds the pool of tensors.  It reads a sequence differently from NumPy:
its blocks are copied out of the pool in one ``index_select`` and attended with
torch's fused kernel, which measured faster than walking the table group by
group with an online-softmax merge (``make bench BENCH=paged``).
"""

from __future__ import annotations

import torch

from .. import _checks
from ..numpy.paged import BlockManager, check_cache, check_dtype, check_query, check_step
from ._tensors import as_float_tensors
from .attention import fused_attention


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
            # Stored heads first, (n_heads, n_blocks, block_size, d_head), and seen through a transposed view
            # with the bookkeeping's shape (n_blocks, n_heads, block_size, d_head): a sequence's blocks then
            # come out of the pool in one index_select, already heads first (see _gather).
            shape = (self.n_heads, self.n_blocks, self.block_size, self.d_head)
            self._k, self._v = k.new_zeros(shape).transpose(0, 1), k.new_zeros(shape).transpose(0, 1)
        self._write(seq, k.detach(), v.detach())

    def _gather(self, blocks: list, n: int):
        ids = torch.tensor(blocks, device=self._k.device)
        shape = (self.n_heads, len(blocks) * self.block_size, self.d_head)
        # One copy each: the heads-first pool's blocks in table order, (n_heads, blocks, block_size, d_head),
        # contiguous, so the reshape to (n_heads, n, d_head) is a view.
        keys = self._k.transpose(0, 1).index_select(1, ids).reshape(shape)[:, :n]
        values = self._v.transpose(0, 1).index_select(1, ids).reshape(shape)[:, :n]
        return keys, values


def check_like(what: str, t, cached) -> None:
    """Tensors that meet the cache must have the dtype and the device of its pool."""
    check_dtype(what, t.dtype, cached.dtype)
    if t.device != cached.device:
        raise TypeError(f"{what}在 {t.device} 上，缓存在 {cached.device} 上：请先移到同一设备 "
                        f"(device mismatch with the cache)。")


def paged_attention(q, cache, seq, *, causal=True):
    """Attention of the newest (n_heads, n_q, d_head) queries of ``seq`` over its cache, read through the block
    table; same contract as ``attnlib.numpy.paged.paged_attention``.

    The sequence's blocks are copied out of the pool once (one ``index_select``, :meth:`PagedKVCache._gather`)
    and attended with torch's fused kernel, as chapter 11's contiguous cache is: PyTorch has no kernel that
    reads through a block table, and walking the table group by group with an online-softmax merge measured
    slower (``make bench BENCH=paged`` times the copy alone too).
    """
    check_cache(cache, PagedKVCache)
    (q,) = as_float_tensors(q=q)
    check_query(tuple(q.shape), cache.n_heads, cache.d_head)
    n = cache._nonempty(seq)
    check_like("q ", q, cache._k)
    keys, values = cache._gather(cache.block_table(seq), n)  # (n_heads, n, d_head) each
    return fused_attention(q, keys, values, None, causal, (cache.n_heads,))  # causal: bottom-right aligned
