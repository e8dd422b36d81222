"""The paged key-value cache (chapter 20), torch backend: the same block tables, a pool of tensors on any device.

The bookkeeping (block tables, reference counts, the free list, copy-on-write)
is ``attnlib.numpy.paged.BlockManager`` itself, which holds no numbers; this
module adds the pool of tensors.  It reads a sequence differently from NumPy,
which walks the table a group of blocks at a time (``make bench BENCH=paged``
measured each way):

* one decoding step (one query per head) reads the keys and values where they
  lie in the pool, with no copy: the scores ``q . k`` are computed only at the
  pool rows the block table names, a *sampled* matrix product
  (``torch.sparse.sampled_addmm``, SDDMM), and the output is the product of
  those softmax weights, a sparse row over the pool, with the pool's values
  (sparse times dense, SpMM).  Copying the sequence's blocks out first and
  running torch's fused kernel measured about 3x the contiguous step, and
  the copy alone about two thirds of that: it reads every key and value of
  the sequence and writes them again before the kernel reads them once more;
* several queries at once (a prompt) copy the sequence's blocks out of the pool
  once (one ``index_select``) and run torch's fused kernel, as chapter 11's
  contiguous cache does: the copy is shared by all the queries, and the fused
  kernel never holds the n_q x n scores.
"""

from __future__ import annotations

import math
import warnings

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
            # come out of the pool in one index_select, already heads first (see _gather), and the pool is
            # one matrix of rows (head, block, slot) for a decoding step (see _rows).
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

    def _rows(self, blocks: list, n: int):
        """Where the first ``n`` tokens of ``blocks`` lie in the pool seen as rows: (n_heads, n) indices, ascending.

        The heads-first pool, viewed as ``(n_heads * n_blocks * block_size, d_head)`` (no copy), has token
        ``t`` of head ``h`` at row ``(h * n_blocks + blocks[t // block_size]) * block_size + t % block_size``.
        The rows come in ascending order, not in token order: a sparse CSR matrix needs its columns sorted,
        and attention does not depend on the order of its keys.
        """
        device, size = self._k.device, self.block_size
        # 32-bit indices where the pool allows: torch's CPU sparse kernels convert 64-bit ones on every call
        kind = torch.int32 if self.n_heads * self.n_blocks * size < 2**31 else torch.int64
        ascending = sorted(blocks)  # a table never holds a block twice
        heads = torch.arange(self.n_heads, device=device, dtype=kind)[:, None] * self.n_blocks  # (h, 1)
        first = (heads + torch.tensor(ascending, device=device, dtype=kind)) * size  # (h, blocks): slot 0's rows
        rows = (first[..., None] + torch.arange(size, device=device, dtype=kind)).reshape(self.n_heads, -1)
        filled = n - (len(blocks) - 1) * size  # tokens in the last block, the only one that may be partly filled
        if filled == size:
            return rows
        at = ascending.index(blocks[-1]) * size  # where the last block's rows begin: drop its empty slots
        return torch.cat([rows[:, :at + filled], rows[:, at + size:]], dim=1)  # (h, n)

    def _pool_rows(self):
        """K and V as ``(n_heads * n_blocks * block_size, d_head)`` matrices: views of the heads-first pool."""
        return (t.transpose(0, 1).reshape(-1, self.d_head) for t in (self._k, self._v))


def check_like(what: str, t, cached) -> None:
    """Tensors that meet the cache must have the dtype and the device of its pool."""
    check_dtype(what, t.dtype, cached.dtype)
    if t.device != cached.device:
        raise TypeError(f"{what}在 {t.device} 上，缓存在 {cached.device} 上：请先移到同一设备 "
                        f"(device mismatch with the cache)。")


def paged_attention(q, cache, seq, *, causal=True):
    """Attention of the newest (n_heads, n_q, d_head) queries of ``seq`` over its cache, read through the block
    table; same contract as ``attnlib.numpy.paged.paged_attention``.

    One query per head (a decoding step, which sees every cached key, causal or not) is answered from the
    pool in place, :func:`decode_in_place`.  Several queries copy the sequence's blocks out once
    (:meth:`PagedKVCache._gather`) and run torch's fused kernel, bottom-right causal as chapter 11's cache.
    """
    check_cache(cache, PagedKVCache)
    (q,) = as_float_tensors(q=q)
    check_query(tuple(q.shape), cache.n_heads, cache.d_head)
    n = cache._nonempty(seq)
    check_like("q ", q, cache._k)
    if q.shape[-2] == 1:
        return decode_in_place(q, cache, cache._rows(cache.block_table(seq), n))
    keys, values = cache._gather(cache.block_table(seq), n)  # (n_heads, n, d_head) each
    return fused_attention(q, keys, values, None, causal, (cache.n_heads,))  # causal: bottom-right aligned


def decode_in_place(q, cache, rows):
    """Softmax attention of one (n_heads, 1, d_head) query per head over the pool rows ``rows`` (n_heads, n).

    A sparse (n_heads, pool rows) pattern holds head h's n rows in its row h.  ``sampled_addmm`` computes
    ``q_h . k`` at those positions only (each key read once, where it lies); the softmax runs over the n
    scores of each head; the weights, put back in the same pattern, multiply the pool's values.  Neither
    product copies a key or a value.
    """
    h, n = rows.shape
    keys, values = cache._pool_rows()  # (h * n_blocks * block_size, d_head) each, views
    crow = torch.arange(0, h * n + 1, n, device=q.device, dtype=rows.dtype)  # row h: entries h*n .. h*n + n - 1
    cols = rows.reshape(-1)  # (h * n,)
    pattern = sparse_rows(crow, cols, q.new_zeros(h * n), keys.shape[0])
    scores = torch.sparse.sampled_addmm(pattern, q.reshape(h, -1), keys.mT, beta=0.0,
                                        alpha=1.0 / math.sqrt(cache.d_head))  # (h, pool rows), h * n entries
    weights = torch.softmax(scores.values().view(h, n), dim=-1)  # (h, n), in the pattern's order
    out = sparse_rows(crow, cols, weights.reshape(-1), keys.shape[0]) @ values  # (h, d_head)
    return out[:, None, :]  # (h, 1, d_head)


def sparse_rows(crow, cols, values, width: int):
    """A (len(crow) - 1, width) sparse CSR matrix; torch's notice that CSR support is in beta is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)
        return torch.sparse_csr_tensor(crow, cols, values, size=(len(crow) - 1, width), check_invariants=False)
