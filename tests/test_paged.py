"""The paged KV cache (chapter 20): block tables, reference counts, fork with copy-on-write, paged attention.

The reference is the contiguous one: the keys and values appended, concatenated, and attention over them
(``scaled_dot_product_attention`` of the NumPy backend, causal bottom-right).  Block tables are checked
against the ids a fresh pool hands out in order (0, 1, 2, ...), reference counts and ``free_blocks`` exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib.numpy import paged as npaged
from attnlib.torch import paged as tpaged
from conftest import tol

H, D = 2, 3


class Paged:
    """One backend's paged cache on numpy inputs, returning numpy results."""

    def __init__(self, backend):
        self.backend = backend
        self.mod = npaged if backend.name == "numpy" else tpaged

    def cache(self, n_blocks, block_size, h=H, d=D):
        return self.mod.PagedKVCache(n_blocks, block_size, h, d)

    def append(self, cache, seq, k, v):
        cache.append(seq, self.backend.arr(k), self.backend.arr(v))

    def read(self, cache, seq):
        return tuple(self.backend.np(a) for a in cache.read(seq))

    def attend(self, q, cache, seq, **kw):
        return self.backend.np(self.mod.paged_attention(self.backend.arr(q), cache, seq, **kw))


def tokens(rng, n, h=H, d=D, dtype=np.float64):
    return rng.normal(size=(h, n, d)).astype(dtype), rng.normal(size=(h, n, d)).astype(dtype)


def filled(p, rng, sizes, n_blocks=40, block_size=4):
    """A cache with one sequence appended in pieces of ``sizes``; returns (cache, seq, keys, values)."""
    cache = p.cache(n_blocks, block_size)
    seq = cache.allocate()
    ks, vs = [], []
    for n in sizes:
        k, v = tokens(rng, n)
        p.append(cache, seq, k, v)
        ks.append(k)
        vs.append(v)
    return cache, seq, np.concatenate(ks, axis=1), np.concatenate(vs, axis=1)


@pytest.fixture
def small_groups(monkeypatch):
    """Groups of 8 tokens in paged_attention, so that a sequence of a few dozen spans several groups."""
    monkeypatch.setattr(npaged, "GROUP_TOKENS", 8)


SIZES = [3, 1, 7, 4, 0, 9, 1, 2]  # crossing block boundaries of 4 in every way: within, onto, over several


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n_q", [1, 3, 27])
def test_paged_attention_equals_attention_over_the_contiguous_keys(backend, small_groups, n_q, causal):
    p, rng = Paged(backend), np.random.default_rng(n_q)
    cache, seq, k, v = filled(p, rng, SIZES)
    got_k, got_v = p.read(cache, seq)
    np.testing.assert_array_equal(got_k, k)
    np.testing.assert_array_equal(got_v, v)
    q = rng.normal(size=(H, n_q, D))
    expected = anp.scaled_dot_product_attention(q, k, v, causal=causal)[0]
    np.testing.assert_allclose(p.attend(q, cache, seq, causal=causal), expected, **tol(np.float64))


@pytest.mark.parametrize("causal", [True, False])
def test_a_decoding_step_reads_a_table_whose_blocks_are_out_of_order(backend, small_groups, causal):
    """Blocks freed by one sequence go to another: its table is not ascending, and its partly filled last block
    lies before its full ones in the pool (torch answers one query from the pool in place, rows sorted)."""
    p, rng = Paged(backend), np.random.default_rng(11)
    cache = p.cache(6, 4)
    first, second = cache.allocate(), cache.allocate()
    p.append(cache, first, *tokens(rng, 8))  # blocks 0 and 1
    k1, v1 = tokens(rng, 12)
    p.append(cache, second, k1, v1)  # blocks 2, 3, 4; block 5 stays free
    cache.free(first)  # 0 and 1 return behind 5
    k2, v2 = tokens(rng, 7)
    p.append(cache, second, k2, v2)  # block 5 full, then 3 tokens in block 0
    assert cache.block_table(second) == [2, 3, 4, 5, 0]
    k, v = np.concatenate([k1, k2], axis=1), np.concatenate([v1, v2], axis=1)
    q = rng.normal(size=(H, 1, D))
    np.testing.assert_allclose(p.attend(q, cache, second, causal=causal),
                               anp.scaled_dot_product_attention(q, k, v)[0], **tol(np.float64))


@pytest.mark.parametrize("block_size", [1, 3, 4, 16, 64])
def test_interleaved_sequences_read_through_their_own_tables(backend, small_groups, block_size):
    """Two sequences appended in turns own interleaved blocks; each still reads and attends to its own tokens."""
    p, rng = Paged(backend), np.random.default_rng(block_size)
    cache = p.cache(60, block_size)
    seqs = [cache.allocate(), cache.allocate()]
    kept = {s: ([], []) for s in seqs}
    for n in (5, 2, 6, 1, 3):
        for s in seqs:
            k, v = tokens(rng, n)
            p.append(cache, s, k, v)
            kept[s][0].append(k)
            kept[s][1].append(v)
    for s in seqs:
        k, v = (np.concatenate(parts, axis=1) for parts in kept[s])
        np.testing.assert_array_equal(p.read(cache, s)[0], k)
        q = rng.normal(size=(H, 4, D))
        np.testing.assert_allclose(p.attend(q, cache, s), anp.scaled_dot_product_attention(q, k, v, causal=True)[0],
                                   **tol(np.float64))
    assert sorted(cache.block_table(seqs[0]) + cache.block_table(seqs[1])) == list(range(60 - cache.free_blocks))


def test_block_tables_fill_the_last_block_then_take_free_blocks_in_order(backend):
    p, rng = Paged(backend), np.random.default_rng(0)
    cache = p.cache(10, 4)
    a, b = cache.allocate(), cache.allocate()
    p.append(cache, a, *tokens(rng, 6))  # blocks 0 (full) and 1 (2 of 4)
    p.append(cache, b, *tokens(rng, 4))  # block 2, exactly full
    assert (cache.block_table(a), cache.block_table(b)) == ([0, 1], [2])
    p.append(cache, a, *tokens(rng, 2))  # fills block 1 exactly: no new block
    assert cache.block_table(a) == [0, 1] and cache.free_blocks == 7
    p.append(cache, a, *tokens(rng, 1))  # token 8 is slot 0 of a new block
    p.append(cache, b, *tokens(rng, 9))  # slots 0-3 of two new blocks, then one token of a third
    assert cache.block_table(a) == [0, 1, 3] and cache.block_table(b) == [2, 4, 5, 6]
    assert (cache.length(a), cache.length(b), cache.free_blocks) == (9, 13, 3)
    assert [cache.ref_count(i) for i in range(10)] == [1] * 7 + [0] * 3


def test_fork_shares_every_block_and_copies_a_shared_partial_block_before_writing(backend):
    p, rng = Paged(backend), np.random.default_rng(1)
    cache = p.cache(8, 4)
    parent = cache.allocate()
    k, v = tokens(rng, 6)  # block 0 full, block 1 holds 2 tokens
    p.append(cache, parent, k, v)
    child = cache.fork(parent)
    assert cache.block_table(child) == cache.block_table(parent) == [0, 1]
    assert [cache.ref_count(b) for b in (0, 1)] == [2, 2] and cache.free_blocks == 6
    k_child, v_child = tokens(rng, 1)
    p.append(cache, child, k_child, v_child)  # into the shared partial block: the child gets a copy first
    assert cache.block_table(child) == [0, 2] and cache.block_table(parent) == [0, 1]
    assert [cache.ref_count(b) for b in (0, 1, 2)] == [2, 1, 1] and cache.free_blocks == 5
    k_parent, v_parent = tokens(rng, 1)
    p.append(cache, parent, k_parent, v_parent)  # the parent's block 1 is its own now: written in place
    assert cache.block_table(parent) == [0, 1] and cache.free_blocks == 5
    np.testing.assert_array_equal(p.read(cache, parent)[0], np.concatenate([k, k_parent], axis=1))
    np.testing.assert_array_equal(p.read(cache, child)[0], np.concatenate([k, k_child], axis=1))
    np.testing.assert_array_equal(p.read(cache, child)[1], np.concatenate([v, v_child], axis=1))
    cache.free(parent)
    assert [cache.ref_count(b) for b in (0, 1, 2)] == [1, 0, 1] and cache.free_blocks == 6
    np.testing.assert_array_equal(p.read(cache, child)[0], np.concatenate([k, k_child], axis=1))  # still intact
    cache.free(child)
    assert cache.free_blocks == 8 and all(cache.ref_count(b) == 0 for b in range(8))


def test_full_shared_blocks_stay_shared_and_the_prefix_is_stored_once(backend):
    """A prompt of whole blocks forked four times: every request reads it from the same physical blocks."""
    p, rng = Paged(backend), np.random.default_rng(2)
    cache = p.cache(20, 4)
    prompt = cache.allocate()
    k, v = tokens(rng, 8)  # two full blocks
    p.append(cache, prompt, k, v)
    requests = [cache.fork(prompt) for _ in range(4)]
    before = cache.nbytes
    for r in requests:
        p.append(cache, r, *tokens(rng, 3))  # each its own new block; nothing copied
    assert all(cache.block_table(r)[:2] == [0, 1] for r in requests)
    assert cache.ref_count(0) == cache.ref_count(1) == 5
    assert sorted(cache.block_table(r)[2] for r in requests) == [2, 3, 4, 5]
    block = 2 * H * 4 * D * 8  # keys and values of one block, float64
    assert before == 2 * block and cache.nbytes == 6 * block  # the prompt once, plus one block per request
    for r in requests:
        np.testing.assert_array_equal(p.read(cache, r)[0][:, :8], k)


def test_freed_blocks_are_handed_out_again_only_when_nobody_holds_them(backend):
    p, rng = Paged(backend), np.random.default_rng(3)
    cache = p.cache(4, 2)
    a = cache.allocate()
    p.append(cache, a, *tokens(rng, 3))  # blocks 0, 1
    b = cache.fork(a)
    cache.free(a)
    assert cache.free_blocks == 2  # b still holds 0 and 1
    c = cache.allocate()
    p.append(cache, c, *tokens(rng, 4))
    assert cache.block_table(c) == [2, 3] and cache.free_blocks == 0
    cache.free(b)
    assert cache.free_blocks == 2
    d = cache.allocate()
    p.append(cache, d, *tokens(rng, 1))
    assert cache.block_table(d) == [0]  # returned blocks come back in the order they were freed


def test_out_of_blocks_says_how_many_and_changes_nothing(backend):
    p, rng = Paged(backend), np.random.default_rng(4)
    cache = p.cache(3, 4)
    seq = cache.allocate()
    k, v = tokens(rng, 10)  # 3 blocks, the last with 2 free slots
    p.append(cache, seq, k, v)
    with pytest.raises(ValueError, match=r"需要 1 个空闲块，池中只剩 0 个") as err:
        p.append(cache, seq, *tokens(rng, 3))
    assert "没有任何改变" in str(err.value)
    assert cache.length(seq) == 10 and cache.block_table(seq) == [0, 1, 2] and cache.free_blocks == 0
    np.testing.assert_array_equal(p.read(cache, seq)[0], k)
    p.append(cache, seq, *tokens(rng, 2))  # what fits still fits
    child = cache.fork(seq)
    cache.free(seq)  # nothing returns: the child holds every block
    other = cache.allocate()
    with pytest.raises(ValueError, match="需要 1 个空闲块"):
        p.append(cache, other, *tokens(rng, 1))
    assert cache.block_table(other) == [] and cache.length(other) == 0
    assert cache.length(child) == 12


def test_copy_on_write_needs_a_free_block_too(backend):
    p, rng = Paged(backend), np.random.default_rng(5)
    cache = p.cache(2, 4)
    seq = cache.allocate()
    p.append(cache, seq, *tokens(rng, 6))
    child = cache.fork(seq)
    with pytest.raises(ValueError, match=r"需要 1 个空闲块，池中只剩 0 个"):
        p.append(cache, child, *tokens(rng, 1))
    assert cache.block_table(child) == [0, 1] and [cache.ref_count(b) for b in (0, 1)] == [2, 2]


def test_unknown_and_freed_sequences_are_refused(backend):
    p, rng = Paged(backend), np.random.default_rng(6)
    cache = p.cache(4, 2)
    seq = cache.allocate()
    p.append(cache, seq, *tokens(rng, 1))
    cache.free(seq)
    for call in (lambda: cache.read(seq), lambda: cache.fork(seq), lambda: cache.free(seq),
                 lambda: p.append(cache, seq, *tokens(rng, 1)), lambda: cache.block_table(seq)):
        with pytest.raises(ValueError, match="已经被释放"):
            call()
    for bad in (7, -1, "0", None, True, [0]):
        with pytest.raises(ValueError, match="没有编号"):
            cache.length(bad)
    with pytest.raises(ValueError, match="没有编号"):
        p.attend(np.zeros((H, 1, D)), cache, 99)
    assert cache.allocate() == seq + 1  # ids are not reused


def test_bad_shapes_dtypes_and_empty_reads_are_refused(backend):
    p, rng = Paged(backend), np.random.default_rng(7)
    cache = p.cache(4, 2)
    seq = cache.allocate()
    with pytest.raises(ValueError, match="还没有缓存"):
        cache.read(seq)
    with pytest.raises(ValueError, match=r"形状应为 \(2, n_new, 3\)"):
        p.append(cache, seq, *tokens(rng, 2, h=3))
    with pytest.raises(ValueError, match="形状必须相同"):
        p.append(cache, seq, tokens(rng, 2)[0], tokens(rng, 1)[0])
    p.append(cache, seq, *tokens(rng, 2))
    with pytest.raises(TypeError, match="dtype"):
        p.append(cache, seq, *tokens(rng, 1, dtype=np.float32))
    with pytest.raises(TypeError, match="浮点"):
        p.append(cache, seq, np.ones((H, 1, D), dtype=int), np.ones((H, 1, D), dtype=int))
    with pytest.raises(ValueError, match="q 的形状应为"):
        p.attend(np.zeros((H, 1, D + 1)), cache, seq)
    with pytest.raises(TypeError, match="dtype"):
        p.attend(np.zeros((H, 1, D), dtype=np.float32), cache, seq)
    with pytest.raises(TypeError, match="PagedKVCache"):
        p.attend(np.zeros((H, 1, D)), anp.KVCache(1, H, D), seq)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="n_blocks"):
            p.cache(bad, 2)
    with pytest.raises(ValueError, match="block"):
        cache.ref_count(4)
    assert cache.length(seq) == 2 and cache.block_table(seq) == [0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_equals_numpy_and_keeps_the_dtype(dtype, device, small_groups):
    rng = np.random.default_rng(8)
    caches = npaged.PagedKVCache(30, 5, H, D), tpaged.PagedKVCache(30, 5, H, D)
    seqs = [c.allocate() for c in caches]
    for n in (4, 7, 1, 12):
        k, v = tokens(rng, n, dtype=dtype)
        caches[0].append(seqs[0], k, v)
        caches[1].append(seqs[1], torch.as_tensor(k, device=device), torch.as_tensor(v, device=device))
    fork = [c.fork(s) for c, s in zip(caches, seqs, strict=True)]
    k, v = tokens(rng, 2, dtype=dtype)
    caches[0].append(fork[0], k, v)
    caches[1].append(fork[1], torch.as_tensor(k, device=device), torch.as_tensor(v, device=device))
    q = rng.normal(size=(H, 3, D)).astype(dtype)
    for s0, s1 in (seqs, fork):
        assert caches[0].block_table(s0) == caches[1].block_table(s1)
        expected = npaged.paged_attention(q, caches[0], s0)
        got = tpaged.paged_attention(torch.as_tensor(q, device=device), caches[1], s1)
        assert expected.dtype == dtype and got.dtype == torch.as_tensor(q).dtype and got.device.type == device
        np.testing.assert_allclose(got.cpu().numpy(), expected, **tol(dtype))
    assert caches[0].nbytes == caches[1].nbytes > 0


def test_torch_refuses_keys_on_another_device_or_dtype():
    cache = tpaged.PagedKVCache(4, 2, H, D)
    seq = cache.allocate()
    cache.append(seq, torch.zeros(H, 1, D), torch.zeros(H, 1, D))
    with pytest.raises(TypeError, match="dtype"):
        cache.append(seq, torch.zeros(H, 1, D, dtype=torch.float64), torch.zeros(H, 1, D, dtype=torch.float64))
    with pytest.raises(TypeError, match="PagedKVCache"):
        tpaged.paged_attention(torch.zeros(H, 1, D), npaged.PagedKVCache(4, 2, H, D), 0)
    assert cache.length(seq) == 1
