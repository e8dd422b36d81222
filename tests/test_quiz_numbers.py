"""Quiz questions with per-student numbers: every variant's key checked by code.

A question whose content is a number (a variance, the projections' parameters of h heads, a
count of scores, a distance under ALiBi, a group count, a cache's size, a crossing length, the
waste of paging) draws its numbers per student
(``quiz.Question(params=, derive=)``).  For EVERY combination of a question's parameters this
file computes, with attnlib, which options are true, and holds that set against the key of the
hidden ``quiz.grade(...)`` call (canonical letters, the same for every variant): the right
option stays right and every distractor stays wrong whatever the student drew.  The options of
one variant are distinct, every placeholder of the stem, the options and the explanations is
filled, two students see different numbers, and the canonical variant (no student) is the
question as written.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_quiz import SHOW, questions

from attnlib import numpy as anp
from attnlib import quiz, variants

GIB = 2**30

#: The questions with per-student numbers, by quiz (question numbers).
NUMERIC = {"quiz-sdpa": (4,), "quiz-qkv": (6, 7), "quiz-modern": (4, 5, 6, 7), "quiz-frontier": (1, 7, 8),
           "quiz-practice": (2, 3, 4, 5, 8)}

#: Each numeric question as it is written (its canonical variant): the stem, then the options in written order.
WRITTEN = {
    ("quiz-sdpa", 4): (
        r"设 $q$、$k$ 的各分量相互独立、均值 0、方差 1，$d_k = 64$。**不做缩放**时，点积 $q\cdot k$ 的方差大约是多少？",
        ["约 64", "约 8", "约 1", "约 0"]),
    ("quiz-qkv", 6): (
        "一个模型的 $d_{model} = 512$，多头注意力用 $h = 8$ 个头，每个头 $d_k = d_{model} / h = 64$。"
        "每个头使用各自独立的投影矩阵，根本目的是什么？",
        ["加快 softmax 的运算速度", "在不同的子空间里捕捉不同的关联模式",
         "减少模型的总参数量：Q、K、V 的投影从单头时的 786432 个参数减到 98304 个", "取代位置编码"]),
    ("quiz-qkv", 7): (
        "序列长度为 $n$ 时，标准自注意力关于 $n$ 的时间复杂度是多少？以一个头要算的注意力分数为例："
        "$n = 1024$ 时是 1048576 个，$n$ 翻倍到 2048 时是多少个？",
        ["$O(n)$，线性：2097152 个", "$O(n^3)$，立方：8388608 个", "$O(n^2)$，平方：4194304 个",
         "$O(1)$，常数：仍是 1048576 个"]),
    ("quiz-modern", 4): (
        "常见说法：“ALiBi 能外推，训练时用短序列，推理时就能在长得多的序列上用好全部上下文。”一个 8 头的模型用 ALiBi，"
        r"第 $h$ 个头的斜率为 $2^{-h}$（$h = 1, \dots, 8$）。考虑某个查询的一行，设所有键缩放后的原始分数都相同。"
        "下列哪项正确？",
        ["第 8 个头（斜率 1/256）里，距离为 1000 的键的权重也不到距离为 0 的键的 $10^{-8}$",
         "8 个头的斜率相同，所以各个头对远处的键一视同仁",
         "偏置只在训练时见过的长度以内有定义，更长的序列算不出偏置",
         "第 1 个头（斜率 1/2）里，距离为 40 的键的权重不到距离为 0 的键的 $10^{-8}$"]),
    ("quiz-modern", 5): (
        "一个模型原有 32 个注意力头。把它改成分组查询注意力（GQA，grouped-query attention），键值头数 $h_{kv} = 8$。"
        "下列哪项正确？",
        ["查询仍有 32 个头；每 4 个查询头共用一组键和值，一共只有 8 组键和值", "32 个查询头全部共用同一组键和值",
         "每 4 个查询头合并成一个，查询只剩 8 个头", "每个键值头的维度变为原来的 4 倍，使 K、V 的总大小不变"]),
    ("quiz-modern", 6): (
        "一个解码器有 32 层，每层 32 个头，$d_{head} = 128$，KV 缓存用 float16 存放。batch 为 8，每条序列 4096 个词元。"
        "KV 缓存一共占多少内存？（1 GiB = $2^{30}$ 字节）",
        ["2 GiB", "8 GiB", "16 GiB", "32 GiB"]),
    ("quiz-modern", 7): (
        "把第 6 题的模型改成 GQA：键值头 $h_{kv} = 8$，查询头仍是 32 个，其余（层数、$d_{head}$、float16、batch、"
        "序列长度）都不变。下列哪些说法正确？",
        ["每生成一个词元，查询投影 $W_Q$ 的计算量不变", "每一步解码要算的注意力分数个数也降到原来的 1/4",
         "投影矩阵 $W_K$、$W_V$ 的参数量不变", "KV 缓存降到 4 GiB"]),
    ("quiz-frontier", 1): (
        "DeepSeek-V2 的多头潜在注意力（MLA，multi-head latent attention）取 $h = 128$ 个头、$d_{head} = 128$、"
        "$d_{latent} = 512$、$d_{rope} = 64$。生成时，MLA 每层为每个词元缓存多少个数？"
        r"（对照：同样 128 个头的多头注意力，KV 缓存每层每个词元存 $2 \times 128 \times 128 = 32768$ 个数。）",
        ["32768：每个头的键和值仍要各存一份",
         "576：潜在向量 $c_{kv}$ 的 512 个数，加上所有头共用的旋转键 $k_r$ 的 64 个数",
         "8704：潜在向量的 512 个数，加上每个头各自一个 64 维的旋转键",
         "1152：键和值各有一个 512 + 64 维的潜在向量"]),
    ("quiz-frontier", 7): (
        r"一层、一个头，$d_k = d_v = d_{head} = 128$，所有数用同一种浮点类型。"
        r"delta 规则的状态是 $d_k \times d_v$ 个数；同样一个头的 softmax 注意力，"
        r"KV 缓存每个词元存 $2 \times 128$ 个数。序列长度 $n$ 超过多少个词元时，KV 缓存就比状态大？",
        ["64", "128", "16384", "永远不会：状态也随 $n$ 增长"]),
    ("quiz-frontier", 8): (
        "推理服务器上每个请求最多 4096 个词元，一个请求实际只用了 1000 个词元。按最大长度为它预留一段连续的 KV 缓存，"
        "会空着多少个词元的位置？改用块大小为 16 的分页 KV 缓存（按需一块一块地分配），又空着多少个？",
        ["3096 和 8", "3096 和 0", "3096 和 15", "3096 和 3096"]),
    ("quiz-practice", 2): (
        "StreamingLLM 的滚动缓存永远留着最前面的 4 个词元作注意力汇聚点，此外只留最近的词元：每个查询看得见这 4 个"
        "汇聚点和最近的 1020 个词元（它自己也算在内），缓存最多存 1024 个词元。按 StreamingLLM 的做法给 RoPE 位置，原文"
        "的第 2000 个词元（从 0 数起）送进模型时，它的查询与第 0 个词元之间，RoPE 看到的距离是多少？",
        ["2000", "1023", "1020", "1024"]),
    ("quiz-practice", 3): (
        r"有的模型给每个头一个汇聚点 logit $b$：$w_{ij} = \exp(s_{ij}) \,/\, \big(e^{b} + \sum_l \exp(s_{il})\big)$。"
        "某个查询的一行有 7 个键，分数 $s_{ij}$ 都是 0（哪个键都不匹配），$e^{b} = 2$。"
        "这一行分给这 7 个键的权重加起来是多少？",
        ["1", "2/9", "7/9", "1/9"]),
    ("quiz-practice", 4): (
        "SmolLM2-135M-Instruct 有 30 层，9 个查询头共用 3 个键值头（分组查询注意力），$d_{head} = 64$。KV 缓存用 "
        "float16 存放（每个数 2 字节），一条 8192 个词元的序列，缓存一共占多少内存？（1 MiB = $2^{20}$ 字节）",
        ["540 MiB", "90 MiB", "6 MiB", "180 MiB"]),
    ("quiz-practice", 5): (
        "一种块量化格式把每行权重按 32 个一块切开，每块存一个 float16 的步长 $d$、一个 float16 的最小值 $m$ 和 32 个 "
        r"4 位的编码 $q$，还原时 $w = d\,q + m$。块大小为 32 时，它就是 SmolLM2-135M-Instruct 的权重文件里的 Q4_1。"
        "每个权重平均占多少位？",
        ["4", "5", "4.5", "6"]),
    ("quiz-practice", 8): (
        "推测解码：小的草稿模型先提出下一个词元 $x$，它给 $x$ 的概率是 $q(x) = 0.5$；大的目标模型给 $x$ 的概率是 "
        "$p(x) = 0.2$。要让最后得到的词元恰好服从目标模型的分布 $p$，$x$ 应以多大的概率被接受？被拒绝时从哪个分布"
        "重新采样？",
        ["接受的概率是 0.2；被拒绝时从 $p$ 重新采样",
         r"接受的概率是 0.4；被拒绝时从 $\max(0,\ p - q)$ 归一化后的分布重新采样",
         "接受的概率是 0.4；被拒绝时从 $p$ 重新采样", "接受的概率是 1，不必重新采样"]),
}

STUDENTS = [f"s{i:03d}" for i in range(40)]


@pytest.fixture(scope="module")
def numeric():
    """(assignment, number) -> the question's record from ``test_quiz.questions`` plus its cell's namespace."""
    out = {}
    for name, numbers in NUMERIC.items():
        for q in questions(name):
            number = q["question"].number
            namespace = {"quiz": quiz}
            exec(SHOW.sub("", q["show"].source), namespace)  # noqa: S102 - the repository's own notebook cell
            out[name, number] = {**q, "namespace": namespace, "numeric": number in numbers}
    return out


def combinations(params: dict):
    """Every combination of the allowed values, one dict each."""
    for combo in itertools.product(*params.values()):
        yield dict(zip(params, combo, strict=True))


def all_values(entry) -> list[dict]:
    """The numbers of every variant a student can draw: each combination of params (and of the params it
    draws as an earlier question does), with what derive adds."""
    question = entry["question"]
    lists = {name: values for other in question.params_from.values() for name, values in other.items()}
    out = []
    for drawn in combinations({**lists, **question.params}):
        values = dict(drawn)
        values.update(question.derive(dict(drawn)) if question.derive else {})
        out.append(values)
    return out


def filled(entry, values) -> tuple[str, dict[str, str], dict[str, str]]:
    """The stem, the options and the explanations of one variant, canonical letters."""
    question, call = entry["question"], entry["call"]
    options = {letter: text.format(**values) for letter, text in zip("ABCD", question.options, strict=True)}
    explanations = {letter: text.format(**values) for letter, text in call["explanations"].items()}
    return question.stem.format(**values), options, explanations


def number_in(text: str) -> Fraction:
    """The first number an option shows, exactly."""
    return Fraction(re.search(r"\d+(\.\d+)?", text).group())


# --------------------------------------------------------------------------- what is true, computed by code

def sample_variance(d_k: int) -> float:
    """Variance of the unscaled q.k over 4000 draws: attnlib's scaled scores times sqrt(d_k)."""
    q, k = np.random.default_rng(d_k).standard_normal((2, 4000, 1, d_k))
    return float((anp.attention_scores(q, k)[:, 0, 0] * math.sqrt(d_k)).var())


def true_sdpa_4(values, options):
    var = sample_variance(values["d_k"])
    nearest = min(options, key=lambda letter: abs(number_in(options[letter]) - Fraction(var)))
    assert abs(var - float(number_in(options[nearest]))) < 0.15 * var  # unambiguous: within a few standard errors
    return {nearest}


def true_qkv_6(values, options):
    d_model, h, n = values["d_model"], values["h"], 5
    rng = np.random.default_rng(d_model + h)
    x = rng.standard_normal((n, d_model))
    w_q, w_k, w_v = rng.standard_normal((3, d_model, d_model)) / math.sqrt(d_model)
    out, weights = anp.multi_head_attention(x, x, w_q, w_k, w_v, np.eye(d_model), h)
    _, one_head = anp.multi_head_attention(x, x, w_q, w_k, w_v, np.eye(d_model), 1)
    assert anp.split_heads(x @ w_q, h).shape == (h, n, values["d_k"])
    # head i reads its own d_k columns of each projection: h heads' weights together are the whole matrix
    heads_params = 3 * anp.split_heads(w_q, h).size
    single, shown = (int(number) for number in re.findall(r"\d+", options["C"]))
    assert single == 3 * w_q.size and shown < single
    perm = rng.permutation(n)
    out_p, _ = anp.multi_head_attention(x[perm], x[perm], w_q, w_k, w_v, np.eye(d_model), h)
    truth = {"A": weights.size < one_head.size,  # h rows of n x n weights to normalise, not fewer
             "B": not np.allclose(weights[0], weights[1]),  # each head weighs the same tokens its own way
             "C": heads_params == shown,
             "D": not np.allclose(out_p, out[perm])}  # still blind to order: positions must come from elsewhere
    return {letter for letter, true in truth.items() if true}


#: The complexity each option of quiz-qkv 7 names, as the power of n.
POWER = {"$O(n)$": 1, "$O(n^3)$": 3, "$O(n^2)$": 2, "$O(1)$": 0}


def true_qkv_7(values, options):
    n = values["n"]
    rng = np.random.default_rng(n)
    scores = {m: anp.attention_scores(*rng.standard_normal((2, m, 1))).size for m in (n, 2 * n)}
    assert (values["scores"], values["n2"]) == (scores[n], 2 * n)
    power = math.log2(scores[2 * n] / scores[n])
    truth = {}
    for letter, text in options.items():
        label, count = text.split("，")[0], int(re.search(r"(\d+) 个", text).group(1))
        assert count == scores[n] * 2 ** POWER[label]  # each option's count is what its own complexity says
        truth[letter] = POWER[label] == power and count == scores[2 * n]
    return {letter for letter, true in truth.items() if true}


def alibi_ratio(head: int, distance: int) -> float:
    """Weight of the key ``distance`` back over the query's own key, raw scores equal, with anp.alibi_bias's slope."""
    slope = -float(np.asarray(anp.alibi_bias(2, 2, 8))[head - 1, 1, 0])
    row = anp.softmax(-slope * np.arange(distance + 1, dtype=float))
    return float(row[distance] / row[0])


def true_modern_4(values, options):
    slopes = -np.asarray(anp.alibi_bias(2, 2, 8))[:, 1, 0]
    assert "斜率 1/256" in options["A"] and slopes[7] == 1 / 256 and "斜率 1/2）" in options["D"] and slopes[0] == 0.5
    short, long = np.asarray(anp.alibi_bias(64, 64, 8)), np.asarray(anp.alibi_bias(256, 256, 8))
    far, near = alibi_ratio(8, values["far"]), alibi_ratio(1, values["near"])
    truth = {"A": far < 1e-8, "B": len(set(slopes)) == 1,
             "C": not np.array_equal(long[:, :64, :64], short),  # the bias of any length is the formula's
             "D": near < 1e-8}
    # the explanations' claims: 10^-8 ~ e^-18.4, far/256 under 12 and the ratio far above 10^-8, near/2 above 18.4
    assert round(-math.log(1e-8), 1) == 18.4 and values["far"] / 256 < 12 and far > 100 * 1e-8
    assert values["near"] / 2 > -math.log(1e-8)
    return {letter for letter, true in truth.items() if true}


def true_modern_5(values, options):
    heads, kv = values["heads"], values["kv"]
    rng = np.random.default_rng(heads + kv)
    q = torch.from_numpy(rng.standard_normal((1, heads, 3, 2)))
    k, v = (torch.from_numpy(rng.standard_normal((1, kv, 3, 2))) for _ in range(2))
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)[0]
    k2 = k.clone()
    k2[0, 1] += torch.from_numpy(rng.standard_normal((3, 2)))  # key/value head 1's keys moved
    moved = (F.scaled_dot_product_attention(q, k2, v, enable_gqa=True)[0] - out).abs().amax(dim=(-1, -2)) > 1e-9
    readers = torch.nonzero(moved).flatten().tolist()  # the query heads reading key/value head 1
    group = len(readers)
    assert readers == list(range(group, 2 * group))
    assert f"查询仍有 {heads} 个头；每 {group} 个查询头共用一组键和值，一共只有 {kv} 组键和值" == options["A"]
    truth = {"A": out.shape[0] == heads and group * kv == heads, "B": kv == 1,
             "C": out.shape[0] == kv, "D": k.shape[-1] != q.shape[-1]}
    return {letter for letter, true in truth.items() if true}


@functools.cache
def numbers_per_token(layers, heads, d_head, kv_heads=None) -> int:
    """Numbers attnlib's KVCache holds for one token of one sequence (stored in float16, 2 bytes each)."""
    cache = anp.KVCache(layers, heads, d_head, n_kv_heads=kv_heads, capacity=1)
    one = np.zeros((1, kv_heads or heads, 1, d_head), np.float16)
    for layer in range(layers):
        cache.append(layer, one, one)
    return cache.nbytes // 2


def cache_bytes(layers, heads, d_head, itemsize, batch, tokens, kv_heads=None) -> int:
    """Bytes of the cache of ``batch`` sequences of ``tokens`` tokens, ``itemsize`` bytes a number."""
    return numbers_per_token(layers, heads, d_head, kv_heads) * itemsize * batch * tokens


ITEMSIZE = {"float16": np.dtype(np.float16).itemsize, "bfloat16": torch.bfloat16.itemsize, "float32": 4}


def true_modern_6(values, options):
    layers, heads, d_head, batch, tokens = (values[k] for k in ("layers", "heads", "d_head", "batch", "tokens"))
    right = cache_bytes(layers, heads, d_head, ITEMSIZE[values["dtype"]], batch, tokens)
    shown = {letter: number_in(text) * GIB for letter, text in options.items()}
    # the distractors are the usual slips: batch 1, K or V only, float32
    slips = {cache_bytes(layers, heads, d_head, 2, 1, tokens), right // 2,
             cache_bytes(layers, heads, d_head, ITEMSIZE["float32"], batch, tokens)}
    assert set(shown.values()) == slips | {right}
    return {letter for letter, size in shown.items() if size == right}


def true_modern_7(values, options):
    layers, heads, kv, d_head, batch, tokens = (values[k] for k in ("layers", "heads", "kv", "d_head", "batch",
                                                                    "tokens"))
    d_model, t = heads * d_head, 5
    w_q = {h_kv: d_model * heads * d_head for h_kv in (heads, kv)}  # W_Q: d_model -> heads x d_head, whatever h_kv
    w_k = {h_kv: d_model * h_kv * d_head for h_kv in (heads, kv)}
    scores = {h_kv: heads * t for h_kv in (heads, kv)}  # each query head scores the t cached keys
    gqa = cache_bytes(layers, heads, d_head, ITEMSIZE[values["dtype"]], batch, tokens, kv_heads=kv)
    assert f"1/{heads // kv}" in options["B"]
    truth = {"A": w_q[kv] == w_q[heads], "B": scores[kv] * (heads // kv) == scores[heads],
             "C": w_k[kv] == w_k[heads], "D": number_in(options["D"].removeprefix("KV 缓存降到 ")) * GIB == gqa}
    return {letter for letter, true in truth.items() if true}


def true_frontier_1(values, options):
    latent = anp.LatentKVCache(1, values["d_latent"], values["d_rope"])
    latent.append(0, np.zeros((1, values["d_latent"]), np.float16), np.zeros((1, values["d_rope"]), np.float16))
    mha = anp.KVCache(1, values["h"], values["d_head"])
    one = np.zeros((1, values["h"], 1, values["d_head"]), np.float16)
    mha.append(0, one, one)
    stored, full = latent.nbytes // 2, mha.nbytes // 2  # numbers per token of one layer (float16: 2 bytes)
    assert number_in(options["A"]) == full and full >= 5 * stored  # "远少于"
    return {letter for letter, text in options.items() if number_in(text) == stored}


def true_frontier_7(values, options):
    d = values["d"]
    x = np.random.default_rng(d).standard_normal((10, d)) / math.sqrt(d)
    state = anp.delta_rule(x, x, x, np.full(10, 0.5))[1]
    y = np.random.default_rng(d + 1).standard_normal((100, d)) / math.sqrt(d)
    grows = anp.delta_rule(y, y, y, np.full(100, 0.5))[1].nbytes != state.nbytes

    def cache(n):
        kv = anp.KVCache(1, 1, d, capacity=n)
        kv.append(0, np.zeros((1, 1, n, d)), np.zeros((1, 1, n, d)))
        return kv.nbytes

    crossing = state.nbytes // cache(1)
    assert cache(crossing) == state.nbytes < cache(crossing + 1)
    assert values["at_4k"] == cache(4096) // state.nbytes and values["at_128k"] == cache(1) * 131072 // state.nbytes
    truth = {letter: text.isdigit() and int(text) == crossing for letter, text in options.items()}
    truth["D"] = grows
    return {letter for letter, true in truth.items() if true}


def true_frontier_8(values, options):
    max_len, used, block = values["max_len"], values["used"], values["block"]
    cache = anp.PagedKVCache(used // block + 2, block, 1, 1)
    seq = cache.allocate()
    cache.append(seq, np.zeros((1, used, 1)), np.zeros((1, used, 1)))
    slots = cache.nbytes // (2 * 8)  # float64 keys and values, one head of width 1
    assert len(cache.block_table(seq)) == values["blocks"] and slots == values["slots"]
    pairs = {letter: tuple(int(x) for x in text.split(" 和 ")) for letter, text in options.items()}
    return {letter for letter, pair in pairs.items() if pair == (max_len - used, slots - used)}


def true_practice_2(values, options):
    s, w, t = values["s"], values["w"], values["t"]
    cache = anp.SinkKVCache(1, 1, 2, n_sink=s, window=w)
    cache.append(0, np.zeros((1, t, 2)), np.zeros((1, t, 2)))  # tokens 0 .. t-1
    cache.append(0, np.zeros((1, 1, 2)), np.zeros((1, 1, 2)))  # token t
    slots, held = cache.positions(), cache.tokens()
    assert (held[0], held[-1], len(held)) == (0, t, values["cap"])  # the sink and the new token are held
    distance = int(slots[-1] - slots[0])  # what RoPE sees: slots, not the text's indices
    return {letter for letter, text in options.items() if int(text) == distance}


def true_practice_3(values, options):
    n, eb = values["n"], values["eb"]
    _, weights = anp.sink_attention(np.zeros((1, 1, 2)), np.zeros((1, n, 2)), np.ones((1, n, 1)),
                                    np.array([math.log(eb)]))
    total = float(weights.sum())
    return {letter for letter, text in options.items() if abs(float(Fraction(text)) - total) < 1e-12}


TORCH_DTYPE = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}


def true_practice_4(values, options):
    from attnlib import torch as att

    cache = att.KVCache(30, 9, 64, n_kv_heads=3, capacity=1)  # SmolLM2-135M's shape
    one = torch.zeros(3, 1, 64, dtype=TORCH_DTYPE[values["dtype"]])
    for layer in range(30):
        cache.append(layer, one, one)
    assert cache.nbytes == values["per_token"] and one.element_size() == values["itemsize"]
    size = Fraction(cache.nbytes * values["n"], 2**20)
    return {letter for letter, text in options.items() if Fraction(text.removesuffix(" MiB")) == size}


def true_practice_5(values, options):
    from attnlib import pretrained

    block = values["B"]
    assert 8 * pretrained.Q4_1_BLOCK / pretrained.BLOCK_WEIGHTS == 5  # block 32: Q4_1's 20 bytes
    layout = 2 + 2 + block // 2  # float16 d, float16 m, two 4-bit codes a byte
    assert block % 32 == 0 or block == 16
    bits = Fraction(8 * layout, block)
    return {letter for letter, text in options.items() if Fraction(text) == bits}


def true_practice_8(values, options):
    from test_quiz_practice import distributions, final_distribution, rules

    p, q = distributions(values["p"], values["q"])
    canonical = rules(p, q)  # the option rules by name: p / min(1, p/q) / 1, resampling from p or the residual
    accept = {"p": canonical["A"][0], "ratio": canonical["B"][0], "one": canonical["D"][0]}
    resample = {"p": canonical["A"][1], "residual": canonical["B"][1]}
    truth = set()
    for letter, text in options.items():
        shown = Fraction(re.search(r"接受的概率是 ([\d.]+)", text).group(1))
        (rule,) = [name for name, a in accept.items() if abs(float(shown) - a[0]) < 1e-12]
        source = "residual" if r"\max(0" in text else "p"
        if "不必重新采样" in text:
            source = "p"  # never used: every proposal is kept
        if np.allclose(final_distribution(p, q, accept[rule], resample[source]), p, atol=1e-15):
            truth.add(letter)
    return truth


TRUE = {("quiz-sdpa", 4): true_sdpa_4, ("quiz-qkv", 6): true_qkv_6, ("quiz-qkv", 7): true_qkv_7,
        ("quiz-modern", 4): true_modern_4, ("quiz-modern", 5): true_modern_5,
        ("quiz-modern", 6): true_modern_6, ("quiz-modern", 7): true_modern_7, ("quiz-frontier", 1): true_frontier_1,
        ("quiz-frontier", 7): true_frontier_7, ("quiz-frontier", 8): true_frontier_8,
        ("quiz-practice", 2): true_practice_2, ("quiz-practice", 3): true_practice_3,
        ("quiz-practice", 4): true_practice_4, ("quiz-practice", 5): true_practice_5,
        ("quiz-practice", 8): true_practice_8}


# --------------------------------------------------------------------------- the tests

def test_the_numeric_questions_are_the_ones_listed(numeric):
    """Exactly the listed questions draw numbers; 15 of the 50."""
    drawn = {key for key, entry in numeric.items() if entry["question"].params}
    assert drawn == {key for key, entry in numeric.items() if entry["numeric"]} == set(TRUE) == set(WRITTEN)
    assert (len(drawn), len(numeric)) == (15, 50)


@pytest.mark.parametrize("key", sorted(TRUE))
def test_every_variant_keeps_its_key(numeric, key):
    """For every combination of the parameters: the options true by code are the key; options distinct, filled."""
    entry = numeric[key]
    want = set(entry["call"]["key"])
    everything = all_values(entry)
    assert len(everything) >= 3
    for values in everything:
        stem, options, explanations = filled(entry, values)
        assert len(set(options.values())) == 4, (key, values)
        for text in (stem, *options.values(), *explanations.values()):
            assert not re.search(r"[{}]", re.sub(r"\$[^$]*\$", "", text)), text  # braces only in LaTeX
        assert TRUE[key](values, options) == want, (key, values)


@pytest.mark.parametrize("key", sorted(TRUE))
def test_the_canonical_variant_is_the_written_question(numeric, key, monkeypatch):
    for var in (variants.ENV_STUDENT, "JUPYTERHUB_USER"):
        monkeypatch.delenv(var, raising=False)
    variants.pin(None)
    question = numeric[key]["question"]
    stem, options = WRITTEN[key]
    assert question.markdown() == "\n".join([stem, "", *(f"- **{letter}.** {text}" for letter, text in
                                                      zip("ABCD", options, strict=True))])
    assert numeric[key]["text"].endswith(question.markdown())


@pytest.mark.parametrize("key", sorted(TRUE))
def test_two_students_get_different_numbers(numeric, key):
    question = numeric[key]["question"]
    seen = {}
    for student in STUDENTS:
        variant = question.variant(student)
        seen[student] = (tuple(sorted(variant.values.items(), key=str)), question.markdown(variant))
    assert len({numbers for numbers, _ in seen.values()}) >= min(4, len(all_values(numeric[key])))
    a, b = next((a, b) for a, b in itertools.combinations(STUDENTS, 2) if seen[a][0] != seen[b][0])
    assert seen[a][1] != seen[b][1]


def test_question_7_reads_question_6s_model_of_the_same_student(numeric):
    q6, q7 = numeric["quiz-modern", 6], numeric["quiz-modern", 7]
    assert q7["question"].params_from == {6: q6["question"].params}
    seen = set()
    for student in STUDENTS:
        six, seven = q6["question"].variant(student).values, q7["question"].variant(student).values
        assert all(seven[name] == six[name] for name in q6["question"].params)
        seen.add((six["layers"], six["heads"]))
    assert len(seen) > 5
    try:  # the student of the kernel (pinned by the grader) is the one both questions follow
        variants.pin(STUDENTS[1])
        assert q7["question"].variant().values == q7["question"].variant(STUDENTS[1]).values
    finally:
        variants.pin(None)


def test_params_from_draws_as_the_other_question_does():
    """``Question(params_from={n: lists})``: those numbers are question n's for the same student, the rest its own."""
    model = {"layers": [32, 24, 40, 48], "heads": [32, 64]}
    first = quiz.Question("quiz-x", 1, options=["{layers}", "b"], params=model)
    second = quiz.Question("quiz-x", 2, options=["{layers} {kv}", "b"], params={"kv": [8, 4, 2]},
                           params_from={1: model}, derive=lambda v: {"group": v["heads"] // v["kv"]})
    alone = quiz.Question("quiz-x", 2, options=["{layers} {kv}", "b"], params={**model, "kv": [8, 4, 2]})
    assert second.variant(None).values == {"layers": 32, "heads": 32, "kv": 8, "group": 4}  # canonical: first values
    own, differ = set(), 0
    for student in STUDENTS:
        one, two = first.variant(student).values, second.variant(student).values
        assert {name: two[name] for name in model} == one and two["group"] == two["heads"] // two["kv"]
        assert two["kv"] == alone.variant(student).values["kv"]  # its own numbers drawn as question 2's
        differ += {name: alone.variant(student).values[name] for name in model} != one
        own.add(two["kv"])
    assert own == {8, 4, 2} and differ > len(STUDENTS) // 2  # drawing under number 2 would not give question 1's


def test_derive_names_no_right_option(numeric):
    """``derive`` computes the numbers options show; none of its names says which option is right."""
    for key in TRUE:
        for values in all_values(numeric[key])[:1]:
            assert not {name for name in values if re.search(r"right|key|answer|correct|wrong", name)}


def test_feedback_speaks_the_students_numbers(numeric, capsys):
    entry = numeric["quiz-modern", 6]
    question, call = entry["question"], entry["call"]
    student = next(s for s in STUDENTS if question.variant(s).values["layers"] != 32)
    variants.pin(student)
    try:
        variant = question.variant()
        got = quiz.grade(variant.shown(call["key"]), question=question, key=call["key"], number=6, multi=False,
                         points=1, explanations=call["explanations"])
    finally:
        variants.pin(None)
    out = capsys.readouterr().out
    assert got == 1
    values = variant.values
    assert f"{values['layers']} × 2 × {values['heads']}" in out and f"{values['size_3']} GiB" in out
