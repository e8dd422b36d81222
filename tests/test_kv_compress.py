"""Compressing the KV cache (chapter 23): per-group quantization, keep sets, a compressed cache.

The references are written here from the definitions, independently of attnlib:

* asymmetric b-bit quantization of a group: ``s = (max - min) / (2^b - 1)``, ``q = round((x - min) / s)``,
  computed group by group with Python loops; the error is at most ``s / 2``; the bytes are the packed codes plus
  the scales and minima (float16 per group of 32: ``b + 1`` bits per number);
* H2O: each key's attention summed over the queries that can see it, the ``recent`` newest keys kept, the rest of the
  budget to the largest totals (ties to the more recent key), by brute force over the keys;
* SnapKV: the last ``window`` rows' weights summed over the older keys, ``torch.nn.functional.avg_pool1d`` as
  SnapKV's code calls it, the window kept;
* a compressed cache attends exactly as attention restricted to the kept keys.
Both backends are run on the same inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlib import numpy as anp
from attnlib import torch as att


def _quantize_reference(x, bits, group_size):
    """Groups of ``group_size`` along the last axis, one by one: (codes, scale, minimum) in float64."""
    x = np.asarray(x, dtype=np.float64)
    rows = x.reshape(-1, x.shape[-1])
    codes = np.zeros(rows.shape, dtype=np.int64)
    scales, mins = [], []
    for r, row in enumerate(rows):
        for start in range(0, row.size, group_size):
            g = row[start:start + group_size]
            m, s = g.min(), (g.max() - g.min()) / (2**bits - 1)
            scales.append(s)
            mins.append(m)
            codes[r, start:start + group_size] = 0 if s == 0 else np.clip(np.rint((g - m) / s), 0, 2**bits - 1)
    n_groups = x.shape[-1] // group_size
    shape = x.shape[:-1] + (n_groups,)
    return codes.reshape(x.shape), np.array(scales).reshape(shape), np.array(mins).reshape(shape)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("axis", [-1, -2])
def test_quantization_matches_the_definition_and_its_error_bound(bits, axis):
    rng = np.random.default_rng(bits)
    x = rng.normal(size=(2, 3, 64, 32))
    x[..., 5] *= 20  # an outlier channel
    q = anp.quantize_kv(x, bits, axis=axis, group_size=16)
    moved = np.moveaxis(x, axis, -1)  # the reference groups along the last axis
    codes, scale, minimum = _quantize_reference(moved, bits, 16)
    assert np.array_equal(np.moveaxis(q.codes, axis, -1), codes)
    assert np.allclose(np.moveaxis(q.scale, axis, -1), scale) and np.allclose(np.moveaxis(q.minimum, axis, -1), minimum)
    assert q.codes.dtype == np.uint8 and q.codes.max() <= 2**bits - 1 and q.codes.min() == 0
    back = anp.dequantize_kv(q)
    half = np.repeat(q.scale, 16, axis=axis) / 2
    assert back.shape == x.shape and (np.abs(back - x) <= half * (1 + 1e-9)).all()
    # each group's extremes come back exactly (codes 0 and 2^b - 1)
    assert np.allclose(np.moveaxis(back, axis, -1).reshape(-1, 16).min(-1), moved.reshape(-1, 16).min(-1))
    assert np.allclose(np.moveaxis(back, axis, -1).reshape(-1, 16).max(-1), moved.reshape(-1, 16).max(-1))
    t = att.quantize_kv(torch.tensor(x), bits, axis=axis, group_size=16)
    assert torch.equal(t.codes, torch.from_numpy(q.codes)) and t.axis == q.axis
    assert np.allclose(att.dequantize_kv(t).numpy(), back)
    assert torch.equal(t.packed(), torch.from_numpy(q.packed())) and t.nbytes == q.nbytes


def test_the_outlier_channel_costs_per_token_groups_more_than_per_channel_ones():
    """The reason KIVI quantizes keys per channel: one large channel widens every per-token group."""
    rng = np.random.default_rng(0)
    k = rng.normal(size=(128, 64))
    k[:, 7] += 30  # a channel far from the rest, on every token
    error = {axis: np.abs(anp.dequantize_kv(anp.quantize_kv(k, 4, axis=axis, group_size=32)) - k).mean()
             for axis in (-1, -2)}
    assert error[-1] > 3 * error[-2]


def test_constant_groups_float16_and_the_dtype():
    x = np.ones((4, 8), dtype=np.float32)
    q = anp.quantize_kv(x, 4, axis=-1, group_size=4)
    assert not q.codes.any() and not q.scale.any() and np.array_equal(anp.dequantize_kv(q), x)
    assert q.scale.dtype == np.float32 and anp.dequantize_kv(q).dtype == np.float32
    h = np.random.default_rng(1).normal(size=(64, 32)).astype(np.float16)
    qh = anp.quantize_kv(h, 4, axis=-2, group_size=32)
    assert qh.scale.dtype == qh.minimum.dtype == np.float16
    err = np.abs(anp.dequantize_kv(qh).astype(np.float64) - h)
    assert (err <= np.repeat(qh.scale.astype(np.float64), 32, axis=0) / 2 + 1e-2).all()
    th = att.quantize_kv(torch.tensor(h), 4, axis=-2, group_size=32)
    assert th.scale.dtype == torch.float16 and torch.equal(th.codes, torch.from_numpy(qh.codes))


@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize("group_size", [32, 64])
def test_the_bytes_of_the_stored_structure_are_the_formula(bits, group_size):
    x = np.zeros((3, 128, 64), dtype=np.float16)
    x[..., ::3] = 1
    q = anp.quantize_kv(x, bits, axis=-2, group_size=group_size)
    formula = anp.quantized_nbytes(x.size, bits, group_size=group_size)
    assert q.nbytes == formula == x.size * bits // 8 + (x.size // group_size) * 4
    assert q.packed().size == x.size * bits // 8
    assert att.quantize_kv(torch.tensor(x), bits, axis=-2, group_size=group_size).nbytes == formula
    ratio = formula / x.nbytes
    assert ratio == (bits + 32 / group_size) / 16  # 4 bits, groups of 32: 5/16 = 0.3125
    assert anp.quantized_nbytes(x.size, 4, group_size=32, minimum_bits=4) / x.nbytes == 4.625 / 16


def test_packing_keeps_every_code():
    rng = np.random.default_rng(2)
    for bits in (1, 3, 5, 7):
        q = anp.quantize_kv(rng.normal(size=(5, 24)), bits, axis=-1, group_size=8)
        packed = q.packed()
        assert packed.size == -(-q.codes.size * bits // 8)
        bit = np.unpackbits(packed, bitorder="little")[: q.codes.size * bits].reshape(-1, bits)
        assert np.array_equal((bit << np.arange(bits)).sum(-1), q.codes.reshape(-1))


def _h2o_reference(w, budget, recent):
    """Brute force on (n_q, n_k): totals over visible queries, recent kept, then largest totals, recent first."""
    n_q, n_k = w.shape
    totals = [sum(w[i, j] for i in range(n_q) if j <= i + n_k - n_q) for j in range(n_k)]
    if budget >= n_k:
        return list(range(n_k))
    older = sorted(range(n_k - recent), key=lambda j: (-totals[j], -j))
    return sorted(older[:budget - recent] + list(range(n_k - recent, n_k)))


@pytest.mark.parametrize("budget, recent", [(4, 0), (5, 2), (8, 8), (20, 3), (9, 1)])
def test_h2o_keeps_the_recent_window_and_the_heaviest_visible_totals(budget, recent):
    rng = np.random.default_rng(budget)
    w = rng.random((2, 3, 12, 15))
    w[..., 0, 14] = 100.0  # above the diagonal: never counted
    w[0, 0, :, 2] = w[0, 0, :, 3] = 0.5  # equal totals: the later key wins
    keep = anp.h2o_keep(w, budget, recent=recent)
    for idx in np.ndindex(2, 3):
        assert keep[idx].tolist() == _h2o_reference(w[idx], budget, recent), idx
    assert torch.equal(att.h2o_keep(torch.tensor(w), budget, recent=recent), torch.from_numpy(keep))


def test_heavy_hitters_ties_go_to_the_more_recent_key():
    totals = np.array([1.0, 3, 3, 1, 3, 0, 0])
    assert anp.heavy_hitters(totals, 3, recent=1).tolist() == [2, 4, 6]
    assert att.heavy_hitters(torch.tensor(totals), 3, recent=1).tolist() == [2, 4, 6]


@pytest.mark.parametrize("kernel_size", [1, 3, 5])
def test_snapkv_votes_pool_and_keeps_the_window(kernel_size):
    rng = np.random.default_rng(kernel_size)
    w = torch.softmax(torch.tensor(rng.normal(size=(2, 3, 20, 20)) * 3), dim=-1)
    window, budget = 4, 9
    votes = w[..., -window:, : 20 - window].sum(-2)
    pooled = F.avg_pool1d(votes.reshape(-1, 1, 16), kernel_size, stride=1, padding=kernel_size // 2).reshape(2, 3, 16)
    top = pooled.topk(budget - window, dim=-1).indices
    want = torch.sort(torch.cat([top, torch.arange(16, 20).expand(2, 3, window)], -1), -1).values
    got = att.snapkv_keep(w, budget, window=window, kernel_size=kernel_size)
    assert torch.equal(got, want)
    assert np.array_equal(anp.snapkv_keep(w.numpy(), budget, window=window, kernel_size=kernel_size), want.numpy())
    assert anp.snapkv_keep(w.numpy(), 30, window=window).tolist() == [[list(range(20))] * 3] * 2


def test_a_compressed_cache_attends_as_attention_over_the_kept_keys():
    rng = np.random.default_rng(3)
    cache = anp.KVCache(2, 4, 8, n_kv_heads=2)
    for layer in range(2):
        cache.append(layer, rng.normal(size=(2, 10, 8)), rng.normal(size=(2, 10, 8)))
    keep = [np.array([[0, 3, 9], [1, 2, 9]]), np.array([[4, 5, 9], [0, 8, 9]])]
    small = anp.compress_cache(cache, keep)
    assert small.length == 3 and small.nbytes == 3 * cache.nbytes // 10
    for layer in range(2):
        k, v = cache.read(layer)
        sk, sv = small.read(layer)
        for h in range(2):
            assert np.array_equal(sk[h], k[h, keep[layer][h]]) and np.array_equal(sv[h], v[h, keep[layer][h]])
    tcache = att.KVCache(2, 4, 8, n_kv_heads=2)
    for layer in range(2):
        tcache.append(layer, *(torch.from_numpy(a.copy()) for a in cache.read(layer)))
    tsmall = att.compress_cache(tcache, [torch.from_numpy(k) for k in keep])
    for layer in range(2):
        assert np.array_equal(tsmall.read(layer)[0].numpy(), small.read(layer)[0])
    q, k_new, v_new = rng.normal(size=(4, 1, 8)), rng.normal(size=(2, 1, 8)), rng.normal(size=(2, 1, 8))
    k, v = cache.read(0)
    gather = [np.concatenate([k[h, keep[0][h]], k_new[h]]) for h in range(2)]
    values = [np.concatenate([v[h, keep[0][h]], v_new[h]]) for h in range(2)]
    want, _ = anp.grouped_query_attention(q, np.stack(gather), np.stack(values))
    assert np.allclose(anp.cached_attention(q, k_new, v_new, small, 0), want)


@pytest.mark.parametrize("call, match", [
    (lambda m: m.quantize_kv(np.zeros((4, 8)), 9, axis=-1, group_size=4), "bits"),
    (lambda m: m.quantize_kv(np.zeros((4, 8)), 4, axis=-1, group_size=3), "整数倍"),
    (lambda m: m.quantize_kv(np.zeros((4, 8)), 4, axis=2, group_size=4), "axis"),
    (lambda m: m.quantize_kv(np.array([[np.nan, 1.0]]), 4, axis=-1, group_size=2), "NaN"),
    (lambda m: m.h2o_keep(np.zeros((3, 3)), 2, recent=3), "recent"),
    (lambda m: m.h2o_keep(np.zeros((4, 3)), 2, recent=1), "n_q"),
    (lambda m: m.snapkv_keep(np.zeros((3, 8)), 6, window=2, kernel_size=4), "奇数"),
    (lambda m: m.snapkv_keep(np.zeros((3, 8)), 6, window=4), "window"),
    (lambda m: m.quantized_nbytes(100, 4, group_size=32), "整数倍"),
])
def test_bad_input_is_refused_in_chinese(call, match):
    for module in (anp, att):
        with pytest.raises(ValueError, match=match):
            call(module)


def test_bad_keep_sets_are_refused():
    cache = anp.KVCache(1, 2, 4, n_kv_heads=1)
    cache.append(0, np.zeros((1, 5, 4)), np.zeros((1, 5, 4)))
    for keep, match in (([np.array([[0, 0]])], "重复"), ([np.array([[0, 5]])], "之外"), ([np.array([0, 1])], "形状"),
                        ([], "每层")):
        with pytest.raises(ValueError, match=match):
            anp.compress_cache(cache, keep)
    with pytest.raises(TypeError, match="整数"):
        anp.compress_cache(cache, [np.array([[0.0, 1.0]])])
    with pytest.raises(TypeError, match="QuantizedKV"):
        anp.dequantize_kv(np.zeros(3))


@pytest.mark.parametrize("budget, recent", [(6, 2), (3, 0), (10, 10), (12, 1)])
def test_heavy_hitters_agree_between_backends_with_many_ties(budget, recent):
    totals = np.random.default_rng(budget).integers(0, 4, size=(4, 5, 16)).astype(float)  # ties everywhere
    want = anp.heavy_hitters(totals, budget, recent=recent)
    for idx in np.ndindex(4, 5):
        older = sorted(range(16 - recent), key=lambda j: (-totals[idx][j], -j))[:budget - recent]
        assert want[idx].tolist() == sorted(older + list(range(16 - recent, 16)))
    assert np.array_equal(att.heavy_hitters(torch.tensor(totals), budget, recent=recent).numpy(), want)
