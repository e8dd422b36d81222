"""A paged key-value cache: fixed-size blocks, block tables, shared prefixes and copy-on-write (chapter 20).

Chapter 11's ``KVCache`` keeps one growing array per sequence.  A server that
holds hundreds of sequences at once cannot reserve each one's maximum length
(most of it would stay empty), and cannot grow arrays in place either.  vLLM's
PagedAttention (Kwon et al., 2023, "Efficient Memory Management for Large
Language Model Serving with PagedAttention") pages the cache as an operating
system pages memory:

* one pool of ``n_blocks`` physical blocks, each holding the keys and values
  of ``block_size`` tokens, is allocated once; K and V are each
  ``(n_blocks, n_heads, block_size, d_head)``;
* a sequence owns a *block table*, the list of its physical block ids: its
  token ``t`` lives in block ``table[t // block_size]`` at slot
  ``t % block_size``, so only its last block is ever partly empty;
* blocks carry reference counts.  ``fork`` gives a new sequence the parent's
  table and adds 1 to every block's count: a common prompt is stored once.
  Full blocks are never written again, so they stay shared for good; a shared
  *partial* last block is copied before either side writes into it
  (copy-on-write), and only then written.  ``free`` subtracts 1 and a block
  whose count reaches 0 returns to the pool.

The bookkeeping (:class:`BlockManager`) holds no numbers, only ids and counts,
so the torch twin shares it; :class:`PagedKVCache` adds the pool of numbers.
:func:`paged_attention` reads a sequence's keys through its block table, a
group of blocks at a time, each group attended with chapter 10's online
softmax (:func:`attnlib.numpy.flash.attend_block`) and the groups merged by
their log-sum-exps, as vLLM's kernel walks the table block by block.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays
from .flash import attend_block
from .masks import causal_rows

#: Tokens gathered from the pool per step of :func:`paged_attention`: enough for fast products,
#: few enough that a group's keys and values stay in the CPU's cache (``make bench BENCH=paged``).
GROUP_TOKENS = 256


class BlockManager:
    """Block tables, reference counts and the free list of a paged cache: which block holds which tokens.

    A subclass adds the pool of numbers (:class:`PagedKVCache`, and its torch twin).

    Parameters
    ----------
    n_blocks, block_size : int >= 1
        Physical blocks in the pool, tokens per block.

    Attributes
    ----------
    free_blocks : int
        Blocks in the pool that no sequence references.
    """

    def __init__(self, n_blocks, block_size):
        self.n_blocks = _checks.check_count("n_blocks", n_blocks)
        self.block_size = _checks.check_count("block_size", block_size)
        self._free = collections.deque(range(self.n_blocks))  # taken from the left, returned on the right
        self._refs = [0] * self.n_blocks  # how many block tables hold each physical block
        self._tables: dict[int, list[int]] = {}  # sequence id -> its physical block ids, in token order
        self._lengths: dict[int, int] = {}  # sequence id -> tokens stored
        self._next_id = 0
        self._freed: set[int] = set()

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def allocate(self) -> int:
        """A new, empty sequence; returns its id (ids are never reused)."""
        seq, self._next_id = self._next_id, self._next_id + 1
        self._tables[seq], self._lengths[seq] = [], 0
        return seq

    def fork(self, seq) -> int:
        """A new sequence sharing every block of ``seq`` (each block's count + 1); returns its id."""
        seq = self._check_seq(seq)
        child = self.allocate()
        self._tables[child], self._lengths[child] = list(self._tables[seq]), self._lengths[seq]
        for block in self._tables[seq]:
            self._refs[block] += 1
        return child

    def free(self, seq) -> None:
        """Drop ``seq``: each of its blocks' counts - 1, and a block nobody holds any more goes back to the pool."""
        seq = self._check_seq(seq)
        for block in self._tables.pop(seq):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._free.append(block)
        del self._lengths[seq]
        self._freed.add(seq)

    def block_table(self, seq) -> list[int]:
        """The physical block ids of ``seq``, in token order (a copy)."""
        return list(self._tables[self._check_seq(seq)])

    def length(self, seq) -> int:
        """Tokens stored for ``seq``."""
        return self._lengths[self._check_seq(seq)]

    def ref_count(self, block) -> int:
        """How many sequences hold physical block ``block``."""
        if not isinstance(block, int) or isinstance(block, bool) or not 0 <= block < self.n_blocks:
            raise ValueError(f"block 必须是 0 到 {self.n_blocks - 1} 之间的整数 (block id out of range)，"
                             f"收到 {block!r}。")
        return self._refs[block]

    def _check_seq(self, seq) -> int:
        """A live sequence id, or a ``ValueError`` saying whether it was freed or never allocated."""
        is_id = isinstance(seq, int) and not isinstance(seq, bool)
        if is_id and seq in self._tables:
            return seq
        if is_id and seq in self._freed:
            raise ValueError(f"序列 {seq} 已经被释放 (sequence {seq} was freed)，不能再读写或复制它。")
        raise ValueError(f"没有编号为 {seq!r} 的序列 (unknown sequence id)：请先用 allocate() 分配。")

    def _place(self, seq: int, n_new: int) -> list[tuple[int, slice, slice]]:
        """Make room for ``n_new`` tokens at the end of ``seq``: ``(block, slots, rows)`` to write.

        Token ``rows`` of the new ones go to ``slots`` of physical ``block``.  A shared
        partial last block is first replaced by a private copy (:meth:`_copy_block`).
        Raises before changing anything when the pool has too few free blocks.
        """
        table, length, size = self._tables[seq], self._lengths[seq], self.block_size
        partial = length % size != 0
        copy_last = partial and n_new > 0 and self._refs[table[-1]] > 1  # a shared partial block: copy on write
        fresh = -(-(length + n_new) // size) - len(table)  # blocks past the current last one
        needed = fresh + copy_last
        if needed > len(self._free):
            raise ValueError(f"物理块不够 (out of blocks)：这次写入需要 {needed} 个空闲块，池中只剩 "
                             f"{len(self._free)} 个；缓存没有任何改变。")
        if copy_last:
            private = self._free.popleft()
            self._copy_block(table[-1], private)
            self._refs[table[-1]] -= 1
            self._refs[private] = 1
            table[-1] = private
        for _ in range(fresh):
            block = self._free.popleft()
            self._refs[block] = 1
            table.append(block)
        self._lengths[seq] = length + n_new
        pieces, t, stop = [], length, length + n_new
        while t < stop:  # one piece per block the new tokens touch
            end = min((t // size + 1) * size, stop)  # the end of token t's block, or of the new tokens
            pieces.append((table[t // size], slice(t % size, t % size + end - t), slice(t - length, end - length)))
            t = end
        return pieces

    def _groups(self, seq: int):
        """``(first token, block ids)`` of ``seq``, about ``GROUP_TOKENS`` tokens (whole blocks) at a time."""
        per_group = max(1, GROUP_TOKENS // self.block_size)  # read at each call: tests shrink it
        table = self._tables[seq]
        for i in range(0, len(table), per_group):
            yield i * self.block_size, table[i:i + per_group]

    # What follows reads and writes the pool of numbers, ``_k`` and ``_v`` (n_blocks, n_heads, block_size,
    # d_head), which a subclass makes, and ``_gather``, which it defines: NumPy arrays and torch tensors
    # index alike here.

    def read(self, seq):
        """The keys and values of ``seq`` gathered through its block table: (n_heads, length, d_head) each (copies)."""
        return self._gather(self.block_table(seq), self._nonempty(seq))

    def _nonempty(self, seq) -> int:
        n = self.length(seq)
        if n == 0:
            raise ValueError(f"序列 {seq} 还没有缓存任何键和值 (sequence {seq} is empty)。")
        return n

    def _write(self, seq: int, k, v) -> None:
        """Store checked keys and values (n_heads, n_new, d_head) at the end of ``seq``, block by block."""
        for block, slots, rows in self._place(seq, k.shape[-2]):
            self._k[block, :, slots] = k[:, rows]  # (n_heads, tokens, d_head) into one block's slots
            self._v[block, :, slots] = v[:, rows]

    def _copy_block(self, src: int, dst: int) -> None:
        self._k[dst] = self._k[src]
        self._v[dst] = self._v[src]


class PagedKVCache(BlockManager):
    """A paged key-value cache: one pool of blocks shared by many sequences, each with its block table.

    The pool, K and V each ``(n_blocks, n_heads, block_size, d_head)``, is allocated at the first
    append, in the dtype of those keys; later keys must have that dtype (no silent conversion).

    Parameters
    ----------
    n_blocks : int >= 1
        Physical blocks in the pool.
    block_size : int >= 1
        Tokens per block.
    n_heads, d_head : int >= 1
        Key/value heads and their width.

    Attributes
    ----------
    free_blocks : int
        Blocks no sequence references.
    nbytes : int
        Bytes of the blocks in use, keys and values (a partly filled block counts whole; a shared
        one once): ``used x 2 x n_heads x block_size x d_head x itemsize``, ``used = n_blocks - free_blocks``.
    """

    def __init__(self, n_blocks, block_size, n_heads, d_head):
        super().__init__(n_blocks, block_size)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.d_head = _checks.check_count("d_head", d_head)
        self._k = self._v = None  # (n_blocks, n_heads, block_size, d_head) each, made at the first append

    @property
    def nbytes(self) -> int:
        if self._k is None:
            return 0
        return (self.n_blocks - self.free_blocks) * 2 * self.n_heads * self.block_size * self.d_head * self._k.itemsize

    def append(self, seq, k, v) -> None:
        """Add keys ``k`` and values ``v``, each (n_heads, n_new, d_head), at the end of sequence ``seq``.

        The last partial block is filled first, then free blocks are taken.  A refused call
        (unknown sequence, wrong shape or dtype, too few free blocks) changes nothing.
        """
        seq = self._check_seq(seq)
        k, v = as_float_arrays(k=k, v=v)
        check_step(k.shape, v.shape, self.n_heads, self.d_head)
        if self._k is not None:
            check_dtype("新的键", k.dtype, self._k.dtype)
        if k.shape[-2] == 0:
            return
        if self._k is None:
            shape = (self.n_blocks, self.n_heads, self.block_size, self.d_head)
            self._k, self._v = np.zeros(shape, dtype=k.dtype), np.zeros(shape, dtype=k.dtype)
        self._write(seq, k, v)

    def _gather(self, blocks: list, n: int):
        """The first ``n`` tokens of ``blocks`` as contiguous (n_heads, n, d_head) keys and values."""
        shape = (self.n_heads, len(blocks) * self.block_size, self.d_head)
        # Heads first, then the blocks in table order: token t of the result is block t // size, slot t % size.
        keys = self._k.transpose(1, 0, 2, 3)[:, blocks].reshape(shape)[:, :n]  # one copy, (n_heads, n, d_head)
        values = self._v.transpose(1, 0, 2, 3)[:, blocks].reshape(shape)[:, :n]
        return keys, values


def check_step(k_shape: tuple, v_shape: tuple, n_heads: int, d_head: int) -> None:
    """New keys and values of a paged cache: both exactly (n_heads, n_new, d_head)."""
    want = f"({n_heads}, n_new, {d_head})"
    for name, shape in (("k", k_shape), ("v", v_shape)):
        if len(shape) != 3 or shape[0] != n_heads or shape[2] != d_head:
            raise ValueError(f"{name} 的形状应为 {want}，收到 {name}.shape={tuple(shape)} (cache shape mismatch)。")
    if tuple(k_shape) != tuple(v_shape):
        raise ValueError(f"k 与 v 的形状必须相同：k.shape={tuple(k_shape)}，v.shape={tuple(v_shape)} "
                         f"(shape mismatch)。")


def check_dtype(what: str, dtype, cached) -> None:
    """What meets the cache must have the dtype of its pool (no silent conversion)."""
    if dtype != cached:
        raise TypeError(f"{what}是 {dtype}，缓存中的是 {cached}：请先统一 (dtype mismatch with the cache)。")


def check_query(q_shape: tuple, n_heads: int, d_head: int) -> None:
    """The queries of :func:`paged_attention`: exactly (n_heads, n_q, d_head)."""
    if len(q_shape) != 3 or q_shape[0] != n_heads or q_shape[2] != d_head:
        raise ValueError(f"q 的形状应为 ({n_heads}, n_q, {d_head})，与缓存的头数和宽度一致，"
                         f"收到 q.shape={tuple(q_shape)} (query shape mismatch)。")


def check_cache(cache, kind: type) -> None:
    """``cache`` must be this backend's :class:`PagedKVCache`."""
    if not isinstance(cache, kind):
        raise TypeError(f"cache 必须是 {kind.__module__}.PagedKVCache，收到 {type(cache).__name__} "
                        f"(expected a PagedKVCache of this backend)。")


def paged_attention(q, cache, seq, *, causal=True):
    """Attention of the newest queries of ``seq`` over its cached keys, read through the block table.

    Parameters
    ----------
    q : array_like of float, shape (n_heads, n_q, d_head)
        The queries of the sequence's last ``n_q`` positions (``n_q = 1`` per decoding step),
        whose keys and values are already appended.
    cache : PagedKVCache
    seq : int
        A sequence of ``cache``.
    causal : bool
        Bottom-right aligned: query i sees the cached keys up to position ``length - n_q + i``.

    Returns
    -------
    ndarray, shape (n_heads, n_q, d_head)
        Equal to ``scaled_dot_product_attention(q, *cache.read(seq), causal=causal)[0]`` up to
        rounding.  About ``GROUP_TOKENS`` tokens' worth of whole blocks are gathered at a time
        and attended with an online softmax; the groups' partial results are merged by their
        log-sum-exps (:func:`merge_partial`), so no copy of the whole sequence is made.
    """
    check_cache(cache, PagedKVCache)
    (q,) = as_float_arrays(q=q)
    check_query(q.shape, cache.n_heads, cache.d_head)
    n, n_q = cache._nonempty(seq), q.shape[-2]
    check_dtype("q ", q.dtype, cache._k.dtype)
    q = q * (1.0 / math.sqrt(cache.d_head))  # scaled once, not per group
    out = lse = None  # (n_heads, n_q, d_head), (n_heads, n_q): the groups merged so far
    for start, blocks in cache._groups(seq):
        keys, values = cache._gather(blocks, min(len(blocks) * cache.block_size, n - start))  # (h, g, d) each
        g = keys.shape[-2]
        crossed = causal and start + g - 1 > n - n_q  # the first query cannot see the group's last key
        mask = causal_rows(0, n_q, n_q, n, slice(start, start + g)) if crossed else None  # (n_q, g)
        part = attend_block(q, np.swapaxes(keys, -1, -2), values, slice(0, n_q), n_q, mask, False, g, g,
                            (cache.n_heads,))
        out, lse = part if out is None else merge_partial(out, lse, *part)
    return out


def merge_partial(out_a, lse_a, out_b, lse_b):
    """Attention over two disjoint sets of keys, each normalised over its own, as attention over both.

    ``out`` (..., n_q, d_v) is ``sum_j exp(s_j - lse) v_j`` over one set, ``lse`` (..., n_q)
    its log-sum-exp; weighting each by ``exp(lse - lse_both)`` renormalises over the union.
    A row that saw no key (``lse = -inf``) gets weight 0; if neither saw one it stays 0.
    """
    both = np.logaddexp(lse_a, lse_b)  # (..., n_q)
    shift = np.where(np.isfinite(both), both, 0.0)
    w_a, w_b = np.exp(lse_a - shift)[..., None], np.exp(lse_b - shift)[..., None]
    return out_a * w_a + out_b * w_b, both
