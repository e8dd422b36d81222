"""Quiz 5 (quiz-practice): every key and every option's explanation checked by code.

The keys are read from the hidden ``quiz.grade(...)`` calls of
``solutions/quiz-practice/quiz-practice.ipynb`` (as ``tests/test_quiz.py`` does), never
copied into a student-facing file.  What a question says about the real model is
measured on SmolLM2-135M-Instruct with attnlib's own parts (its weights, the GGUF
file's tensor bytes, ``KVCache``, ``SinkKVCache``, ``sink_attention``); what it says
about the ideas of chapters 23-24 (KV-cache quantization, H2O's eviction, speculative
sampling) is computed here by small self-contained NumPy functions, exactly where a
probability is claimed.  The per-student numbers of questions 2, 3, 4, 5 and 8 are
checked for every variant in ``tests/test_quiz_numbers.py``.
"""

from __future__ import annotations

import math
import pydoc_data.topics
import re
from fractions import Fraction

import numpy as np
import pytest
import torch
from test_quiz import questions
from test_quiz_modern import assert_keys_kinds_and_points, explanation, options

from attnlib import numpy as anp
from attnlib import pretrained
from attnlib import torch as att
from attnlib.torch.llama import LlamaModel

NAME = "quiz-practice"
KEYS = {1: "AC", 2: "B", 3: "C", 4: "D", 5: "B", 6: "C", 7: "AB", 8: "B", 9: "D", 10: "BD"}


@pytest.fixture(scope="module")
def quiz_questions():
    return {i: q for i, q in enumerate(questions(NAME), 1)}


def test_keys_kinds_and_points(quiz_questions):
    """The keys below are the ones the checks in this file establish."""
    assert_keys_kinds_and_points(quiz_questions, KEYS)


# --------------------------------------------------------------------------- the real model

@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    config, weights = pretrained.load_smollm2()
    return LlamaModel(config, weights)


@pytest.fixture(scope="module")
def text_ids():
    """The first 128 tokens of the Python documentation's "Execution model" section (chapter 22's text)."""
    tok = pretrained.Tokenizer()
    ids = tok.encode(pydoc_data.topics.topics["execmodel"])[:128]
    assert tok.pieces(ids[:1]) == ["Execution"]  # an ordinary word, no special token before it
    return ids


@torch.no_grad()
def layer_by_layer(model, ids, *, mask=None, positions=None):
    """The model's forward pass written out: per layer the queries, keys, values and weights, and the logits."""
    x = model.embed(ids)
    n = x.shape[0]
    positions = torch.arange(n) if positions is None else positions
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    mask = causal if mask is None else torch.as_tensor(mask)
    layers = []
    for layer in range(model.n_layers):
        q, k, v = model.qkv(layer, x, positions)
        out, w = att.grouped_query_attention(q, k, v, mask=mask)
        layers.append({"q": q, "k": k, "v": v, "out": out, "weights": w, "x": x})
        x = x + model.attention_output(layer, out)
        x = x + model.mlp(layer, x)
    return layers, model.readout(x)


def perplexity(logits, ids, start):
    """exp of the mean cross-entropy of the predictions of tokens start+1 .. n-1."""
    logp = torch.log_softmax(logits[start:-1].double(), dim=-1)
    target = torch.as_tensor(ids[start + 1:])
    return float(torch.exp(-logp[torch.arange(len(target)), target].mean()))


@pytest.fixture(scope="module")
def first64(model, text_ids):
    ids = text_ids[:64]
    layers, logits = layer_by_layer(model, ids)
    with torch.no_grad():
        np.testing.assert_allclose(logits.numpy(), model.forward(ids).numpy(), atol=2e-3)  # the model's own pass
    weights = torch.stack([layer["weights"] for layer in layers]).numpy()  # (L, H, n, n)
    return {"ids": ids, "layers": layers, "logits": logits, "weights": weights}


# --------------------------------------------------------------------------- sinks (questions 1-3)

def test_q1_many_heads_sink_on_an_ordinary_first_word(quiz_questions, model, first64, text_ids):
    q1 = quiz_questions[1]
    for fact in ("前 64 个词元", "“Execution”", "后 32 个查询"):
        assert fact in q1["text"]
    w = first64["weights"]
    n_layers, n_heads = w.shape[:2]
    assert (n_layers, n_heads) == (model.n_layers, model.n_heads) == (30, 9)
    share = w[:, :, 32:, 0].mean(-1)  # (L, H): what the last 32 queries give token 0, on average
    sinking = int((share > 0.5).sum())
    assert 100 <= sinking < 200  # A: "一百多个头" of 270
    assert "30 层 × 9 个头共 270 个头，其中一百多个头" in explanation(q1, "A")

    # B: the key of token 0 is not long where the weight goes to it (RMSNorm before the projections)
    busy = share.mean(-1) > 0.2
    assert busy.sum() >= 10
    ratios = []
    for layer in np.flatnonzero(busy):
        norms = first64["layers"][layer]["k"].norm(dim=-1).numpy()  # (n_kv_heads, n): RoPE keeps lengths
        ratios.append((norms[:, 0] / np.median(norms[:, 1:], axis=1)).max())
    assert max(ratios) < 1, ratios  # shorter than the other keys' median
    assert "比其他词元的键的中位数还短" in explanation(q1, "B")
    hidden = torch.stack([layer["x"].norm(dim=-1) for layer in first64["layers"]]).numpy()  # (L, n) before layer
    assert (hidden[:, 0] / np.median(hidden[:, 1:], axis=1)).max() > 20  # the hidden state is long, not the key

    # C: rows sum to 1; under the causal mask token 0 is the only token every query sees
    np.testing.assert_allclose(w.sum(-1), 1, atol=1e-5)
    causal = np.tril(np.ones((64, 64), bool))
    assert causal[:, 0].all() and not causal[:, 1:].all(axis=0).any()
    # hide token 0 from every later query: token 1 takes the part, the perplexity hardly moves
    i, j = np.arange(64)[:, None], np.arange(64)
    hidden_mask = causal & ((j > 0) | (i == 0))
    layers, logits = layer_by_layer(model, first64["ids"], mask=hidden_mask)
    to_1 = torch.stack([layer["weights"] for layer in layers]).numpy()[:, :, 32:, 1].mean(-1)
    assert (to_1 > 0.5).sum() > 0.5 * sinking
    # the perplexity on the 64 predictions after the first 64 of the 128 tokens: hidden from all later queries, it
    # hardly moves; hidden from query 2 on (token 1 still sees it, an ordinary second token), it soars
    n = len(text_ids)
    i, j = np.arange(n)[:, None], np.arange(n)
    causal = np.tril(np.ones((n, n), bool))
    with torch.no_grad():
        ppl = {name: perplexity(model.forward(text_ids, mask=torch.as_tensor(mask)), text_ids, n // 2 - 1)
               for name, mask in (("full", causal), ("all", causal & ((j > 0) | (i == 0))),
                                  ("late", causal & ((j > 0) | (i <= 1))))}
    assert abs(ppl["all"] / ppl["full"] - 1) < 0.03 and ppl["late"] > 2 * ppl["full"], ppl
    assert "困惑度几乎不变" in explanation(q1, "C")

    # D: RoPE sees differences of positions only: everything shifted by 100, the weights stay
    shifted, _ = layer_by_layer(model, first64["ids"], positions=torch.arange(64) + 100)
    moved = torch.stack([layer["weights"] for layer in shifted]).numpy()
    assert np.abs(moved - w).max() < 1e-4
    assert int((moved[:, :, 32:, 0].mean(-1) > 0.5).sum()) == sinking
    assert "都加上 100" in explanation(q1, "D")


def streaming_cache(s, w, t):
    """attnlib's SinkKVCache after tokens 0..t arrived one layer, one head, width 2 (the last one alone)."""
    cache = anp.SinkKVCache(1, 1, 2, n_sink=s, window=w)
    cache.append(0, np.zeros((1, t, 2)), np.zeros((1, t, 2)))
    cache.append(0, np.zeros((1, 1, 2)), np.zeros((1, 1, 2)))
    return cache


def test_q2_streamingllm_brings_the_sinks_closer(quiz_questions):
    q2 = quiz_questions[2]
    s, w, t = 4, 1020, 2000  # the written question's numbers
    cache = streaming_cache(s, w, t)
    slots, held = cache.positions(), cache.tokens()
    assert held[-1] == t and held[0] == 0 and cache.capacity == s + w == len(held)
    assert slots[-1] - slots[0] == s + w - 1  # B: the distance RoPE sees
    assert held[-1] - held[0] == t  # A: the distance in the text
    # B: inside the window the distances are the text's; only the sinks come closer
    window = held >= s
    np.testing.assert_array_equal(np.diff(slots[window]), np.diff(held[window]))
    assert (held[window][-1] - held[window]).max() == w - 1
    assert options(q2) == {"A": f"{t}", "B": f"{s + w - 1}", "C": f"{w}", "D": f"{s + w}"}
    assert f"从 {t} 变成 {s + w - 1}" in explanation(q2, "B")
    # which positions StreamingLLM hands to RoPE is what the question asks: the stem must not say it
    assert "按 StreamingLLM 的做法" in q2["text"] and "槽号" not in q2["text"]
    assert "交给 RoPE 的是词元在缓存里的槽号" in explanation(q2, "B")


def test_q3_a_sink_logit_takes_its_share_of_the_row(quiz_questions):
    q3 = quiz_questions[3]
    n, eb = 7, 2  # the written question's numbers
    q = np.zeros((1, 1, 4))
    k = np.random.default_rng(3).standard_normal((1, n, 4)) * 0  # every score 0
    v = np.random.default_rng(4).standard_normal((1, n, 3))
    out, weights = anp.sink_attention(q, k, v, np.array([math.log(eb)]))
    total = weights.sum()
    assert abs(total - n / (n + eb)) < 1e-12 and np.allclose(weights, 1 / (n + eb))
    np.testing.assert_allclose(out, v.mean(axis=-2, keepdims=True) * n / (n + eb), atol=1e-12)  # C: mean x 7/9
    plain = anp.softmax(np.zeros(n))
    assert abs(plain.sum() - 1) < 1e-12  # A: ordinary softmax
    shown = {letter: Fraction(text) for letter, text in options(q3).items()}
    assert shown == {"A": 1, "B": Fraction(eb, n + eb), "C": Fraction(n, n + eb), "D": Fraction(1, n + eb)}
    # b grows, the row reads less and less: the head can attend to (almost) nothing
    sums = [anp.sink_attention(q, k, v, np.array([b]))[1].sum() for b in (0.0, 5.0, 20.0)]
    assert sums[0] > sums[1] > sums[2] and sums[2] < 1e-7


# --------------------------------------------------------------------------- the model's cache and file (4, 5)

def test_q4_the_gqa_cache_of_the_real_model(quiz_questions, model, text_ids):
    q4 = quiz_questions[4]
    cfg = (model.n_layers, model.n_heads, model.n_kv_heads, model.d_head)
    assert cfg == (30, 9, 3, 64)
    for fact in ("30 层", "9 个查询头共用 3 个键值头", "$d_{head} = 64$", "float16", "8192 个词元"):
        assert fact in q4["text"]
    cache = model.new_cache()
    with torch.no_grad():
        model.step(text_ids[:5], cache)
    per_token = cache.nbytes // cache.length  # float32, the real cache
    assert per_token == 30 * 2 * 3 * 64 * 4 == 46080
    half = per_token // 2  # float16: 2 bytes a number
    mib = {letter: float(re.match(r"[\d.]+", text).group()) * 2**20 for letter, text in options(q4).items()}
    assert mib == {"A": 3 * half * 8192, "B": half * 8192 / 2, "C": half * 8192 / 30, "D": half * 8192}
    assert "每个词元 23040 字节" in explanation(q4, "D")


def test_q5_bits_per_weight_from_the_file(quiz_questions):
    from gguf import GGUFReader

    q5 = quiz_questions[5]
    reader = GGUFReader(pretrained.model_path())
    bits = {}
    for tensor in reader.tensors:
        bits.setdefault(tensor.tensor_type.name, set()).add(Fraction(8 * int(tensor.n_bytes), int(tensor.n_elements)))
    assert bits["Q4_1"] == {5} and bits["Q8_0"] == {Fraction(17, 2)}  # B: 5 bits; Q8_0 8.5
    # one Q4_1 block: 20 bytes give 32 weights, d q + m
    block = np.zeros(20, np.uint8)
    block[:4] = np.frombuffer(np.array([0.5, -1.0], "<f2").tobytes(), np.uint8)
    block[4:] = 0x21  # weight j: code 1, weight j + 16: code 2
    w = pretrained.dequantize_q4_1(block)
    assert w.shape == (32,) and (w[:16] == -0.5).all() and (w[16:] == 0.0).all()
    assert 8 * block.size / w.size == 5
    # the options: codes only, d only (Q4_0: 2 + 16 bytes a block of 32), d and m as float32
    assert 8 * (2 + 16) / 32 == 4.5 and "Q4_0：块大小 32 时 4.5 位" in explanation(q5, "C")
    assert {letter: float(text) for letter, text in options(q5).items()} == {"A": 4, "B": 5, "C": 4.5, "D": 6}


# --------------------------------------------------------------------------- KV-cache quantization (question 6)

def quantize(x, axis, bits=2):
    """x rounded to 2**bits levels between its minimum and maximum along ``axis`` (one group per slice)."""
    return anp.dequantize_kv(anp.quantize_kv(x, bits, axis=axis, group_size=x.shape[axis]))


def rel_err(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def spread(x):
    """The largest channel's mean |x| over the median channel's (mean over the tokens; the largest over the heads)."""
    size = np.abs(x).mean(axis=-2)  # (heads, channels)
    return float((size.max(-1) / np.median(size, axis=-1)).max())


def gqa_out(q, k, v):
    out, _ = anp.grouped_query_attention(q, k, v, causal=True, need_weights=False)
    return out


@pytest.fixture(scope="module")
def quantized_layers(model, text_ids):
    """Per layer of SmolLM2 on 128 tokens: relative errors of 2-bit keys and values, per channel and per token."""
    layers, _ = layer_by_layer(model, text_ids)
    rows = []
    for layer in layers:
        q, k, v = (layer[name].double().numpy() for name in ("q", "k", "v"))  # k, v: (3, n, 64)
        out = gqa_out(q, k, v)
        kc, kt, vc, vt = quantize(k, -2), quantize(k, -1), quantize(v, -2), quantize(v, -1)
        rows.append({"key_channel": rel_err(kc, k), "key_token": rel_err(kt, k),
                     "key_spread": spread(k), "value_spread": spread(v),
                     "out_kc_vt": rel_err(gqa_out(q, kc, vt), out), "out_kc_vc": rel_err(gqa_out(q, kc, vc), out),
                     "out_kt_vt": rel_err(gqa_out(q, kt, vt), out)})
    return rows


def test_q6_keys_per_channel_because_of_outlier_channels(quiz_questions, quantized_layers):
    q6 = quiz_questions[6]
    # C: an outlier channel widens every token's range when grouped per token
    rng = np.random.default_rng(6)
    keys = rng.standard_normal((64, 16))
    keys[:, 3] += 20.0  # one channel large on every token
    others = np.arange(16) != 3  # the ordinary channels: per token, their detail is rounded away
    per_channel, per_token = (rel_err(quantize(keys, axis)[:, others], keys[:, others]) for axis in (0, 1))
    assert per_channel < 0.5 * per_token and per_token > 0.5, (per_channel, per_token)
    # ... and on SmolLM2 (128 tokens, 2 bits) per channel beats per token for the keys of every layer
    assert len(quantized_layers) == 30
    assert all(row["key_channel"] < row["key_token"] for row in quantized_layers)
    assert "128 个词元" in explanation(q6, "C") and "每一层的键" in explanation(q6, "C")
    # A: not "always": outliers on a few tokens favour per token; for the values per token gives smaller outputs
    values = rng.standard_normal((64, 16))
    values[[5, 40]] *= 30.0
    assert rel_err(quantize(values, 1), values) < rel_err(quantize(values, 0), values)
    better = sum(row["out_kc_vt"] < row["out_kc_vc"] for row in quantized_layers)
    assert better > 20, better  # "大多数层"
    assert all(row["out_kc_vt"] < row["out_kt_vt"] for row in quantized_layers)  # keys per channel matter for O too
    # ... the values have no outlier channels as striking as the keys': every layer but layer 0 (chapter 23's finding)
    assert [row["key_spread"] > row["value_spread"] for row in quantized_layers] == [False] + [True] * 29
    assert "除第 0 层外每一层都是如此" in explanation(q6, "A")
    # B: per token needs only the token itself; a per-channel group changes when a later token arrives
    group = rng.standard_normal((8, 16))
    later = np.vstack([group, 10 * np.ones((1, 16))])
    assert not np.allclose(quantize(later, 0)[:8], quantize(group, 0))
    np.testing.assert_array_equal(quantize(later, 1)[:8], quantize(group, 1))
    # D: both change the keys' lengths
    k = rng.standard_normal((32, 64))
    for axis in (0, 1):
        assert not np.allclose(np.linalg.norm(quantize(k, axis), axis=1), np.linalg.norm(k, axis=1), rtol=1e-3)


# --------------------------------------------------------------------------- eviction (question 7)

def h2o_keep(weights, budget, recent):
    """H2O's eviction replayed on one head's causal weights (n, n): the kept set after each step.

    At step t the new token joins; the query of t attends to the kept tokens (its weights renormalised
    over them: softmax restricted to a subset); every kept token adds its weight to its running score;
    beyond ``budget`` tokens the one with the lowest score outside the ``recent`` newest leaves for good.
    """
    n = weights.shape[0]
    kept, score, history = [], np.zeros(n), []
    for t in range(n):
        kept.append(t)
        row = weights[t, kept] / weights[t, kept].sum()
        score[kept] += row
        if len(kept) > budget:
            candidates = kept[:-recent]
            kept.remove(min(candidates, key=lambda j: score[j]))
        history.append(list(kept))
    return history


def test_q7_h2o_keeps_the_sink_a_window_loses_it(quiz_questions, first64):
    q7 = quiz_questions[7]
    w = first64["weights"]  # (L, H, 64, 64)
    accumulated = w.sum(axis=2)  # (L, H, n): the weight every token received from all queries
    first = int((accumulated.argmax(-1) == 0).sum())
    assert 200 <= first < 270  # B: "两百多个头"
    assert "270 个头里有两百多个头" in explanation(q7, "B")
    # A, C, D: the eviction replayed on every head's weights, budget 16 (8 recent)
    budget, recent, n = 16, 8, w.shape[-1]
    keeps_sink, sizes = 0, set()
    for layer in range(w.shape[0]):
        for head in range(w.shape[1]):
            history = h2o_keep(w[layer, head].astype(np.float64), budget, recent)
            keeps_sink += all(0 in kept for kept in history)
            sizes |= {len(kept) for kept in history[budget:]}
            gone = set()
            for before, after in zip(history, history[1:], strict=False):
                gone |= set(before) - set(after)
                assert not gone & set(after)  # D: evicted for good
    assert sizes == {budget}  # C: a fixed budget, whatever the length
    assert keeps_sink > w.shape[0] * w.shape[1] // 2  # A: the first token stays in most heads
    window = list(range(n - budget, n))
    assert 0 not in window  # A: a window of the same budget lost it long ago
    assert "（16 个名额，8 个留给最近的词元），大多数头自始至终都留着第 0 个词元" in explanation(q7, "A")


# --------------------------------------------------------------------------- speculative decoding (8-10)

def final_distribution(p, q, accept, resample):
    """Exact distribution of the emitted token: draft x ~ q, keep it with accept(x), else draw from resample."""
    kept = q * accept
    return kept + (1 - kept.sum()) * resample


def distributions(px, qx):
    """Target p and draft q over four tokens with p(x) = px, q(x) = qx (x is token 0); the rest set apart."""
    p = np.array([px, 0.5 * (1 - px), 0.3 * (1 - px), 0.2 * (1 - px)])
    q = np.array([qx, 0.2 * (1 - qx), 0.3 * (1 - qx), 0.5 * (1 - qx)])  # token 3: the draft gives it more than p
    return p, q


def rules(p, q):
    """Each option's rule of question 8 (canonical letters): acceptance per token, resampling distribution."""
    residual = np.maximum(0, p - q) / np.maximum(0, p - q).sum()
    ratio = np.minimum(1, p / q)
    return {"A": (p, p), "B": (ratio, residual), "C": (ratio, p), "D": (np.ones_like(p), p)}


def test_q8_accept_min_1_p_over_q_resample_the_residual(quiz_questions):
    q8 = quiz_questions[8]
    px, qx = 0.2, 0.5
    p, q = distributions(px, qx)
    assert np.isclose(p.sum(), 1) and np.isclose(q.sum(), 1) and (p > q).any() and (p < q).sum() >= 2
    got = {letter: final_distribution(p, q, *rule) for letter, rule in rules(p, q).items()}
    assert np.allclose(got["B"], p, atol=1e-15)  # exact: the target's distribution
    assert not np.allclose(got["A"], p) and not np.allclose(got["D"], p)
    assert got["C"][0] > px  # C: resampling from p puts mass back on x
    assert np.allclose(got["D"], q)  # D: always accepting emits the draft's distribution
    assert options(q8)["B"].startswith("接受的概率是 0.4；") and px / qx == pytest.approx(0.4)


def tree_masks(prefix: int):
    """Masks over prefix + flattened tree a b c d (b, c children of a; d a child of the root)."""
    parents = {0: None, 1: 0, 2: 0, 3: None}  # node index -> parent node
    n = prefix + 4
    causal = np.tril(np.ones((n, n), bool))
    tree = causal.copy()
    full = causal.copy()
    alone = causal.copy()
    for node in range(4):
        row = prefix + node
        ancestors, a = {node}, parents[node]
        while a is not None:
            ancestors.add(a)
            a = parents[a]
        tree[row, prefix:] = [other in ancestors for other in range(4)]
        full[row, prefix:] = True
        alone[row, prefix:] = [other == node for other in range(4)]
    depth = np.array([0, 1, 1, 0])
    return {"A": causal, "B": alone, "C": full, "D": tree}, depth


def test_q9_tree_attention_sees_the_prefix_and_its_ancestors(quiz_questions, model, text_ids):
    q9 = quiz_questions[9]
    prefix = list(text_ids[:8])
    a, b, c, d = (int(x) for x in text_ids[8:12])
    masks, depth = tree_masks(len(prefix))
    positions = torch.as_tensor(np.concatenate([np.arange(len(prefix)), len(prefix) + depth]))
    with torch.no_grad():
        paths = {0: model.forward(prefix + [a])[-1], 1: model.forward(prefix + [a, b])[-1],
                 2: model.forward(prefix + [a, c])[-1], 3: model.forward(prefix + [d])[-1]}
        tree = {letter: model.forward(prefix + [a, b, c, d], mask=torch.as_tensor(mask), positions=positions)
                for letter, mask in masks.items()}
    gap = {letter: [float((logits[len(prefix) + node] - paths[node]).abs().max()) for node in range(4)]
           for letter, logits in tree.items()}
    assert max(gap["D"]) < 1e-3  # D: every node's logits are its own path's
    assert gap["A"][2] > 0.1 and max(gap["A"][:2]) < 1e-3  # A: c differs (it saw b)
    assert gap["B"][1] > 0.1  # B: b without a
    assert gap["C"][0] > 0.1  # C: even a changes
    assert "z 处的 logits 与单独跑“前缀 x z”的不同" in explanation(q9, "A")
    assert "连 x 的 logits 都变了" in explanation(q9, "C")
    for fact in ("“x y”“x z” 和 “u”", "y 和 z 的父节点是 x"):  # the quiz's x, y, z, u are a, b, c, d here
        assert fact in q9["text"]


def expected_tokens(alpha, k):
    """Tokens one round yields, by enumeration: i accepted (i < k) with prob alpha^i (1 - alpha), all k with alpha^k;
    the target's forward adds one token either way."""
    probs = [alpha**i * (1 - alpha) for i in range(k)] + [alpha**k]
    assert math.isclose(sum(probs), 1)
    return sum(p * (i + 1) for i, p in enumerate(probs))


def speedup(alpha, c, k):
    """Tokens per unit of time against plain decoding (one token per target forward)."""
    return expected_tokens(alpha, k) / (1 + c * k)


def test_q10_when_speculative_decoding_does_not_pay(quiz_questions):
    q10 = quiz_questions[10]
    for alpha, k in ((0.2, 4), (0.8, 4), (0.8, 20), (0.9, 4), (0.5, 7)):
        assert math.isclose(expected_tokens(alpha, k), (1 - alpha ** (k + 1)) / (1 - alpha))  # the stem's formula
    # a per-position acceptance alpha is what min(1, p/q) gives: sum_x min(p, q)
    p, q = distributions(0.2, 0.5)
    alpha = float(np.minimum(p, q).sum())
    assert math.isclose(float((q * np.minimum(1, p / q)).sum()), alpha)
    # B: slower
    assert speedup(0.2, 0.5, 4) < 1
    assert f"{expected_tokens(0.2, 4):.2f}" == "1.25" and f"{(1 + 0.5 * 4) / expected_tokens(0.2, 4):.1f}" == "2.4"
    # A: k = 20 is slower than k = 4
    assert speedup(0.8, 0.05, 20) < speedup(0.8, 0.05, 4)
    assert f"{expected_tokens(0.8, 4):.2f}" == "3.36" and f"{speedup(0.8, 0.05, 4):.1f}" == "2.8"
    assert f"{expected_tokens(0.8, 20):.2f}" == "4.95" and f"{speedup(0.8, 0.05, 20):.1f}" == "2.5"
    # D: a draft as slow as the target never pays at alpha = 0.9, k = 4
    assert speedup(0.9, 1.0, 4) < 1
    assert f"{expected_tokens(0.9, 4):.2f}" == "4.10" and f"{5 / expected_tokens(0.9, 4):.2f}" == "1.22"
    for number in ("3.36", "2.8", "4.95", "2.5"):
        assert number in explanation(q10, "A")
    for number in ("1.25", "2.4"):
        assert number in explanation(q10, "B")
    for number in ("4.10", "1.22"):
        assert number in explanation(q10, "D")
    # C: the output's distribution is the target's (question 8's exact computation)
    assert np.allclose(final_distribution(p, q, *rules(p, q)["B"]), p, atol=1e-15)
