"""Chapter 11 (KV 缓存与自回归生成): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: cached decoding equals recomputation, the counts follow their formulas, the
measured times keep the gaps the prose states (with margins far below what is measured), and the memory
figures follow the formula. The self-check's facts are checked with attnlib, and the assignment is generated,
submitted and autograded by nbgrader.
"""

from __future__ import annotations

import assignments
import numpy as np
import pytest
import torch
import yaml
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section
from torch.utils.flop_counter import FlopCounterMode

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.torch.decoder import TinyDecoder

ASSIGNMENT = "ch11-kv-cache"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    opening = body[:body.index("## 一次生成一个词元")]
    assert "{doc}`ch08-masks`" in opening and "右下角" in opening  # opens from chapter 8's alignment
    for term in ("词元（token）", "查询（query）", "键（key）", "值（value）", "KV 缓存（KV cache）", "掩码（mask）"):
        assert term in opening, term
    assert body.count("一种常见的说法是") >= 2  # two claims quoted, then corrected by the code
    assert "没有训练" in body  # the model's weights are random, and the page says so


def test_chapter_10_is_linked_once_it_is_in_the_book_and_named_otherwise():
    """A {doc} link to a page missing from _toc.yml breaks the -W build (only the toc's pages are built)."""
    opening = prose(CHAPTER)[:200]
    if "file: book/ch10-efficiency" in (ROOT / "_toc.yml").read_text(encoding="utf-8"):
        assert "{doc}`ch10-efficiency`" in opening
    else:
        assert "第 10 章「复杂度与优化」" in opening
        assert "{doc}`ch10-efficiency`" not in CHAPTER.read_text(encoding="utf-8")


def test_the_toc_lists_this_chapter_after_chapter_10():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第三部分 效率与推理")
    files = [c["file"] for c in part["chapters"]]
    assert {"file": "book/ch11-kv-cache", "title": "11. KV 缓存与自回归生成"} in part["chapters"]
    if "book/ch10-efficiency" in files:
        assert files.index("book/ch10-efficiency") < files.index("book/ch11-kv-cache")
    captions = [p["caption"] for p in toc["parts"]]
    assert captions.index("第二部分 完整的注意力") < captions.index("第三部分 效率与推理")


def test_the_roadmap_and_the_interview_chapter_link_here():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    line = next(line for line in intro.splitlines() if line.startswith("- **第三部分 效率与推理**"))
    assert "{doc}`ch11-kv-cache`" in line
    assert "11 章还在编写" not in (ROOT / "book" / "ch14-interview.md").read_text(encoding="utf-8")


def test_the_measurement_is_described_as_it_is_done():
    """What the prose says about the runs (threads, repeats, lengths) is what the cells do."""
    measured = section(prose(CHAPTER), "测量：缓存省下了什么")
    source = _source()
    assert "torch.set_num_threads(1)" in measured and "torch.set_num_threads(1)" in source
    assert "生成 512 个词元" in measured and "generation(512, use_cache=True, repeats=3)" in source
    assert "256 个词元（跑 1 遍" in measured and "generation(256, use_cache=False, repeats=1)" in source
    assert "9 个步数" in measured and "3 次中最快" in measured and "def best_time(f, repeats=3)" in source
    assert "构建本书的这台机器" in measured and "GPU" not in prose(CHAPTER)
    assert "optim" not in source and "backward" not in source  # nothing is trained


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_the_model_is_the_stated_size(chapter):
    model = chapter["model"]
    assert (model.n_layers, model.d_model, model.n_heads, model.d_head, model.d_mlp, model.vocab_size) == (
        2, 128, 4, 32, 512, 256)
    d, m, vocab = 128, 512, 256
    assert chapter["glued"]["ch11_params"] == vocab * d + 2 * (4 * d * d + 2 * d * m) + d * vocab
    assert model.dtype == torch.float32 and chapter["prompt"].shape == (16,)


@pytest.mark.cjk_font
def test_earlier_keys_and_values_stay_in_a_decoder_and_change_in_an_encoder(chapter):
    assert len(chapter["seq"]) == 24 and chapter["t"] == 23
    change = chapter["change"]
    assert change[True][0] == 0 and change[True][1] < 1e-5  # "完全相同" / rounding only
    assert change[False][0] == 0 and change[False][1] > 0.1  # the encoder's second layer moves


@pytest.mark.cjk_font
def test_appending_the_new_key_and_value_is_not_optional(chapter):
    assert chapter["gap_old"] > 0.1 and chapter["gap_new"] < 1e-5
    assert chapter["q"].shape == (4, 9, 32)  # "4 个头，前 8 个位置已经缓存，第 9 个是新的"


@pytest.mark.cjk_font
def test_cached_decoding_equals_recomputation(chapter):
    worst, size = chapter["glued"]["ch11_step_gap"], chapter["glued"]["ch11_logit_size"]
    assert worst < 1e-4 and size > 1 and worst < size * 1e-4  # rounding, not a difference
    assert chapter["chunk_gap"] < 1e-4 and chapter["turn"].shape == (5,)
    assert "range(64)" in _source()
    assert torch.equal(chapter["tokens_c"][:len(chapter["tokens_r"])], chapter["tokens_r"])
    assert len(chapter["tokens_r"]) == 16 + 256 and len(chapter["tokens_c"]) == 16 + 512
    assert chapter["same_logits"] < 1e-4


@pytest.mark.cjk_font
def test_scores_follow_their_formulas(chapter):
    L, H, prefix = chapter["L"], chapter["H"], chapter["prefix"]
    assert (L, H) == (2, 4) and prefix[0] == 16 and prefix[-1] == 527
    scores_c, scores_r = chapter["scores_c"], chapter["scores_r"]
    assert scores_c[0] == L * H * 16 * 16 and (scores_c[1:] == L * H * prefix[1:]).all()  # ∝ p
    assert (scores_r == L * H * prefix[:256] ** 2).all()  # ∝ p²
    n = 527  # the table's totals: about n²/2 with the cache, n³/3 recomputing
    assert abs(scores_c.sum() / (L * H) / (n**2 / 2) - 1) < 0.02
    assert abs((prefix.astype(float) ** 2).sum() / (n**3 / 3) - 1) < 0.02


@pytest.mark.cjk_font
def test_the_measured_times_keep_the_gaps_the_prose_states(chapter):
    """Margins far below the measured gaps (about 5x at 256 tokens, 15-20x per step at step 512 here)."""
    g = chapter["glued"]
    sec_c, sec_r, sampled = chapter["sec_c"], chapter["sec_r"], chapter["sampled"]
    assert len(sec_c) == 512 and len(sec_r) == 256
    assert list(chapter["steps"]) == [2, 64, 128, 192, 256, 320, 384, 448, 512]  # "9 个步数……测到第 512 步"
    assert g["ch11_speedup_256"] > 2  # recomputing 256 tokens is several times slower
    assert g["ch11_ratio_512"] > 4 and g["ch11_ratio_512"] > 2 * g["ch11_ratio_2"]  # "差距随前缀变长而增大"
    assert 0.4 < g["ch11_cached_last_ms"] / g["ch11_cached_first_ms"] < 2.5  # "几乎不变"
    cum = np.cumsum(sec_c)
    assert 1.5 < cum[-1] / cum[255] < 3  # "几乎是一条直线": twice the tokens, about twice the time
    assert np.median(sec_r[-16:]) > 2 * np.median(sec_r[1:17])  # "越来越陡"
    assert sampled[-1] > 3 * sampled[0]
    assert g["ch11_cached_total"] == pytest.approx(sec_c.sum()) and g["ch11_recompute_256"] == pytest.approx(
        sec_r.sum())


@pytest.mark.cjk_font
def test_a_cached_step_multiplies_for_one_token(chapter):
    """The glued count is what torch's FlopCounterMode counts: per token with the cache, p times that without."""
    model, tokens, per_token = chapter["model"], chapter["tokens_c"], chapter["per_token"]
    d, m, vocab = 128, 512, 256
    assert per_token == 2 * (3 * d * d + d * d + 2 * d * m) + d * vocab == 425_984

    def multiply_adds(f):
        with FlopCounterMode(display=False) as counter:
            f()
        return counter.get_total_flops() // 2  # matrix products only: the CPU's fused attention is not counted

    for p in (100, 400):
        cache = model.new_cache(capacity=512)
        model.step(tokens[:p], cache)
        assert multiply_adds(lambda p=p, cache=cache: model.step(tokens[p:p + 1], cache)) == per_token
        assert multiply_adds(lambda p=p: model.forward(tokens[:p + 1])) == (p + 1) * per_token


@pytest.mark.cjk_font
def test_memory_is_the_formula(chapter):
    g = chapter["glued"]
    assert chapter["small"].nbytes == 3 * 2 * 10 * 4 * 8 * 2 * 2
    assert g["ch11_ours_bytes"] == 2 * 2 * 527 * 4 * 32 * 4  # 16 prompt tokens + 511 fed back
    assert g["ch11_per_token_mib"] == 0.5 and g["ch11_one_gib"] == 2 and g["ch11_eight_gib"] == 16
    assert g["ch11_weights_gib"] == pytest.approx(12 * 32 * 4096**2 * 2 / 2**30)
    assert round(g["ch11_weights_gib"], 1) == 12
    assert g["ch11_cross_tokens"] == 3072  # batch 8: the cache outgrows the weights beyond this length
    assert 8 * 3072 * 2 * 32 * 32 * 128 * 2 == 12 * 32 * 4096**2 * 2
    # the model's own cache grew by one token's keys and values per step
    steps = np.diff(chapter["bytes_c"])
    assert (steps == 2 * 2 * 4 * 32 * 4).all()


def test_without_a_cache_nothing_is_kept_between_steps():
    model = TinyDecoder(vocab_size=11, d_model=8, n_heads=2, n_layers=2)
    before = {k: v for k, v in vars(model).items() if k not in ("score_count", "_table")}
    model.forward(torch.arange(10) % 11)
    after = {k: v for k, v in vars(model).items() if k not in ("score_count", "_table")}
    assert before.keys() == after.keys() and all(after[k] is before[k] for k in before)


@pytest.mark.cjk_font
def test_the_pitfalls_hold(chapter):
    model, seq = chapter["model"], chapter["seq"]
    # the new token's position is cache.length, not 0
    cache = model.new_cache()
    model.step(seq[:20], cache)
    assert (model.step(seq[20:21], cache) - model.step(seq[20:21], model.new_cache())).abs().max() > 1e-3
    # a cache only holds for the same prefix: changing token 5 changes every later key, none before it
    edited = seq.clone()
    edited[5] = (edited[5] + 1) % model.vocab_size
    for (k, _), (k2, _) in zip(model.keys_values(seq), model.keys_values(edited), strict=True):
        assert (k[..., :5, :] - k2[..., :5, :]).abs().max() < 1e-5
        assert (k[..., 5, :] - k2[..., 5, :]).abs().max() > 1e-3
    # attnlib's cache doubles its room: appending 1000 tokens one by one grows it a few times, not 1000 times
    growing = att.KVCache(1, 1, 1, capacity=1)
    grows = []
    real = growing._grow
    growing._grow = lambda *a: grows.append(a[-1]) or real(*a)
    for _ in range(1000):
        growing.append(0, torch.ones(1, 1, 1), torch.ones(1, 1, 1))
    assert len(grows) <= 11


@pytest.mark.cjk_font
def test_the_figures_are_labelled_in_chinese_and_draw_without_warnings(chapter):
    for fig in (chapter["timing_fig"], chapter["count_fig"], chapter["memory_fig"]):
        assert_draws_without_warnings(fig)
    left, right = chapter["timing_fig"].axes
    assert "本机测得" in left.get_title() and "本机测得" in right.get_title()
    for ax in (left, right):
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["使用 KV 缓存", "每步重算整个前缀"]
    assert len(left.lines[1].get_xdata()) == 256  # the recompute curve stops at 256, as the prose says
    assert right.get_yscale() == "log" and list(right.lines[1].get_xdata()) == list(chapter["steps"])
    (count,) = chapter["count_fig"].axes
    assert "计数" in count.get_title() and count.get_yscale() == "log"
    memory = chapter["memory_fig"].axes[0]
    assert "GiB" in memory.get_ylabel() and [t.get_text() for t in memory.get_legend().get_texts()] == [
        "KV 缓存，批量 1", "KV 缓存，批量 8", "各层权重"]


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_memory():
    def kv(layers, heads, d_head, tokens, bytes_per, batch=1):
        return layers * 2 * tokens * heads * d_head * bytes_per * batch

    cache = anp.KVCache(24, 16, 64)  # the formula is what a real cache holds (a shorter one, same shape)
    x = np.zeros((16, 8, 64), dtype=np.float16)
    for layer in range(24):
        cache.append(layer, x, x)
    assert cache.nbytes == kv(24, 16, 64, 8, 2)
    right = kv(24, 16, 64, 2048, 2)
    assert right == 201_326_592 == 192 * 2**20
    texts = [o["text"] for o in questions(ASSIGNMENT)[0]["options"]]
    assert texts == ["96 MiB", "192 MiB", "384 MiB", "3 GiB"]
    assert right // 2 == 96 * 2**20 and 2 * right == 384 * 2**20 and 16 * right == 3 * 2**30  # the slips


def test_selfcheck_what_a_step_does():
    model = TinyDecoder(vocab_size=31, d_model=16, n_heads=2, n_layers=2)
    seq = torch.arange(12) % 31
    cache = model.new_cache()
    model.step(seq[:11], cache)
    old = [tuple(t.clone() for t in cache.read(layer)) for layer in range(2)]
    model.score_count = 0
    with FlopCounterMode(display=False) as counter:
        model.step(seq[11:], cache)
    assert model.score_count == 2 * 2 * 12  # t + 1 keys, its own included (C)
    one_token = 2 * (16 * 48 + 16 * 16 + 2 * 16 * 64) + 16 * 31
    assert counter.get_total_flops() // 2 == one_token  # projections and MLP for one token only (not D)
    for layer in range(2):
        k, v = cache.read(layer)
        assert torch.equal(k[..., :11, :], old[layer][0]) and torch.equal(v[..., :11, :], old[layer][1])  # not B
        assert k.shape[-2] == 12  # its own key was appended (A)
    assert len(correct(questions(ASSIGNMENT)[1])) == 2


def test_selfcheck_why_an_encoder_cannot_cache():
    model = TinyDecoder(vocab_size=31, d_model=16, n_heads=2, n_layers=2, dtype=torch.float64)
    seq = torch.arange(9) % 31
    short, longer = model.keys_values(seq[:8], causal=False), model.keys_values(seq, causal=False)
    assert torch.equal(longer[0][0][..., :8, :], short[0][0])  # C is wrong: layer 1 does not change
    assert (longer[1][0][..., :8, :] - short[1][0]).abs().max() > 1e-3  # D
    assert correct(questions(ASSIGNMENT)[2])[0].startswith("从第 2 层起")


def test_selfcheck_what_grows():
    model = TinyDecoder(vocab_size=31, d_model=16, n_heads=2, n_layers=2)
    weights = [w.clone() for layer in model.layers for w in layer.values()]
    cache = model.new_cache()
    seq = torch.arange(30) % 31
    model.step(seq[:5], cache)
    nbytes, scores = [], []
    for i in range(5, 30):
        model.score_count = 0
        model.step(seq[i:i + 1], cache)
        nbytes.append(cache.nbytes)
        scores.append(model.score_count)
    assert len(set(np.diff(nbytes))) == 1 and len(set(np.diff(scores))) == 1  # both linear (A)
    assert all(torch.equal(a, b) for a, b in zip(weights, (w for layer in model.layers for w in layer.values()),
                                                 strict=True))
    assert correct(questions(ASSIGNMENT)[3])[0].startswith("缓存的字节数和每一步的注意力分数都线性增长")


# --------------------------------------------------------------------------- the assignment

NOISY_BYTES = '''
import sys
import warnings


def kv_cache_bytes(n_layers, n_heads, d_head, n_tokens, dtype, batch=1):
    print("调试：dtype =", dtype, file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    return 2 * n_layers * n_tokens * n_heads * d_head * np.dtype(dtype).itemsize * batch
'''

DELEGATING_CACHE = '''
class KVCache(anp.KVCache):
    """attnlib's cache under the student's name."""
'''

DELEGATING_STEP = '''
def cached_attention_step(q, k, v, cache, layer):
    keys, values = cache.append(layer, k, v)
    return anp.scaled_dot_product_attention(q, keys, values, causal=True)[0]
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "values_not_appended", "no_causal_mask", "bytes_without_batch")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib behind the student's names: the subclass and the reference attention score 0
        "delegating": assignments.with_cells(source, {"kv_cache": DELEGATING_CACHE,
                                                      "cached_attention_step": DELEGATING_STEP}),
        "mixed": assignments.with_cells(source, mixed),
        # a right formula that prints to stderr and warns
        "noisy": assignments.with_cells(source, {"kv_cache_bytes": NOISY_BYTES}),
    }, {
        "delegating": [0, 0, 2],
        # each misses its exercise's point, so a failed essential check caps its cell at a third:
        # values replaced instead of appended: 27 of the 32 cache checks pass (the keys, lengths, validation do),
        # capped at 1; no causal mask: right only where one position arrives at a time (3 of 10, under the cap);
        # no batch: 5 of 10, capped at 2/3
        "mixed": [3 / 3, 3 * 3 / 10, 2 / 3],
        "noisy": [3, 3, 2],
    })  # 8 autograded + the written answer (2, by hand)


@pytest.mark.grading
def test_the_bytes_checks_name_only_the_factor_that_is_missing():
    """In the textbook numbers (32 layers, 32 heads, float16) a dropped item size halves the answer as a dropped
    factor 2 does, and a dropped head count divides it by 32 as a dropped layer count does: those checks report the
    numbers and name nothing, and the check whose factors all differ names the one that is missing."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    told = {"bytes_without_itemsize": "没有乘每个数的字节数", "bytes_without_heads": "少了头数",
            "bytes_without_factor_2": "少了因子 2", "bytes_without_batch": "没有乘批量"}
    for name, words in told.items():
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        _, out = execute(nb, replace=kept.cells, hidden=False)
        printed = out["test_kv_cache_bytes"]
        hints = [line for line in printed.splitlines() if "提示" in line]
        assert hints and all(words in line for line in hints), printed
        assert all(other not in printed for other in [*told.values(), "少了层数"] if other != words), printed


@pytest.mark.grading
def test_reading_past_the_last_layer_is_checked():
    """read(n_layers) must raise ValueError: an off-by-one range check (<= n_layers) reaches the list and raises
    IndexError, which the hidden tests now catch."""
    from nbrun import execute, read_kept, source_notebook

    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "read_off_by_one.py")
    scores, out = execute(source_notebook(ASSIGNMENT), replace=kept.cells)
    assert scores["test_kv_cache"] < 3
    assert "read(3)" in out["test_kv_cache"] and "实际抛出的是 IndexError" in out["test_kv_cache"]
