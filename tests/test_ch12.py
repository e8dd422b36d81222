"""Chapter 12 (应用场景): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: the encoder-decoder trained in the lesson translates unseen sentences, its cross-
attention reads as the reversed alignment, cached generation equals uncached generation, and the retrieval
facts (scaling keeps the ranking, cosine changes it) hold. The self-check's facts are checked with attnlib,
and the assignment is generated, submitted and autograded by nbgrader.
"""

from __future__ import annotations

import assignments
import numpy as np
import pytest
import torch
import yaml
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.torch.seq2seq import TinySeq2Seq

ASSIGNMENT = "ch12-applications"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    text = CHAPTER.read_text(encoding="utf-8")
    body = prose(CHAPTER)
    opening = body[:body.index("## 一个编造的翻译任务")]
    for term in ("词元（token）", "查询（query）", "键（key）", "值（value）", "掩码（mask）", "编码器（encoder）",
                 "解码器（decoder）", "交叉注意力（cross-attention）"):
        assert term in opening, term
    for doc in ("ch08-masks", "ch11-kv-cache"):
        assert f"{{doc}}`{doc}`" in opening
    assert body.count("一种常见的说法是") >= 1  # the claim about scaling in retrieval, then corrected by code
    assert "{doc}`api`" in section(body, "小结")
    for word in ("种子", "原题", "讲义"):
        assert word not in text


def test_the_book_links_here():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第四部分 应用与复盘")
    assert part["chapters"][0] == {"file": "book/ch12-applications", "title": "12. 应用场景"}
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    line = next(line for line in intro.splitlines() if line.startswith("- **第四部分 应用与复盘**"))
    assert "{doc}`ch12-applications`" in line
    ch11 = (ROOT / "book" / "ch11-kv-cache.md").read_text(encoding="utf-8")
    assert "{doc}`ch12-applications`" in section(prose(ROOT / "book" / "ch11-kv-cache.md"), "小结")
    assert "第 12 章「应用场景」" not in ch11
    assert "{doc}`ch12-applications`" in (ROOT / "book" / "ch09-multihead.md").read_text(encoding="utf-8")


def test_the_training_is_described_as_it_is_done():
    training = section(prose(CHAPTER), "在 CPU 上训练")
    source = _source()
    assert "64 句" in training and "400 步" in training and "Adam" in training
    assert "range(400)" in source and "make_batch(64)" in source and "torch.optim.Adam" in source
    assert "torch.set_num_threads(1)" in source and "构建本书的这台机器" in training
    assert "load" not in source and "download" not in source  # nothing downloaded, no weights read


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_the_task_is_reversed_word_by_word_translation(chapter):
    src, tgt, word_of = chapter["test_src"], chapter["test_tgt"], chapter["word_of"]
    assert src.shape == tgt.shape == (500, 6)
    assert sorted(word_of.tolist()) == list(range(1, 11))  # a one-to-one dictionary, no start token
    assert torch.equal(tgt.flip(-1), word_of[src])
    assert chapter["model"].n_heads == 4 and chapter["glued"]["ch12_params"] == chapter["model"].n_parameters()


@pytest.mark.cjk_font
def test_the_training_is_held_to_the_held_out_accuracy(chapter):
    """Whole sentences right on unseen sources: about 1.0 trained, 0 untrained (10^-6 by chance)."""
    g = chapter["glued"]
    assert g["ch12_held_acc"] >= 0.9 and g["ch12_untrained_acc"] < 0.05
    assert 400 <= g["ch12_held_out"] <= 500
    seen = chapter["seen"]
    assert len(seen) > 20_000 and not any(tuple(s) in seen for s in chapter["held_src"].tolist())
    assert g["ch12_train_seconds"] < 60  # the book build stays short (about 4 s measured here)


@pytest.mark.cjk_font
def test_cross_attention_reads_as_the_reversed_alignment(chapter):
    cross = chapter["cross"]
    assert cross.shape == (len(chapter["held_src"]), 4, 6, 6)
    torch.testing.assert_close(cross.sum(-1), torch.ones(cross.shape[:-1]))
    g = chapter["glued"]
    assert g["ch12_align_mean"] > 0.9  # chance: 1/6
    assert g["ch12_align_worst_head"] <= g["ch12_align_best_head"]
    assert g["ch12_align_best_head"] > 0.9 and g["ch12_align_worst_head"] < g["ch12_align_mean"]  # "并不一样干净"
    # "有的头把权重分给相邻的两个词元": the worst head's runner-up weight is large and next to its top one
    top2 = cross[:, int(chapter["per_head"].argmin())].topk(2, dim=-1)
    assert float(top2.values[..., 1].mean()) > 0.1  # a head on one word alone leaves about 0
    adjacent = ((top2.indices[..., 0] - top2.indices[..., 1]).abs() == 1).float().mean()
    assert float(adjacent) > 0.9  # two random positions of six are adjacent one time in three
    # an untrained model of the same shape has no such alignment
    fresh = TinySeq2Seq(10, 11, d_model=32, n_heads=4, n_layers=1, seed=0)
    with torch.no_grad():
        memory = fresh.encode(chapter["held_src"])
        tgt_in = torch.cat([torch.zeros(len(memory), 1, dtype=torch.long), chapter["held_tgt"][:, :-1]], 1)
        _, w = fresh.decode(tgt_in, memory, need_weights=True)
    untrained_hit = float((w["cross"][0].mean(1).argmax(-1) == torch.arange(6).flip(0)).float().mean())
    assert untrained_hit < 0.5


@pytest.mark.cjk_font
def test_the_encoder_heads_differ(chapter):
    enc = chapter["enc_w"]
    assert enc.shape[1:] == (4, 6, 6) and chapter["head_gap"] > 0.02


@pytest.mark.cjk_font
def test_the_same_word_in_two_contexts_gets_two_vectors(chapter):
    pair = chapter["pair"]
    assert pair[0, 2] == pair[1, 2] and (pair[0] != pair[1]).sum() >= 4
    g = chapter["glued"]
    assert g["ch12_ctx_cos"] < 0.999 and g["ch12_other_cos"] < g["ch12_ctx_cos"] - 0.2
    model = chapter["model"]
    # the encoder's inputs at that position are the same vector: the difference is the context's doing
    assert torch.equal(model.src_embedding[pair[0, 2]], model.src_embedding[pair[1, 2]])


@pytest.mark.cjk_font
def test_cached_generation_equals_generation_without_the_cache(chapter):
    assert torch.equal(chapter["output"], chapter["no_cache"])
    assert chapter["glued"]["ch12_gen_gap"] < 1e-4
    assert chapter["cross_cache"].length == 6  # the memory's keys and values, appended once


def test_the_cross_attention_keys_and_values_are_computed_once():
    model = TinySeq2Seq(7, 9, d_model=16, n_heads=2, n_layers=2, seed=3, dtype=torch.float64)
    src = torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(0))
    caches = model.new_caches(model.encode(src))
    before = [tuple(t.clone() for t in caches[1].read(i)) for i in range(2)]
    tokens = torch.zeros(3, 1, dtype=torch.long)
    for _ in range(4):
        nxt = model.step(tokens[:, -1:], caches)[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], 1)
    for i in range(2):
        keys, values = caches[1].read(i)
        assert torch.equal(keys, before[i][0]) and torch.equal(values, before[i][1])
    assert caches[0].length == 4 and caches[1].length == 5



def test_the_pitfalls_hold():
    """Without the right shift the decoder learns to copy its input; a causal mask on the cross-attention hides
    source words from the first target positions."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the lesson: a short training is fastest on one thread
    try:
        _check_the_pitfalls()
    finally:
        torch.set_num_threads(threads)


def _check_the_pitfalls():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    word_of = torch.randperm(10, generator=gen) + 1
    model = TinySeq2Seq(10, 11, d_model=32, n_heads=4, n_layers=1, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        src = torch.randint(0, 10, (64, 6), generator=gen)
        tgt = word_of[src].flip(-1)
        loss = torch.nn.functional.cross_entropy(model.forward(src, tgt).flatten(0, 1), tgt.flatten())  # no shift
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    src = torch.randint(0, 10, (200, 6), generator=gen)
    assert loss.item() < 0.05  # it "learned": position t sees the word it must predict, and copies it
    assert float((model.generate(src, 6) == word_of[src].flip(-1)).all(-1).float().mean()) < 0.05  # and cannot write
    # the cross-attention needs no mask: a causal one would hide the later source words from target position 0
    trained = TinySeq2Seq(10, 11, d_model=16, n_heads=2, seed=1)
    with torch.no_grad():
        memory = trained.encode(src[:3])
        h = torch.randn(3, 6, 16)
        w = trained.decoder[0]
        free, a = att.multi_head_attention(h, memory, w["c_q"], w["c_k"], w["c_v"], w["c_o"], 2)
        masked, b = att.multi_head_attention(h, memory, w["c_q"], w["c_k"], w["c_v"], w["c_o"], 2, causal=True)
    assert (a[..., 0, 1:] > 0).all() and (b[..., 0, 1:] == 0).all() and (free - masked).abs().max() > 1e-2

# --------------------------------------------------------------------------- retrieval

@pytest.mark.cjk_font
def test_scaling_keeps_the_ranking_and_cosine_changes_it(chapter):
    dot, scaled, cosine, titles = chapter["dot"], chapter["scaled"], chapter["cosine"], chapter["titles"]
    top_k = chapter["top_k"]
    np.testing.assert_allclose(scaled, dot / 8.0)  # d = 64
    assert (top_k(dot, 8) == top_k(scaled, 8)).all()
    assert titles[top_k(dot, 1)[0]] == "连锁茶饮年报（长文）"
    assert {titles[i] for i in top_k(cosine, 3)} == {"咖啡为什么会苦", "手冲咖啡的水温", "咖啡豆的烘焙程度"}
    g = chapter["glued"]
    norms = np.linalg.norm(chapter["P"], axis=1)
    assert g["ch12_long_norm"] == pytest.approx(norms[6]) and norms[6] > 2.5 * norms[:3].max()
    assert g["ch12_long_cos"] < cosine[:3].min() - 0.3  # its direction is worse; its length wins the dot product
    assert chapter["same_rank"] and g["ch12_w_raw"] > 0.99 and g["ch12_w_div"] < 0.5


def test_dividing_by_a_positive_constant_never_reorders():
    rng = np.random.default_rng(1)
    for d in (4, 64, 1024):
        q, p = rng.normal(size=(200, d)), rng.normal(size=(30, d))
        raw = anp.attention_scores(q, p, scale=False)
        assert (np.argsort(-raw, axis=1) == np.argsort(-raw / np.sqrt(d), axis=1)).all()
        t = att.attention_scores(torch.from_numpy(q), torch.from_numpy(p), scale=True).numpy()
        assert (np.argsort(-raw, axis=1, kind="stable") == np.argsort(-t, axis=1, kind="stable")).all()


@pytest.mark.cjk_font
def test_the_figures_are_labelled_in_chinese_and_draw_without_warnings(chapter):
    for fig in (chapter["cross_fig"], chapter["enc_fig"], chapter["retrieval_fig"]):
        assert_draws_without_warnings(fig)
    cross_axes = [ax for ax in chapter["cross_fig"].axes if ax.get_title()]
    assert [ax.get_title() for ax in cross_axes] == ["头 1", "头 2", "头 3", "头 4", "4 个头的平均"]
    assert all(ax.get_xlabel() == "源句的词（键）" and ax.get_ylabel() == "译出的词（查询）" for ax in cross_axes)
    enc_axes = [ax for ax in chapter["enc_fig"].axes if ax.get_title()]
    assert len(enc_axes) == 4 and all("编码器" in ax.get_title() for ax in enc_axes)
    left, right = chapter["retrieval_fig"].axes
    assert "点积" in left.get_title() and "余弦" in right.get_title()


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_cross_attention_shape():
    model = TinySeq2Seq(10, 10, d_model=16, n_heads=4, seed=1)
    with torch.no_grad():
        memory = model.encode(torch.arange(8) % 10)
        _, w = model.decode(torch.arange(5), memory, need_weights=True)
    assert tuple(w["cross"][0].shape) == (4, 5, 8) and tuple(w["self"][0].shape) == (4, 5, 5)
    assert correct(questions(ASSIGNMENT)[0]) == ["$(4, 5, 8)$"]


def test_selfcheck_scaling_and_length():
    rng = np.random.default_rng(3)
    q, p = rng.normal(size=(1, 32)), rng.normal(size=(20, 32))
    p[0] = 3 * p[0] / np.linalg.norm(p[0]) + 2.5 * q[0] / np.linalg.norm(q[0])  # long, at a wider angle
    p[1:] /= np.linalg.norm(p[1:], axis=1, keepdims=True)
    p[1] = 0.9 * q[0] / np.linalg.norm(q[0]) + 0.1 * p[1]
    dot = anp.attention_scores(q, p, scale=False)[0]
    scaled = anp.attention_scores(q, p)[0]
    cosine = anp.cosine_scores(q, p)[0]
    assert (np.argsort(-dot) == np.argsort(-scaled)).all()  # question 2: A
    assert np.argmax(dot) == 0 and np.argmax(cosine) == 1  # question 3: B
    assert correct(questions(ASSIGNMENT)[1])[0].startswith("名次不变")
    assert correct(questions(ASSIGNMENT)[2])[0].startswith("点积下它可能排第一")


def test_selfcheck_what_is_computed_once():
    model = TinySeq2Seq(6, 6, d_model=8, n_heads=2, seed=2)
    memory = model.encode(torch.arange(4))
    self_cache, cross_cache = model.new_caches(memory)
    lengths = []
    for t in range(3):
        model.step(torch.tensor([t]), (self_cache, cross_cache))
        lengths.append((self_cache.length, cross_cache.length))
    assert lengths == [(1, 4), (2, 4), (3, 4)]  # the self-attention cache grows, the cross one does not
    assert correct(questions(ASSIGNMENT)[3]) == ["编码器的输出（记忆）", "交叉注意力的键和值 $MW_K$、$MW_V$"]


# --------------------------------------------------------------------------- the assignment

DELEGATING_RETRIEVE = '''
def retrieve(query, passages, k, score="dot"):
    if score == "cosine":
        s = anp.cosine_scores(np.asarray(query, dtype=float)[None], passages)[0]
    else:
        s = anp.attention_scores(np.asarray(query, dtype=float)[None], passages, scale=score == "scaled")[0]
    return np.argsort(-s, kind="stable")[:k]
'''

DELEGATING_DECODE = '''
def greedy_decode(model, source, n_new):
    memory = model.encode(source)
    cache = anp.KVCache(1, 1, memory.shape[-1])
    k_mem, v_mem = memory @ model.c_k, memory @ model.c_v
    tokens = [model.bos]
    for t in range(n_new):
        x = model.embed([tokens[-1]], t)
        q, k, v = x @ model.w_q, x @ model.w_k, x @ model.w_v
        a = anp.cached_attention(q[None], k[None], v[None], cache, 0)[0]
        y = x + a @ model.w_o
        c, _ = anp.scaled_dot_product_attention((y @ model.c_q), k_mem, v_mem)
        y = y + c @ model.c_o
        tokens.append(int(np.argmax(model.read_out(y)[-1])))
    return np.array(tokens[1:])
'''

NOISY_ALIGNMENT = '''
import sys
import warnings


def read_alignment(weights):
    print("调试：", np.shape(weights), file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    w = np.asarray(weights, dtype=float)
    return w.mean(axis=-3).argmax(axis=-1)
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "cosine_query_only", "alignment_over_targets", "position_from_zero")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib behind the student's names: the reference functions and the reference cache score 0
        "delegating": assignments.with_cells(source, {"retrieve": DELEGATING_RETRIEVE,
                                                      "greedy_decode": DELEGATING_DECODE}),
        "mixed": assignments.with_cells(source, mixed),
        # a right answer that prints to stderr and warns
        "noisy": assignments.with_cells(source, {"read_alignment": NOISY_ALIGNMENT}),
    }, {
        "delegating": [0, 2, 0],
        # each misses its exercise's point, so a failed essential check caps its cell at a third:
        # cosine by the query's length only: 15 of the 20 retrieval checks pass (dot, scaled, ties, errors), capped;
        # argmax over the targets: 5 of 10 (the square maps and the errors), capped; positions from 0: only the
        # empty decoding, 1 of 16 (the cache-use checks count only when the outputs are right)
        "mixed": [2 / 3, 2 / 3, 4 * 1 / 16],
        "noisy": [2, 2, 4],
    })  # 8 autograded + the written answer (2, by hand)



@pytest.mark.grading
def test_a_slice_one_short_is_told_so_and_not_about_cosine():
    """retrieve(...)[:k - 1] returns one passage too few: every ranking check that names a mistake names this one
    (the old fallback hint of the cosine check told it that cosine divides by both lengths)."""
    from nbrun import execute, read_kept, source_notebook

    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "top_k_minus_one.py")
    for hidden in (False, True):
        _, out = execute(source_notebook(ASSIGNMENT), replace=kept.cells, hidden=hidden)
        printed = out["test_retrieve"]
        hints = [line for line in printed.splitlines() if "提示" in line]
        assert len(hints) >= 4 and all("只返回了前 k − 1" in line for line in hints), printed
        assert "除以两个向量的长度" not in printed and "‖p_i‖" not in printed, printed
