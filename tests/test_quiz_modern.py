"""Quiz 3 (quiz-modern): every key and every option's explanation checked by code.

The keys are read from the hidden ``quiz.grade(...)`` calls of
``solutions/quiz-modern/quiz-modern.ipynb`` (as ``tests/test_quiz.py`` does), never
copied into a student-facing file.  Facts attnlib teaches (flash, sliding windows,
linear attention, the KV cache) are computed with it; RoPE, ALiBi and grouped
query attention are written here in a few lines of NumPy (a rotation of pairs, a
bias per head, repeated key/value heads), so these checks do not depend on the
library's newer modules; where those modules exist they are cross-checked at the end.
The one exception: question 3's slopes for a head count that is not a power of two
are read from ``anp.alibi_bias`` and held against the ALiBi paper's rule written here.
"""

from __future__ import annotations

import inspect
import itertools
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_quiz import questions

from attnlib import numpy as anp
from conftest import peak_bytes

NAME = "quiz-modern"
KEYS = {1: "B", 2: "BD", 3: "C", 4: "D", 5: "A", 6: "C", 7: "AD", 8: "ABC", 9: "D", 10: "B"}
GIB = 2**30


@pytest.fixture(scope="module")
def quiz_questions():
    return {i: q for i, q in enumerate(questions(NAME), 1)}


def options(q) -> dict[str, str]:
    """``{letter: option text}`` of one question's markdown."""
    return dict(re.findall(r"^- \*\*([A-D])\.\*\* (.+)$", q["text"], re.M))


def explanation(q, letter: str) -> str:
    """One option's explanation as the canonical variant's feedback reads it (a question's numbers filled in)."""
    text = q["call"]["explanations"][letter]
    values = q["question"].variant(None).values
    return text.format(**values) if values else text


def assert_keys_kinds_and_points(quiz_questions, keys: dict[int, str]) -> None:
    """A quiz's keys are ``keys``; 7 single-choice (1 point) + 3 multi-select (2 points) = 13, options A-D."""
    got = {i: q["call"]["key"] for i, q in quiz_questions.items()}
    assert got == keys
    for i, q in quiz_questions.items():
        assert q["call"]["multi"] == (len(keys[i]) > 1)
        assert set(options(q)) == set("ABCD"), i
    assert sum(q["points"] for q in quiz_questions.values()) == 13
    assert sum(q["call"]["multi"] for q in quiz_questions.values()) == 3


def test_keys_kinds_and_points(quiz_questions):
    """The keys below are the ones the checks in this file establish."""
    assert_keys_kinds_and_points(quiz_questions, KEYS)


# --------------------------------------------------------------------------- RoPE (questions 1, 2)

def rope(x, positions, base=10000.0):
    """Rotate each pair (x[..., 2i], x[..., 2i+1]) of ``x`` (..., n, d) by the angle position * base^(-2i/d)."""
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)  # (d/2,)
    angle = np.asarray(positions, dtype=float)[:, None] * theta  # (n, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def sinusoidal(positions, d, base=10000.0):
    """The additive sinusoidal encoding of the original Transformer, one row per position."""
    angle = np.asarray(positions, dtype=float)[:, None] * base ** (-np.arange(0, d, 2) / d)
    out = np.empty((len(positions), d))
    out[:, 0::2], out[:, 1::2] = np.sin(angle), np.cos(angle)
    return out


def test_q1_rope_rotates_query_and_key_pairs(quiz_questions):
    rng = np.random.default_rng(1)
    d = 8
    q, k = rng.standard_normal((2, d))
    # B: each pair is a complex number multiplied by e^(i * position * theta_i)
    z = (q[0::2] + 1j * q[1::2]) * np.exp(1j * 5 * 10000.0 ** (-np.arange(0, d, 2) / d))
    rotated = rope(q[None], [5])[0]
    np.testing.assert_allclose(rotated[0::2] + 1j * rotated[1::2], z, rtol=1e-12)
    # A: the dot product of two sinusoidal codes depends only on the offset; the score after the codes are added
    # to the embeddings and projected by W_Q, W_K depends on the absolute positions too; the rotation's does not
    codes = sinusoidal(np.arange(64), d)  # (64, d)
    gram = codes @ codes.T  # (64, 64)
    assert max(np.ptp(np.diagonal(gram, offset=k)) for k in range(64)) < 1e-12
    w_q, w_k = rng.standard_normal((2, d, d))

    def added(m, n, q=q, k=k, w_q=w_q, w_k=w_k):
        p = sinusoidal([m, n], d)
        return ((q + p[0]) @ w_q) @ ((k + p[1]) @ w_k)

    def rotated_score(m, n):
        return rope(q[None], [m])[0] @ rope(k[None], [n])[0]

    assert abs(added(3, 1) - added(10, 8)) > 1e-3
    zero = np.zeros(d)  # codes alone, projected: still not the offset alone
    assert abs(added(3, 1, zero, zero) - added(10, 8, zero, zero)) > 1e-3
    # "一般": with no content and W_Q = W_K = I the score is the codes' dot product, unchanged by the shift
    eye = np.eye(d)
    assert added(3, 1, zero, zero, eye, eye) == pytest.approx(added(10, 8, zero, zero, eye, eye), abs=1e-12)
    assert rotated_score(3, 1) == pytest.approx(rotated_score(10, 8), abs=1e-12)
    text = explanation(quiz_questions[1], "A")
    assert "编码本身的点积只取决于位置差" in text and "W_Q" in text and "W_K" in text and "一般" in text
    # C: what the rotation does to a score is not a bias of the distance alone: it depends on the vectors
    q2, k2 = rng.standard_normal((2, d))
    change = rotated_score(3, 1) - q @ k
    change2 = rope(q2[None], [3])[0] @ rope(k2[None], [1])[0] - q2 @ k2
    assert abs(change - change2) > 1e-3
    # D: rotating the values too puts absolute positions into the output; rotating only q and k does not
    n = 6
    x_q, x_k, x_v = rng.standard_normal((3, n, d))
    pos = np.arange(n)

    def output(shift, rotate_values):
        p = pos + shift
        v = rope(x_v, p) if rotate_values else x_v
        return anp.scaled_dot_product_attention(rope(x_q, p), rope(x_k, p), v, causal=True)[0]

    np.testing.assert_allclose(output(0, False), output(7, False), atol=1e-12)
    assert not np.allclose(output(0, True), output(7, True), atol=1e-3)
    assert "值保持原样" in explanation(quiz_questions[1], "B")


def decay_factor(distances, d, base=10000.0):
    """RoFormer's relative upper bound (2/d) sum_j |S_j|, S_j = sum_{i<j} e^(i t theta_i), at each distance t."""
    theta = base ** (-np.arange(0, d, 2) / d)  # (d/2,)
    partial = np.cumsum(np.exp(1j * np.asarray(distances, dtype=float)[:, None] * theta), axis=-1)  # (t, d/2)
    return np.abs(partial).mean(axis=-1)


def decay_bound(q, k, distances, base=10000.0):
    """The bound of RoFormer's long-term decay (Abel summation): max_i |h_(i+1) - h_i| * sum_j |S_j|, h_(d/2) = 0."""
    d = q.shape[-1]
    h = np.append((q[0::2] + 1j * q[1::2]) * np.conj(k[0::2] + 1j * k[1::2]), 0)  # (d/2 + 1,)
    return np.abs(np.diff(h)).max() * decay_factor(distances, d, base) * (d // 2)


def test_q2_rope_relative_norm_preserving_not_monotone_no_parameters(quiz_questions):
    rng = np.random.default_rng(2)
    d = 16
    q, k = rng.standard_normal((2, d))
    # B: only m - n matters
    scores = {(m, n): rope(q[None], [m])[0] @ rope(k[None], [n])[0] for m, n in [(4, 1), (104, 101), (2004, 2001)]}
    assert max(scores.values()) - min(scores.values()) < 1e-9
    # D: lengths unchanged
    x = rng.standard_normal((50, d))
    np.testing.assert_allclose(np.linalg.norm(rope(x, np.arange(50)), axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    # A: d = 2, one pair with frequency 1: q . R(delta) q = |q|^2 cos(delta), not decreasing with the distance
    q2 = rng.standard_normal(2)
    at = {delta: rope(q2[None], [0])[0] @ rope(q2[None], [delta])[0] / (q2 @ q2) for delta in (3, 6)}
    assert at[3] == pytest.approx(math.cos(3)) and at[6] == pytest.approx(math.cos(6))
    assert round(at[3], 2) == -0.99 and round(at[6], 2) == 0.96 and at[6] > at[3]
    text = explanation(quiz_questions[2], "A")
    assert "−0.99" in text and "+0.96" in text and "相距 3" in text and "相距 6" in text
    # A: RoFormer's long-term decay is an upper bound of the dot product that shrinks, not the dot product itself
    assert "上界" in text and "平均" not in text
    distances = np.arange(2001)
    factor = decay_factor(distances, 128)  # (2001,)
    assert factor[0] == pytest.approx((64 + 1) / 2) == factor.max()  # every S_j = j at distance 0
    edges = [0, 10, 50, 100, 250, 500, 1000, 2001]
    means = np.array([factor[a:b].mean() for a, b in itertools.pairwise(edges)])
    assert (np.diff(means) < 0).all()  # it falls overall ...
    assert (np.diff(factor) > 0).sum() > 100  # ... with ups and downs on the way
    np.testing.assert_allclose(decay_factor(distances, 2), 1.0)  # "d 较大时": one pair (d = 2) has no decay at all
    for seed in range(3):
        q3, k3 = np.random.default_rng(20 + seed).standard_normal((2, 128))
        scores = np.array([rope(q3[None], [t])[0] @ k3 for t in distances])  # key at 0, query at distance t
        bound = decay_bound(q3, k3, distances)
        assert (np.abs(scores) <= bound + 1e-9).all()
        assert (np.diff(np.abs(scores)) > 0).any()  # the dot product itself is not monotone
    # C: no parameter: any position is computed from the formula, far beyond any "table"
    far = rope(x[:1], [10**7])
    assert np.isfinite(far).all() and np.linalg.norm(far) == pytest.approx(np.linalg.norm(x[0]))


# --------------------------------------------------------------------------- ALiBi (questions 3, 4)

def alibi_slopes(n_heads: int) -> np.ndarray:
    """2^(-8h/H) for h = 1..H."""
    return 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)


def paper_slopes(n_heads: int) -> list:
    """The slopes of the ALiBi paper's code (Press et al., 2022), for any number of heads."""
    if math.log2(n_heads).is_integer():
        return [2.0 ** (-8.0 * i / n_heads) for i in range(1, n_heads + 1)]
    closest = 2 ** math.floor(math.log2(n_heads))
    return paper_slopes(closest) + paper_slopes(2 * closest)[0::2][:n_heads - closest]


def library_slopes(n_heads: int) -> np.ndarray:
    """The slopes of ``anp.alibi_bias``: minus its bias of query 1 on key 0 (distance 1), head by head."""
    return -np.asarray(anp.alibi_bias(2, 2, n_heads))[:, 1, 0]


def alibi_causal(n: int, n_heads: int) -> np.ndarray:
    """(H, n, n): -m_h (i - j) where key j is not after query i, -inf after it."""
    distance = np.arange(n)[:, None] - np.arange(n)[None, :]  # i - j
    bias = -alibi_slopes(n_heads)[:, None, None] * distance
    return np.where(distance >= 0, bias, -np.inf)


def alibi_attention(q, k, v, slopes):
    """Causal attention with the bias added to the scaled scores, before softmax; q, k, v (H, n, d)."""
    n = q.shape[-2]
    distance = np.arange(n)[:, None] - np.arange(n)[None, :]
    scores = anp.attention_scores(q, k) - np.asarray(slopes)[:, None, None] * distance  # (H, n, n)
    weights = anp.softmax(scores, mask=distance >= 0)
    return weights @ v, weights


def test_q3_alibi_biases_scaled_scores_before_softmax(quiz_questions):
    rng = np.random.default_rng(3)
    h, n, d = 8, 7, 4
    np.testing.assert_allclose(alibi_slopes(8), [1 / 2**i for i in range(1, 9)])
    text = explanation(quiz_questions[3], "C")
    assert "2^(−8/h)、2^(−16/h)、…、2^(−8)" in text and "2 的幂时" in text and "另有取法" in text
    # C: 2^(-8i/h) holds for h a power of two; other head counts take the paper's rule (attnlib's alibi_bias)
    for heads in (1, 2, 4, 8, 16):
        np.testing.assert_allclose(library_slopes(heads), alibi_slopes(heads), rtol=1e-12)
        np.testing.assert_allclose(paper_slopes(heads), alibi_slopes(heads), rtol=1e-12)
    for heads in (6, 12, 20):
        np.testing.assert_allclose(library_slopes(heads), paper_slopes(heads), rtol=1e-12)
        assert not np.allclose(library_slopes(heads), alibi_slopes(heads), rtol=1e-3)
    # A, C: equal raw scores -> weights shrink with the distance, each row still sums to one
    q = np.zeros((h, n, d))
    _, w = alibi_attention(q, rng.standard_normal((h, n, d)), rng.standard_normal((h, n, d)), alibi_slopes(h))
    np.testing.assert_allclose(w.sum(-1), 1.0)
    last = w[:, -1, :]  # the last query sees every key; key n-1 is nearest
    assert (np.diff(last, axis=-1) > 0).all()
    # B: the bias before softmax = e^score times e^(-m d), then the row normalised; without normalising, rows < 1
    q, k, v = rng.standard_normal((3, h, n, d))
    _, w = alibi_attention(q, k, v, alibi_slopes(h))
    distance = np.arange(n)[:, None] - np.arange(n)[None, :]
    plain = anp.scaled_dot_product_attention(q, k, v, causal=True)[1]
    decayed = plain * np.exp(-alibi_slopes(h)[:, None, None] * np.maximum(distance, 0))
    np.testing.assert_allclose(w, decayed / decayed.sum(-1, keepdims=True), atol=1e-12)
    assert (decayed.sum(-1)[:, 1:] < 1 - 1e-6).all()
    # D: the scaling stays; slopes of zero give back plain scaled dot-product attention
    out0, w0 = alibi_attention(q, k, v, np.zeros(h))
    ref_out, ref_w = anp.scaled_dot_product_attention(q, k, v, causal=True)
    np.testing.assert_allclose(w0, ref_w, atol=1e-12)
    np.testing.assert_allclose(out0, ref_out, atol=1e-12)


def weight_ratio(slope: float, distance: int) -> float:
    """Weight of the key ``distance`` back over the query's own key, all raw scores equal (a softmax row)."""
    row = anp.softmax(-slope * np.arange(distance + 1, dtype=float))  # entry t: the key t steps back
    return row[distance] / row[0]


def test_q4_alibi_runs_longer_but_steep_heads_see_only_nearby(quiz_questions):
    slopes = alibi_slopes(8)
    np.testing.assert_allclose(slopes, 2.0 ** -np.arange(1, 9))
    # D: head 1, distance 40: e^-20 ~ 2e-9 < 1e-8
    a = weight_ratio(slopes[0], 40)
    assert a == pytest.approx(math.exp(-20)) and a < 1e-8 and f"{a:.0e}" == "2e-09"
    text = explanation(quiz_questions[4], "D")  # 10^-8 = e^-18.4: the exponent 40/2 is past it
    assert "e^(−40/2)" in text and "10⁻⁸ ≈ e^(−18.4)" in text and round(-math.log(1e-8), 1) == 18.4 < 40 / 2
    # A: head 8, distance 1000: e^(-1000/256) ~ 0.02, far from 1e-8
    b = weight_ratio(slopes[7], 1000)
    assert b == pytest.approx(math.exp(-1000 / 256)) and round(b, 2) == 0.02 and b > 1e-8
    assert "e^(−1000/256)" in explanation(quiz_questions[4], "A") and 1000 / 256 < 12
    # B: eight different slopes, a geometric series
    assert len(set(slopes)) == 8 and np.allclose(slopes[1:] / slopes[:-1], 0.5)
    # C: the bias is a formula: any length, and a longer sequence's bias starts with the shorter one's
    short, long = alibi_causal(512, 8), alibi_causal(4096, 8)
    np.testing.assert_array_equal(long[:, :512, :512], short)


# --------------------------------------------------------------------------- GQA and the KV cache (questions 5-7)

def grouped(q, k, v, *, causal=False):
    """Grouped-query attention, each key/value head repeated h/h_kv times: q (..., h, n, d), k, v (..., h_kv, n, d)."""
    group = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)  # head i reads key/value head i // group
    return anp.scaled_dot_product_attention(q, k, v, causal=causal)


def test_q5_query_heads_share_key_value_groups(quiz_questions):
    rng = np.random.default_rng(5)
    h, h_kv, n, d = 32, 8, 5, 4
    q = rng.standard_normal((h, n, d))
    k, v = rng.standard_normal((2, h_kv, n, d))
    out, weights = grouped(q, k, v, causal=True)
    # A: PyTorch's enable_gqa=True gives the same; query head i reads key/value head i // 4
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a)[None] for a in (q, k, v)), is_causal=True,
                                         enable_gqa=True)[0].numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)
    k2 = k.copy()
    k2[1] += rng.standard_normal((n, d))
    changed = ~np.isclose(grouped(q, k2, v, causal=True)[0], out).all(axis=(-1, -2))
    assert np.flatnonzero(changed).tolist() == [4, 5, 6, 7]
    assert "i // 4" in explanation(quiz_questions[5], "A")
    # B: h_kv = 1 (MQA) is the special case where every query head reads the same key/value head
    out1, _ = grouped(q, k[:1], v[:1])
    np.testing.assert_allclose(out1, anp.scaled_dot_product_attention(q, k[:1], v[:1])[0], atol=1e-12)
    # C: 32 heads of weights, and the heads of one group still weigh differently
    assert weights.shape == (h, n, n)
    assert not np.allclose(weights[0], weights[1])
    # D: d_head unchanged, so the keys and values shrink by h_kv / h
    assert (k.nbytes + v.nbytes) / (2 * h * n * d * 8) == h_kv / h


def cache_bytes(layers, kv_heads, d_head, itemsize, batch, tokens) -> int:
    return layers * 2 * kv_heads * d_head * itemsize * batch * tokens


def test_kv_cache_formula_is_what_attnlib_stores():
    rng = np.random.default_rng(6)
    layers, heads, d_head, batch, tokens = 3, 4, 8, 2, 5
    cache = anp.KVCache(layers, heads, d_head, capacity=tokens)
    for layer in range(layers):
        kv = rng.standard_normal((2, batch, heads, tokens, d_head)).astype(np.float16)
        cache.append(layer, kv[0], kv[1])
    assert cache.nbytes == cache_bytes(layers, heads, d_head, 2, batch, tokens)


def gib_options(q) -> dict[str, float]:
    return {letter: float(re.fullmatch(r"(\d+) GiB", text).group(1)) for letter, text in options(q).items()}


def test_q6_kv_cache_of_the_example_is_16_gib(quiz_questions):
    q6 = quiz_questions[6]
    stem = q6["text"]
    for fact in ("32 层", "32 个头", "$d_{head} = 128$", "float16", "batch 为 8", "4096 个词元"):
        assert fact in stem
    right = cache_bytes(32, 32, 128, np.dtype(np.float16).itemsize, 8, 4096)
    assert right == 2**34 == 16 * GIB
    assert cache_bytes(32, 32, 128, 2, 1, 1) == 2**19  # 0.5 MiB per token of one sequence
    # the distractors are the three usual slips: batch 1, K or V only, float32
    slips = {cache_bytes(32, 32, 128, 2, 1, 4096), right // 2, cache_bytes(32, 32, 128, 4, 8, 4096)}
    shown = gib_options(q6)
    assert sorted(shown.values()) == sorted(b / GIB for b in slips | {right})
    assert [letter for letter, gib in shown.items() if gib * GIB == right] == [KEYS[6]]
    assert "batch 为 1" in explanation(q6, "A") and "少乘了一个 2" in explanation(q6, "B")
    assert "float32" in explanation(q6, "D")


def test_q7_gqa_shrinks_the_cache_and_kv_projections_not_the_queries():
    d_model, h, h_kv, d_head = 4096, 32, 8, 128
    # D: the cache is proportional to the key/value heads
    assert cache_bytes(32, h_kv, d_head, 2, 8, 4096) == 4 * GIB
    # A: W_Q maps d_model to h * d_head whatever h_kv is; C: W_K, W_V shrink to h_kv * d_head outputs
    w_q_mha, w_q_gqa = d_model * h * d_head, d_model * h * d_head
    w_k_mha, w_k_gqa = d_model * h * d_head, d_model * h_kv * d_head
    assert w_q_gqa == w_q_mha and w_k_gqa * 4 == w_k_mha
    # B: one decoding step with t cached tokens: h x t scores, with 8 or 32 key/value heads alike
    rng = np.random.default_rng(7)
    t, d = 9, 4
    q = rng.standard_normal((h, 1, d))
    for kv_heads in (h, h_kv):
        k, v = rng.standard_normal((2, kv_heads, t, d))
        assert grouped(q, k, v)[1].size == h * t


# --------------------------------------------------------------------------- FlashAttention (question 8)

def online_attention(q, k, v, block: int, *, rescale=True):
    """Attention over key blocks with a running max, a running sum and a running weighted sum per row."""
    n_q = q.shape[0]
    m = np.full((n_q, 1), -np.inf)
    denom, acc = np.zeros((n_q, 1)), np.zeros((n_q, v.shape[1]))
    computed = 0
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T / math.sqrt(q.shape[1])  # (n_q, block): one block of scores
        computed += s.size
        m_new = np.maximum(m, s.max(axis=1, keepdims=True))
        factor = np.exp(m - m_new) if rescale else 1.0
        p = np.exp(s - m_new)
        denom = denom * factor + p.sum(axis=1, keepdims=True)
        acc = acc * factor + p @ v[start:start + block]
        m = m_new
    return acc / denom, computed



def test_q8_flash_attention_is_exact_with_linear_memory_and_quadratic_work(quiz_questions):
    rng = np.random.default_rng(8)
    n, d = 96, 8
    q, k, v = rng.standard_normal((3, n, d)) * 2.0
    exact = anp.scaled_dot_product_attention(q, k, v)[0]
    # A: exact, whatever the blocks
    for block in (1, 7, 32, (5, 11), None):
        np.testing.assert_allclose(anp.flash_attention(q, k, v, block_size=block), exact, atol=1e-12)
    # B: the running sums must be rescaled by e^(m_old - m_new) when the row's maximum grows
    out, computed = online_attention(q, k, v, 16)
    np.testing.assert_allclose(out, exact, atol=1e-12)
    wrong, _ = online_attention(q, k, v, 16, rescale=False)
    assert np.abs(wrong - exact).max() > 0.1
    # D: every one of the n x n scores is still computed
    assert computed == n * n
    # C: doubling n multiplies the full weight matrix's memory by 4; flash's peak hardly grows
    big = {m: rng.standard_normal((3, m, 16)) for m in (1024, 2048)}
    flash = {m: peak_bytes(lambda m=m: anp.flash_attention(*big[m])) for m in big}
    full = {m: peak_bytes(lambda m=m: anp.scaled_dot_product_attention(*big[m])) for m in big}
    assert full[2048] > 3.5 * full[1024] and full[2048] >= 2048 * 2048 * 8
    assert flash[2048] < 1.5 * flash[1024] and flash[2048] < full[2048] / 3
    # C: O(n) for the rows' statistics plus O(r c) for one tile of scores (chapter 10: O(n * block)).
    # Fixed 32 x 32 tiles: the peak per query row stays flat as n doubles (an n x n part would double it).
    per_row = {m: peak_bytes(lambda m=m: anp.flash_attention(*big[m], block_size=32)) / m for m in big}
    assert 0.8 < per_row[2048] / per_row[1024] < 1.25
    # All n queries in one block, c keys per tile: each extra key column costs a column of n float64 per live tile
    # (chapter 10 measures about two: the previous tile is not yet freed), the O(r c) part
    n = 2048
    tile = {c: peak_bytes(lambda c=c: anp.flash_attention(*big[n], block_size=(n, c))) for c in (64, 128)}
    columns = (tile[128] - tile[64]) / (n * 64 * 8)
    assert 0.5 < columns < 3.0, columns
    text = explanation(quiz_questions[8], "C")
    assert "O(n)" in text and "O(r·c)" in text and "O(n·块大小)" in text and "O(n²)" in text


# --------------------------------------------------------------------------- sliding windows (question 9)

def stacked_windows(x, window: int, layers: int):
    for _ in range(layers):
        x = anp.sliding_window_attention(x, x, x, window, causal=True)
    return x


def test_q9_sliding_window_cost_and_receptive_field(quiz_questions):
    rng = np.random.default_rng(9)
    n, w, d = 40, 4, 8
    x = rng.standard_normal((n, d))
    # D: the number of scores: sum over i of min(i + 1, w) = n w - w (w - 1) / 2
    seen = anp.causal_mask(n) & anp.sliding_window_mask(n, w)
    assert seen.sum() == n * w - w * (w - 1) // 2
    # D: L layers reach back L (w - 1) positions, not one more
    layers, i = 3, 35
    base = stacked_windows(x, w, layers)[i]
    for j, reached in ((i - layers * (w - 1), True), (i - layers * (w - 1) - 1, False)):
        x2 = x.copy()
        x2[j] += 3.0
        moved = np.abs(stacked_windows(x2, w, layers)[i] - base).max()
        assert (moved > 1e-9) == reached, (j, moved)
    # A: only the window's keys, query by query, give the masked full result without the n x n matrix
    full, _ = anp.scaled_dot_product_attention(x, x, x, mask=seen)
    banded = np.stack([anp.scaled_dot_product_attention(x[i:i + 1], x[max(0, i - w + 1):i + 1],
                                                        x[max(0, i - w + 1):i + 1])[0][0] for i in range(n)])
    np.testing.assert_allclose(banded, full, atol=1e-12)
    np.testing.assert_allclose(anp.sliding_window_attention(x, x, x, w, causal=True), full, atol=1e-12)
    # B: two layers already see further than one window
    j = i - w  # outside one layer's window of position i
    x2 = x.copy()
    x2[j] += 3.0
    assert np.allclose(stacked_windows(x2, w, 1)[i], stacked_windows(x, w, 1)[i])
    assert not np.allclose(stacked_windows(x2, w, 2)[i], stacked_windows(x, w, 2)[i])
    # C: when n > w the first w rows see only keys inside the window and agree with full causal attention; every
    # later row's weights differ (zero against positive outside the window), and so, in general, does its output
    causal_out, causal_w = anp.scaled_dot_product_attention(x, x, x, causal=True)
    _, window_w = anp.scaled_dot_product_attention(x, x, x, mask=seen)
    np.testing.assert_allclose(full[:w], causal_out[:w], atol=1e-12)
    outside = anp.causal_mask(n) & ~seen  # (n, n): keys a full causal row sees and the window does not
    assert (causal_w[outside] > 0).all() and (window_w[outside] == 0).all()
    assert outside[w:].any(axis=-1).all() and not outside[:w].any()
    assert (np.abs(full - causal_out).max(axis=-1)[w:] > 1e-6).all()
    # the special case: with all value vectors equal, every output is that vector in both
    same = np.tile(rng.standard_normal(d), (n, 1))  # (n, d)
    np.testing.assert_allclose(anp.sliding_window_attention(x, x, same, w, causal=True),
                               anp.scaled_dot_product_attention(x, x, same, causal=True)[0], atol=1e-12)
    text = explanation(quiz_questions[9], "C")
    assert "一般也不同" in text and "所有值向量都相同" in text and "只要 n > w" not in text


# --------------------------------------------------------------------------- linear attention (question 10)

def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # elu(x) + 1


def test_q10_linear_attention_is_linear_in_n_and_only_an_approximation():
    rng = np.random.default_rng(10)
    n, d = 24, 4
    q, k, v = rng.standard_normal((3, n, d))
    lin = anp.linear_attention(q, k, v)
    # B: associativity: phi(Q) (phi(K)^T V) / phi(Q) . sum phi(k) equals the explicit n x n form
    implicit = phi(q) @ phi(k).T  # (n, n)
    weights = implicit / implicit.sum(-1, keepdims=True)
    np.testing.assert_allclose(lin, weights @ v, atol=1e-12)
    kv, z = phi(k).T @ v, phi(k).sum(0)  # (d, d_v), (d,): nothing of size n x n
    np.testing.assert_allclose(lin, (phi(q) @ kv) / (phi(q) @ z)[:, None], atol=1e-12)
    # A, B: not softmax attention; softmax's weights are full rank, the linear ones have rank <= d
    soft, soft_w = anp.scaled_dot_product_attention(q, k, v)
    assert np.abs(lin - soft).max() > 0.05
    assert np.linalg.matrix_rank(soft_w) == n and np.linalg.matrix_rank(weights) <= d
    # B: softmax can make every query look almost only at its own key; rank <= d stays sqrt(n - d) from the identity
    keys = rng.standard_normal((n, d))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    sharp = anp.scaled_dot_product_attention(1e4 * keys, keys, v)[1]
    assert np.diag(sharp).min() > 0.99
    for beta in (1.0, 10.0, 100.0):  # whatever the queries, rank <= d keeps the weights away from the identity
        implicit = phi(beta * keys) @ phi(keys).T
        lin_w = implicit / implicit.sum(-1, keepdims=True)
        assert np.linalg.matrix_rank(lin_w) <= d
        assert np.linalg.norm(lin_w - np.eye(n)) >= math.sqrt(n - d) - 1e-9
    # C: causal linear attention by prefix sums equals the explicit masked form: usable in training too
    causal = np.tril(phi(q) @ phi(k).T)
    np.testing.assert_allclose(anp.linear_attention(q, k, v, causal=True),
                               (causal / causal.sum(-1, keepdims=True)) @ v, atol=1e-12)
    # D: every key keeps a positive weight
    assert (weights > 0).all()


# --------------------------------------------------------------------------- cross-checks with attnlib's newer modules

def test_cross_check_with_attnlib_positions_and_gqa():
    """Where ``attnlib.numpy`` has RoPE, ALiBi and GQA, they agree with the small versions above."""
    rng = np.random.default_rng(11)
    if hasattr(anp, "apply_rope"):
        x = rng.standard_normal((2, 6, 8))
        np.testing.assert_allclose(anp.apply_rope(x), rope(x, np.arange(6)), atol=1e-12)
    if hasattr(anp, "alibi_bias"):
        got = np.asarray(anp.alibi_bias(6, 6, 8))
        want = alibi_causal(6, 8)
        seen = np.isfinite(want)
        assert got.shape == want.shape
        np.testing.assert_allclose(got[seen], want[seen], atol=1e-12)  # keys not after the query
    if hasattr(anp, "grouped_query_attention"):
        q = rng.standard_normal((8, 5, 4))
        k, v = rng.standard_normal((2, 2, 5, 4))
        out = anp.grouped_query_attention(q, k, v, causal=True)
        out = out[0] if isinstance(out, tuple) else out
        np.testing.assert_allclose(out, grouped(q, k, v, causal=True)[0], atol=1e-12)
    if "n_kv_heads" in inspect.signature(anp.KVCache).parameters:  # question 7's cache, stored by attnlib
        layers, heads, kv_heads, d_head, batch, tokens = 2, 8, 2, 4, 3, 5
        cache = anp.KVCache(layers, heads, d_head, n_kv_heads=kv_heads)
        for layer in range(layers):
            kv = rng.standard_normal((2, batch, kv_heads, tokens, d_head)).astype(np.float16)
            cache.append(layer, kv[0], kv[1])
        assert cache.nbytes == cache_bytes(layers, kv_heads, d_head, 2, batch, tokens)
        assert cache.nbytes * heads == cache_bytes(layers, heads, d_head, 2, batch, tokens) * kv_heads
    if not any(hasattr(anp, name) for name in ("apply_rope", "alibi_bias", "grouped_query_attention")):
        pytest.skip("attnlib.numpy 还没有 positions / gqa 模块")
