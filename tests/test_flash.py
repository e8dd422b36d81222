"""attnlib.numpy.flash: tiled attention with an online softmax equals exact attention, in O(n * block) memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import flash
from conftest import to_numpy, to_torch


def exact(q, k, v, mask=None, causal=False):
    return anp.scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)[0]


@pytest.mark.parametrize("block_size", [1, 3, 7, (5, 11), (64, 2), 1000])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_equals_exact_attention_for_any_block_size(block_size, causal, masked):
    """Block sizes that divide nothing, one row or key per block, one block for everything."""
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 3, 37, 8)), rng.normal(size=(3, 45, 8)), rng.normal(size=(3, 45, 5))
    mask = rng.random((2, 1, 37, 45)) < 0.6 if masked else None
    got = anp.flash_attention(q, k, v, mask=mask, causal=causal, block_size=block_size)
    np.testing.assert_allclose(got, exact(q, k, v, mask, causal), rtol=1e-10, atol=1e-12)


def test_the_running_maximum_is_rescaled_when_a_later_block_beats_it():
    """Scores that grow from block to block (by hundreds): without the exp(m - m') rescale the sums would be wrong."""
    n = 40
    q = np.ones((3, 4))
    k = np.arange(n)[:, None] * np.array([[30.0, 0.0, 0.0, 0.0]])  # score of key j: 15 j
    v = np.random.default_rng(1).normal(size=(n, 2))
    got = anp.flash_attention(q, k, v, block_size=(3, 4))
    np.testing.assert_allclose(got, exact(q, k, v), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[0], v[-1], rtol=1e-5, atol=1e-5)  # the key before the last weighs e^-15 of it
    reversed_keys = anp.flash_attention(q, k[::-1], v[::-1], block_size=(3, 4))  # maximum in the first block
    np.testing.assert_allclose(reversed_keys, got, rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_of_small_scores_skip_the_shift_and_give_the_same_numbers(monkeypatch, dtype):
    """Rows whose scores are bounded (Cauchy-Schwarz) are exponentiated without a shift; a row with a large score
    keeps its running maximum; with the shortcut on or off, both agree with exact attention."""
    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=(40, 8)).astype(dtype) for _ in range(3))
    q[25] *= 100.0  # one row whose bound (and real scores) is far beyond exp_safe_limit
    small = flash.rows_with_small_scores(q / np.sqrt(8), k, causal=True)[:, 0]
    assert not small[25] and small[np.arange(40) != 25].all()
    mask = rng.random((40, 40)) < 0.8
    close = {"rtol": 2e-5, "atol": 2e-6} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}
    for user_mask in (None, mask):
        expected = exact(q, k, v, user_mask, causal=True)
        got = anp.flash_attention(q, k, v, mask=user_mask, causal=True, block_size=(10, 7))
        np.testing.assert_allclose(got, expected, **close)
        monkeypatch.setattr(flash, "BOUND_SHORTCUT", False)
        without = anp.flash_attention(q, k, v, mask=user_mask, causal=True, block_size=(10, 7))
        monkeypatch.setattr(flash, "BOUND_SHORTCUT", True)
        np.testing.assert_allclose(without, got, **close)


def test_a_rows_shortcut_depends_only_on_the_keys_it_sees():
    """With causal attention a later, longer key must not change whether an earlier row skips its shift."""
    rng = np.random.default_rng(10)
    q, k = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    before = flash.rows_with_small_scores(q, k, causal=True)[:, 0]
    k[5] *= 1e3
    after = flash.rows_with_small_scores(q, k, causal=True)[:, 0]
    assert before.all() and after[:5].all() and not after[5]
    assert not flash.rows_with_small_scores(q, k, causal=False)[:, 0].any()  # without causality every row sees k_5


def test_causal_outputs_are_bit_for_bit_independent_of_later_positions():
    """Blocks mixing small and large rows: changing later keys and values never changes earlier outputs at all."""
    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=(2, 30, 5)) for _ in range(3))
    out = anp.flash_attention(q, k, v, causal=True, block_size=(8, 4))
    k2, v2 = k.copy(), v.copy()
    k2[:, 20:], v2[:, 20:] = rng.normal(scale=100.0, size=(2, 2, 10, 5))
    out2 = anp.flash_attention(q, k2, v2, causal=True, block_size=(8, 4))
    np.testing.assert_array_equal(out[:, :20], out2[:, :20])


def test_fully_masked_rows_are_zero_and_nothing_is_nan():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(6, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 3))
    mask = rng.random((6, 9)) < 0.5
    mask[2] = False
    mask[4, :5] = False  # row 4 sees nothing in its first blocks, something later
    mask[4, 5:] = [True, False, False, True]
    got = anp.flash_attention(q, k, v, mask=mask, block_size=(2, 3))
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[2], 0.0)
    np.testing.assert_allclose(got, exact(q, k, v, mask), rtol=1e-10, atol=1e-12)
    early = anp.flash_attention(rng.normal(size=(5, 4)), k[:3], v[:3], causal=True, block_size=2)
    np.testing.assert_array_equal(early[:2], 0.0)  # more queries than keys: the first rows see no key


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(dtype):
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(10, 4)).astype(dtype) for _ in range(3))
    assert anp.flash_attention(q, k, v, block_size=3).dtype == dtype


def test_causal_blocks_never_touch_the_keys_they_cannot_see(monkeypatch):
    """A query block stops at its last query's visible key: count the keys each block multiplies."""
    seen = []
    real = flash.hide_

    def spy(s, rows, cols, *args):
        seen.append((rows.start, rows.stop, cols.start, cols.stop))
        return real(s, rows, cols, *args)

    monkeypatch.setattr(flash, "hide_", spy)
    rng = np.random.default_rng(4)
    n = 32
    q, k, v = (rng.normal(size=(n, 4)) for _ in range(3))
    anp.flash_attention(q, k, v, causal=True, block_size=8)
    assert all(cols_stop <= rows_stop for _, rows_stop, _, cols_stop in seen), seen
    assert sum(c1 - c0 for _, _, c0, c1 in seen) == 8 + 16 + 24 + 32  # 80 of 128 key columns, not 128


def test_extra_memory_grows_with_the_block_not_with_n_squared():
    n, d = 1024, 32
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(n, d)) for _ in range(3))
    io = n * d * 8
    for block in (32, 128):
        tracemalloc.start()
        anp.flash_attention(q, k, v, block_size=block)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # A few (block x block) score blocks, the scaled q, the output and per-block temporaries of width d.
        assert peak <= 4 * block * block * 8 + 6 * io, (block, peak)
        assert peak < n * n * 8 / 4, "never near one n x n matrix"


def test_default_blocks_hold_a_bounded_number_of_scores_and_causal_uses_several():
    assert flash.block_sizes(None, 1024, 1024, 1) == (1024, 1024)  # one block of 1M scores
    assert flash.block_sizes(None, 4096, 4096, 1) == (256, 4096)
    assert flash.block_sizes(None, 1024, 1024, 1, causal=True) == (128, 1024)  # 8 blocks: the hidden keys are skipped
    assert flash.block_sizes(None, 64, 64, 1, causal=True) == (16, 64)  # never fewer than 16 rows
    assert flash.block_sizes(None, 8192, 8192, 1) == (256, 4096)
    assert flash.block_sizes(None, 1024, 1024, 32) == (32, 1024)  # a batch shares the budget


@pytest.mark.parametrize("bad", [0, -3, (4,), (4, 0), 2.5, (True, 3)])
def test_bad_block_size_is_refused(bad):
    with pytest.raises(ValueError, match="block_size"):
        anp.flash_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), block_size=bad)


def test_inputs_are_checked_like_attention():
    with pytest.raises(ValueError, match="d_k"):
        anp.flash_attention(np.ones((3, 2)), np.ones((3, 4)), np.ones((3, 2)))
    with pytest.raises(TypeError, match="mask"):
        anp.flash_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), mask=np.ones((3, 3)))


# --------------------------------------------------------------------------- the torch twin

@pytest.mark.parametrize("block_size", [None, 4, (3, 7)])
@pytest.mark.parametrize("causal", [False, True])
def test_torch_twin_equals_torchs_own_attention_with_gradients(device, block_size, causal):
    """Same numbers as F.scaled_dot_product_attention, and the same gradients through the block loop."""
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, n, 8, generator=g, dtype=torch.float64) for n in (13, 19, 19))
    mask = torch.rand(2, 13, 19, generator=g) < 0.7
    mask[0, 3] = False  # a fully masked row
    mine = [t.clone().to(device).requires_grad_() for t in (q, k, v)]
    theirs = [t.clone().to(device).requires_grad_() for t in (q, k, v)]
    allowed = mask.to(device) & (causal_lower_right(13, 19)._materialize(device) if causal else True)
    out = att.flash_attention(*mine, mask=mask.to(device), causal=causal, block_size=block_size)
    ref = F.scaled_dot_product_attention(*theirs, attn_mask=allowed)
    ref = ref.masked_fill(~allowed.any(-1, keepdim=True), 0.0)  # the contract: a fully masked row is 0
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64).to(device)
    (out * upstream).sum().backward()
    (ref * upstream).sum().backward()
    for a, b in zip(mine, theirs, strict=True):
        assert torch.isfinite(a.grad).all()
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-11)


def test_torch_twin_matches_numpy(device):
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(3, 10, 4)), rng.normal(size=(3, 12, 4)), rng.normal(size=(3, 12, 6))
    mask = rng.random((3, 10, 12)) < 0.5
    expected = anp.flash_attention(q, k, v, mask=mask, causal=True, block_size=(4, 5))
    got = att.flash_attention(*(to_torch(a, device) for a in (q, k, v)), mask=to_torch(mask, device), causal=True,
                              block_size=(4, 5))
    assert got.device.type == device and got.dtype == torch.float64
    np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-12, atol=1e-13)
