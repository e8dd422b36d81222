"""Quiz 4 (quiz-frontier): every key and every option's explanation checked by code.

The keys are read from the hidden ``quiz.grade(...)`` calls of
``solutions/quiz-frontier/quiz-frontier.ipynb`` (as ``tests/test_quiz.py`` does), never
copied into a student-facing file.  Every fact is computed with attnlib's part 6
modules: MLA and its latent cache (chapter 17), the tiled backward pass (chapter 18),
the (gated) delta rule, the paged KV cache and top-k selection; the numbers the
questions state are held against the same computations.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from test_quiz import questions
from test_quiz_modern import assert_keys_kinds_and_points, explanation, options

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import sparse
from attnlib.numpy.flash import block_gradients

NAME = "quiz-frontier"
KEYS = {1: "B", 2: "B", 3: "AB", 4: "B", 5: "B", 6: "AB", 7: "A", 8: "A", 9: "AB", 10: "B"}


@pytest.fixture(scope="module")
def quiz_questions():
    return {i: q for i, q in enumerate(questions(NAME), 1)}


def leading_number(text: str) -> int:
    return int(re.match(r"\d+", text).group())


def test_keys_kinds_and_points(quiz_questions):
    """The keys below are the ones the checks in this file establish."""
    assert_keys_kinds_and_points(quiz_questions, KEYS)


# --------------------------------------------------------------------------- MLA (questions 1, 2)

def mla_weights(rng, d_model, h, d_head, d_latent, d_rope, d_cq):
    """Random weights of one MLA layer, ``x @ w`` matrices named as ``anp.mla.WEIGHT_NAMES``."""
    shapes = {"w_dq": (d_model, d_cq), "w_uq": (d_cq, h * d_head), "w_qr": (d_cq, h * d_rope),
              "w_dkv": (d_model, d_latent), "w_uk": (d_latent, h * d_head), "w_uv": (d_latent, h * d_head),
              "w_kr": (d_model, d_rope), "w_o": (h * d_head, d_model)}
    return {name: rng.standard_normal(shape) / math.sqrt(shape[0]) for name, shape in shapes.items()}


def test_q1_mla_caches_the_latent_and_one_shared_rotated_key(quiz_questions):
    q1 = quiz_questions[1]
    h, d_head, d_latent, d_rope = 128, 128, 512, 64
    for fact in ("$h = 128$", "$d_{head} = 128$", "$d_{latent} = 512$", "$d_{rope} = 64$", "= 32768$"):
        assert fact in q1["text"]
    # what each cache really stores for one token of one layer (float16: 2 bytes a number)
    latent = anp.LatentKVCache(1, d_latent, d_rope)
    latent.append(0, np.zeros((1, d_latent), np.float16), np.zeros((1, d_rope), np.float16))
    mha = anp.KVCache(1, h, d_head)
    mha.append(0, np.zeros((1, h, 1, d_head), np.float16), np.zeros((1, h, 1, d_head), np.float16))
    right, full = latent.nbytes // 2, mha.nbytes // 2
    assert (right, full) == (d_latent + d_rope, 2 * h * d_head) == (576, 32768)
    assert round(full / right) == 57 and f"远少于多头注意力的 {full} 个" in explanation(q1, "B")
    per_head = d_latent + h * d_rope  # C: a rotated key per head
    twice = 2 * (d_latent + d_rope)  # D: a latent for K and one for V
    numbers = {letter: leading_number(text) for letter, text in options(q1).items()}
    assert numbers == {"A": full, "B": right, "C": per_head, "D": twice}
    assert f"= {per_head} 个数" in explanation(q1, "C") and per_head - right == (h - 1) * d_rope
    # D: every head's key and value are images of the one latent: reconstructing them or absorbing gives one result
    rng = np.random.default_rng(1)
    w = mla_weights(rng, 16, 4, 8, 12, 4, 10)
    x = rng.standard_normal((9, 16))
    np.testing.assert_allclose(anp.multi_head_latent_attention(x, w, 4, absorb=True),
                               anp.multi_head_latent_attention(x, w, 4, absorb=False), atol=1e-10)


def test_q2_rope_on_reconstructed_keys_breaks_absorption(quiz_questions):
    q2 = quiz_questions[2]
    rng = np.random.default_rng(2)
    n, d_latent, d_head = 12, 16, 8
    c_kv = rng.standard_normal((n, d_latent))  # the cached latents
    w_uk = rng.standard_normal((d_latent, d_head))  # one head's key matrix
    q_c = rng.standard_normal((n, d_head))  # that head's content queries
    pos = np.arange(n)
    # B: RoPE on the reconstructed keys: the right scores against what absorption can compute
    right = anp.apply_rope(q_c, pos) @ anp.apply_rope(c_kv @ w_uk, pos).T  # (n, n)
    absorbed = (anp.apply_rope(q_c, pos) @ w_uk.T) @ c_kv.T  # rotated query carried into the latent space
    wrong = ~np.isclose(right, absorbed, atol=1e-9).all(axis=0)  # per key position
    assert not wrong[0] and wrong[1:].all()  # only the key at position 0 (not rotated) comes out right
    assert "只有位置 0 的键碰巧对" in explanation(q2, "B")
    # B: with the decoupled key, absorbed and reconstructed MLA agree, positions and all
    w = mla_weights(rng, 16, 4, 8, 12, 4, 10)
    x = rng.standard_normal((n, 16))
    np.testing.assert_allclose(anp.multi_head_latent_attention(x, w, 4, absorb=True),
                               anp.multi_head_latent_attention(x, w, 4, absorb=False), atol=1e-10)
    # C, D: k_r is rotated once before it is cached, and it has no head axis: one for all heads
    cache = anp.LatentKVCache(1, 12, 4)
    out = anp.latent_attention_step(x, w, 4, cache, 0)
    np.testing.assert_allclose(out, anp.multi_head_latent_attention(x, w, 4), atol=1e-10)
    _, k_r = cache.read(0)
    assert k_r.shape == (n, 4)
    np.testing.assert_allclose(k_r, anp.apply_rope(x @ w["w_kr"], pos), atol=1e-12)
    # A: RoPE needs an even width, not a power of two
    y = rng.standard_normal((5, 6))
    rotated = anp.apply_rope(y, np.arange(5))
    assert not np.allclose(rotated[1:], y[1:])
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(y, axis=-1), rtol=1e-12)
    assert "d = 6" in explanation(q2, "A")


# --------------------------------------------------------------------------- FlashAttention's backward (questions 3, 4)

def saved_tensors(forward, *inputs):
    """Shapes of the distinct tensors autograd keeps for backward (as chapter 18 lists them)."""
    kept = {}

    def pack(t):
        kept[(t.data_ptr(), tuple(t.shape))] = tuple(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward(*inputs)
    return sorted(kept.values())


def test_q3_flash_keeps_q_k_v_o_and_one_number_per_row(quiz_questions):
    n, d = 256, 64
    x = [torch.randn(n, d, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    # A, B: Q, K, V, O and the (n,) log-sum-exp, nothing n x n
    assert saved_tensors(att.flash_attention, *x) == sorted([(n, d)] * 4 + [(n,)])
    # C: differentiating the formula keeps the n x n weights
    assert (n, n) in saved_tensors(lambda q, k, v: torch.softmax(q @ k.T / 8, dim=-1) @ v, *x)
    # B: the lse gives back any block of weights exactly
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((3, 40, 8))
    out, lse = anp.flash_attention(q, k, v, return_lse=True)
    ref_out, ref_w = anp.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    s = q @ k.T / math.sqrt(8)
    np.testing.assert_allclose(np.exp(s[:, 8:16] - lse[:, None]), ref_w[:, 8:16], atol=1e-12)
    # D: D needs dO: one forward, two upstream gradients, two different D
    d1, d2 = rng.standard_normal((2, 40, 8))
    assert not np.allclose(np.sum(d1 * out, -1), np.sum(d2 * out, -1))


def test_q4_d_is_the_row_sum_of_p_times_dp(quiz_questions):
    rng = np.random.default_rng(4)
    n, d = 24, 8
    q, k, v = rng.standard_normal((3, n, d))
    d_out = rng.standard_normal((n, d))
    out, lse = anp.flash_attention(q, k, v, return_lse=True)
    _, p = anp.scaled_dot_product_attention(q, k, v)
    dp = d_out @ v.T
    delta = np.sum(d_out * out, axis=-1)  # D = rowsum(dO * O)
    # B: sum_j P_ij dP_ij = dO_i . O_i
    np.testing.assert_allclose(np.sum(p * dp, axis=-1), delta, atol=1e-12)
    # the tiled backward with D equals autograd
    grads = anp.flash_attention_backward(q, k, v, out, lse, d_out, block_size=5)
    qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    torch.autograd.backward(torch.softmax(qt @ kt.T / math.sqrt(d), -1) @ vt, torch.tensor(d_out))
    for got, want in zip(grads, (qt.grad, kt.grad, vt.grad), strict=True):
        np.testing.assert_allclose(got, want.numpy(), atol=1e-10)
    # A: D is not the row maximum of the scores; C: D is not 1
    s = q @ k.T / math.sqrt(d)
    assert not np.allclose(delta, s.max(-1)) and not np.allclose(delta, 1.0)
    # C, D: without D (dS = P * dP) dV is still right, dQ and dK are wrong; the right dS rows sum to 0
    scale = 1 / math.sqrt(d)
    dq0, dk0, dv0 = block_gradients(q, k, v, p, d_out, np.zeros((n, 1)), scale)
    np.testing.assert_allclose(dv0, grads[2], atol=1e-12)
    assert np.abs(dq0 - grads[0]).max() > 1e-3 and np.abs(dk0 - grads[1]).max() > 1e-3
    ds = p * (dp - delta[:, None])
    np.testing.assert_allclose(ds.sum(-1), 0.0, atol=1e-12)
    assert np.abs((p * dp).sum(-1)).max() > 1e-3


# --------------------------------------------------------------------------- the delta rule (questions 5-7)

def unit_keys(rng, n, d):
    """``n`` orthonormal keys of width ``d`` (rows of an orthogonal matrix)."""
    return np.linalg.qr(rng.standard_normal((d, d)))[0][:n]


def linear_state_read(k, v, q):
    """Chapter 10's causal linear attention as a state that only adds: S = sum_t k_t v_t^T, read S^T q."""
    return (k.T @ v).T @ q


def test_q5_delta_rule_overwrites_linear_attention_adds(quiz_questions):
    q5 = quiz_questions[5]
    rng = np.random.default_rng(5)
    d = 8
    key = unit_keys(rng, 1, d)[0]
    v1, v2 = rng.standard_normal((2, d))
    keys, values = np.stack([key, key]), np.stack([v1, v2])
    # B: the delta rule reads back the second value, the additive state the sum
    out, state = anp.delta_rule(keys, keys, values, np.ones(2))
    np.testing.assert_allclose(out[-1], v2, atol=1e-12)
    np.testing.assert_allclose(state.T @ key, v2, atol=1e-12)
    np.testing.assert_allclose(linear_state_read(keys, values, key), v1 + v2, atol=1e-12)
    # C: neither averages; beta = 1/2 gives v1/4 + v2/2
    half, _ = anp.delta_rule(keys, keys, values, np.full(2, 0.5))
    np.testing.assert_allclose(half[-1], v1 / 4 + v2 / 2, atol=1e-12)
    assert not np.allclose(half[-1], (v1 + v2) / 2)
    assert "v₁/4 + v₂/2" in explanation(q5, "C")
    # the erase is what makes the difference: v_old after the first write is v1
    _, first = anp.delta_rule(keys[:1], keys[:1], values[:1], np.ones(1))
    np.testing.assert_allclose(first.T @ key, v1, atol=1e-12)


def test_q6_the_gate_fades_the_old_state_before_the_erase(quiz_questions):
    rng = np.random.default_rng(6)
    d, t = 8, 5
    keys = unit_keys(rng, t + 1, d)  # k_1 first, then t keys orthogonal to it
    values = rng.standard_normal((t + 1, d))
    beta = np.ones(t + 1)
    # A: alpha = 1 is DeltaNet, bit for bit; the formula as written (gate outside the erase) is the library's
    q = rng.standard_normal((t + 1, d))
    k_any = rng.standard_normal((t + 1, d)) / math.sqrt(d)
    b_any, alpha = rng.uniform(0.2, 0.9, (2, t + 1))
    np.testing.assert_array_equal(anp.delta_rule(q, k_any, values, b_any, alpha=np.ones(t + 1))[0],
                                  anp.delta_rule(q, k_any, values, b_any)[0])
    state = np.zeros((d, d))
    for s in range(t + 1):
        kk = k_any[s][:, None]
        state = alpha[s] * (np.eye(d) - b_any[s] * kk @ kk.T) @ state + b_any[s] * kk @ values[s][None]
    np.testing.assert_allclose(anp.delta_rule(q, k_any, values, b_any, alpha=alpha)[1], state, atol=1e-12)
    # B: k_1 written once, then t steps of orthogonal keys with alpha = 0.9: read 0.9^t v_1
    _, final = anp.delta_rule(keys, keys, values, beta, alpha=np.full(t + 1, 0.9))
    np.testing.assert_allclose(final.T @ keys[0], 0.9**t * values[0], atol=1e-12)
    # C: the value just written is read back whole, whatever alpha
    for a in (0.1, 0.5, 1.0):
        out, _ = anp.delta_rule(keys, keys, values, beta, alpha=np.full(t + 1, a))
        np.testing.assert_allclose(out, values, atol=1e-12)
    # D: the state's shape is d_k x d_v with or without the gate
    _, gated = anp.delta_rule(q, k_any, values, b_any, alpha=alpha)
    _, plain = anp.delta_rule(q, k_any, values, b_any)
    assert gated.shape == plain.shape == (d, d)


def test_q7_state_is_constant_the_cache_grows(quiz_questions):
    q7 = quiz_questions[7]
    d = 128
    rng = np.random.default_rng(7)

    def state_bytes(n):
        x = rng.standard_normal((n, d)) / math.sqrt(d)
        return anp.delta_rule(x, x, x, np.full(n, 0.5))[1].nbytes

    def cache_bytes(n):
        cache = anp.KVCache(1, 1, d)
        kv = np.zeros((1, 1, n, d))
        cache.append(0, kv, kv)
        return cache.nbytes

    # D: 10 or 1000 tokens, one state size
    assert state_bytes(10) == state_bytes(1000) == d * d * 8
    # A: the cache equals the state at 64 tokens and is larger from 65 on
    crossing = d * d // (2 * d)
    assert crossing == 64 and cache_bytes(64) == state_bytes(64) and cache_bytes(65) > state_bytes(65)
    numbers = {letter: text for letter, text in options(q7).items()}
    assert numbers["A"] == str(crossing) and numbers["B"] == str(d) and numbers["C"] == str(d * d)
    text = explanation(q7, "A")
    for n in (4096, 131072):
        assert f"{n} 个词元时" in text or f"到 {n} 个词元" in text
        ratio = 2 * d * n // (d * d)
        assert f"{ratio} 倍" in text, (n, ratio)


# --------------------------------------------------------------------------- the paged cache (questions 8, 9)

def paged_with(lengths, block_size=16, n_blocks=512):
    cache = anp.PagedKVCache(n_blocks, block_size, 1, 1)
    seqs = []
    for n in lengths:
        seq = cache.allocate()
        cache.append(seq, np.arange(n, dtype=float).reshape(1, n, 1), np.zeros((1, n, 1)))
        seqs.append(seq)
    return cache, seqs


def test_q8_reserving_the_maximum_against_paging(quiz_questions):
    q8 = quiz_questions[8]
    max_len, used, block = 4096, 1000, 16
    for fact in ("最多 4096 个词元", "只用了 1000 个词元", "块大小为 16"):
        assert fact in q8["text"]
    cache, (seq,) = paged_with([used], block)
    blocks = len(cache.block_table(seq))
    slots = cache.nbytes // (2 * 8)  # float64 keys and values, one head of width 1
    assert (blocks, slots) == (63, 1008)
    reserved_waste, paged_waste = max_len - used, slots - used
    assert (reserved_waste, paged_waste) == (3096, 8)
    first = {letter: leading_number(text) for letter, text in options(q8).items()}
    assert set(first.values()) == {reserved_waste}
    second = {letter: int(text.split("和 ")[1]) for letter, text in options(q8).items()}
    assert second == {"A": paged_waste, "B": 0, "C": block - 1, "D": reserved_waste}
    # C: block - 1 is the worst case, reached when the length leaves 1 over; in general (-n) mod block
    wastes = {n: len(paged_with([n], block)[0].block_table(0)) * block - n for n in range(1, 200)}
    assert max(wastes.values()) == block - 1 and all(w == (-n) % block for n, w in wastes.items())
    late, (seq,) = paged_with([1009], block)
    assert len(late.block_table(seq)) * block - 1009 == block - 1 and "1009" in explanation(q8, "C")
    assert (-used) % block == block - used % block == 8


def test_q9_fork_shares_blocks_and_copies_the_partial_one_on_write(quiz_questions):
    q9 = quiz_questions[9]
    prompt, block = 40, 16
    assert "40 个词元" in q9["text"] and "3 个块" in q9["text"] and "只装了 8 个词元" in q9["text"]
    assert -(-prompt // block) == 3 and prompt % block == 8
    cache, (a,) = paged_with([prompt], block, n_blocks=8)
    free_before = cache.free_blocks
    b = cache.fork(a)
    # A: one table, counts 2, no block taken
    assert cache.block_table(a) == cache.block_table(b)
    assert [cache.ref_count(x) for x in cache.block_table(a)] == [2, 2, 2]
    assert cache.free_blocks == free_before
    # B: b's append copies the shared partial block first; the full blocks stay shared; a is unchanged
    a_keys = cache.read(a)[0].copy()
    cache.append(b, np.full((1, 1, 1), -1.0), np.zeros((1, 1, 1)))
    ta, tb = cache.block_table(a), cache.block_table(b)
    assert ta[:2] == tb[:2] and ta[2] != tb[2]
    assert [cache.ref_count(x) for x in ta] == [2, 2, 1] and cache.ref_count(tb[2]) == 1
    np.testing.assert_array_equal(cache.read(a)[0], a_keys)
    np.testing.assert_array_equal(cache.read(b)[0][:, :prompt], a_keys)
    assert cache.free_blocks == free_before - 1
    # C: had fork copied, it would have taken 3 blocks; D: freeing a keeps b's prompt
    cache.free(a)
    assert [cache.ref_count(x) for x in tb] == [1, 1, 1]
    np.testing.assert_array_equal(cache.read(b)[0][:, :prompt], a_keys)
    # B: whichever side writes first gets the copy: here the parent
    cache, (a,) = paged_with([prompt], block, n_blocks=8)
    b = cache.fork(a)
    shared = cache.block_table(a)
    cache.append(a, np.ones((1, 1, 1)), np.zeros((1, 1, 1)))
    assert cache.block_table(b) == shared and cache.block_table(a)[:2] == shared[:2]
    assert cache.block_table(a)[2] != shared[2] and cache.ref_count(shared[2]) == 1
    assert "谁先写，谁先得到一份私有的拷贝" in explanation(q9, "B")


# --------------------------------------------------------------------------- top-k selection (question 10)

def selected(index_scores, top_k, causal_first):
    """``(n_q, n_k)`` mask of each query's ``top_k`` keys of highest score, ties to the lower index."""
    n = index_scores.shape[-1]
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    s = np.where(future, -np.inf, index_scores) if causal_first else index_scores
    order = np.argsort(-s, axis=-1, kind="stable")[:, :top_k]  # stable: equal scores keep the lower index first
    mask = np.zeros((n, n), dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask & ~future  # the causal mask applied after the selection too (where it came last)


def test_q10_top_k_masks_first_and_the_indexer_stays_quadratic(quiz_questions, monkeypatch):
    computed = []

    def counted(q_rows, keys):
        out = gathered(q_rows, keys)
        computed.append(out.size)
        return out

    gathered = sparse.gathered_scores
    monkeypatch.setattr(sparse, "gathered_scores", counted)
    rng = np.random.default_rng(10)
    n, d, top_k, h_idx, d_idx = 32, 8, 4, 2, 4
    q, k, v = rng.standard_normal((3, n, d))
    q_idx, k_idx, w_idx = rng.standard_normal((n, h_idx, d_idx)), rng.standard_normal((n, d_idx)), rng.uniform(
        0.1, 1.0, (n, h_idx))
    scores = anp.lightning_indexer_scores(q_idx, k_idx, w_idx)
    # D: the indexer scores every query against every key, I[t, s] = sum_j w_tj ReLU(q_tj . k_s): n x n numbers
    assert scores.shape == (n, n)
    np.testing.assert_allclose(scores, np.einsum("tj,tjs->ts", w_idx, np.maximum(q_idx @ k_idx.T, 0)), atol=1e-12)
    # B: doubling n: about 4 times the visible pairs to score, twice the n k attention scores
    pairs = {m: m * (m + 1) // 2 for m in (n, 2 * n)}
    assert 3.9 < pairs[2 * n] / pairs[n] < 4 and (2 * n * top_k) / (n * top_k) == 2
    assert "约变成 4 倍" in explanation(quiz_questions[10], "B")
    # B: mask first, then select: exact softmax over the selected keys, n k scores (fewer for the first rows)
    right = selected(scores, top_k, causal_first=True)
    got = anp.topk_sparse_attention(q, k, v, scores, top_k, causal=True)
    np.testing.assert_allclose(got, anp.scaled_dot_product_attention(q, k, v, mask=right)[0], atol=1e-12)
    assert right.sum() == sum(min(top_k, i + 1) for i in range(n)) <= sum(computed) == n * top_k
    assert right.sum() < n * (n + 1) // 2  # against the causal pairs the indexer scores
    # A: select among all keys, then mask: future keys take places, rows keep fewer keys, outputs differ
    wrong = selected(scores, top_k, causal_first=False)
    assert (wrong.sum(-1) < right.sum(-1)).any()
    wrong_out = anp.scaled_dot_product_attention(q, k, v, mask=wrong)[0]
    assert np.abs(np.nan_to_num(wrong_out) - got).max() > 1e-3
    # C: zeroing the unselected weights of a full softmax without renormalising: rows sum below 1
    _, full_w = anp.scaled_dot_product_attention(q, k, v, causal=True)
    kept = np.where(right, full_w, 0.0)
    assert (kept.sum(-1)[top_k:] < 1 - 1e-6).all()
    assert np.abs(kept @ v - got).max() > 1e-3
