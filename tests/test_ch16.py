"""Chapter 16 (多查询与分组查询注意力): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: grouped-query attention equals torch's ``enable_gqa=True``, repeated key/value
heads and (h_kv = h) multi-head attention, and each group's query heads folded into rows give the same scores;
the cache and the parameters shrink to exactly h_kv / h; a decoding step with fewer key/value heads computes
as many scores and, measured here, takes less time, with its sentences picked by the measured ratios (the step,
torch's fused kernel and reading the cache once, side by side); mean-pooling heads into groups changes the
output more for larger groups and less alike heads, whose correlation is c².  The written question's model
answer says what a decoding step's time follows (reading K and V), not that it stays constant.  The
self-check's facts are checked with attnlib, and the assignment is generated, submitted and autograded by
nbgrader.
"""

from __future__ import annotations

import assignments
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp
from attnlib import torch as att

ASSIGNMENT = "ch16-gqa"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapters_9_and_11_and_names_what_it_cannot_measure():
    body = prose(CHAPTER)
    opening = body[:body.index("## 几个查询头共用一组键和值")]
    assert "{doc}`ch11-kv-cache`" in opening and "{doc}`ch09-multihead`" in opening
    for term in ("多查询注意力（multi-query attention）", "分组查询注意力（grouped-query attention）"):
        assert term in opening, term
    assert body.count("一种常见的说法是") >= 1
    cost = section(body, "分组的代价")
    assert "Ainslie" in cost and "2023" in cost and "复现不了" in cost  # the paper's step is quoted, not measured
    assert "T5 模型" in cost and "编码器" in cost  # where the paper compared mean, first head and random init
    assert "{doc}`ch11-kv-cache`" in section(body, "缓存小了多少")


def test_the_toc_lists_this_chapter_in_part_5_after_chapter_15():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第五部分 进阶")
    files = [c["file"] for c in part["chapters"]]
    assert {"file": "book/ch16-gqa", "title": "16. 多查询与分组查询注意力（MQA/GQA）"} in part["chapters"]
    if "book/ch15-positions" in files:
        assert files.index("book/ch15-positions") < files.index("book/ch16-gqa")
    captions = [p["caption"] for p in toc["parts"]]
    assert captions.index("第四部分 应用与复盘") < captions.index("第五部分 进阶") < captions.index("附录")


def test_the_measurement_is_described_as_it_is_done():
    measured = section(prose(CHAPTER), "每一步解码快了多少")
    source = _source()
    assert "torch.set_num_threads(1)" in source and "一个 CPU 线程" in measured
    assert "构建本书的这台机器" in measured and "这台机器的数字" in measured and "GPU" not in prose(CHAPTER)
    assert "连续解码 15 步" in measured and "repeats=15" in source and "tokens=4096" in source
    assert "optim" not in source and "backward" not in source  # nothing is trained


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_grouped_attention_equals_torch_repeated_heads_and_mha(chapter):
    assert (chapter["h"], chapter["h_kv"], chapter["g"]) == (8, 2, 4)
    assert max(chapter["gap_torch"], chapter["gap_repeat"], chapter["gap_mha"]) < 1e-12
    assert chapter["out"].shape == (8, 6, 4) and chapter["w"].shape == (8, 6, 6)  # one row of weights per query head
    q, k, v = (torch.tensor(chapter[n]) for n in ("q", "k", "v"))
    interleaved = F.scaled_dot_product_attention(q, k.repeat(4, 1, 1), v.repeat(4, 1, 1), attn_mask=att.causal_mask(6))
    assert np.abs(interleaved.numpy() - chapter["out"]).max() > 1e-3  # the pitfall: i % h_kv is another model


@pytest.mark.cjk_font
def test_the_groups_figure_draws_the_three_cases(chapter):
    fig = chapter["groups_fig"]
    assert_draws_without_warnings(fig)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["多头注意力：h = 8，h_kv = 8", "分组查询注意力：h = 8，h_kv = 2", "多查询注意力：h = 8，h_kv = 1"]
    assert [len(ax.lines) for ax in fig.axes] == [8, 8, 8]  # a line from every query head


@pytest.mark.cjk_font
def test_the_keys_and_values_are_shared_not_copied(chapter):
    """The g query heads of a group are the g·n_q rows of one product against their key/value head, as it is."""
    assert np.shares_memory(chapter["q_rows"], chapter["q"]) and chapter["q_rows"].shape == (2, 4 * 6, 4)
    assert chapter["scores"].shape == (2, 24, 6)
    weights = anp.softmax(chapter["scores"].reshape(8, 6, 6), axis=-1)
    np.testing.assert_allclose(weights, anp.grouped_query_attention(chapter["q"], chapter["k"], chapter["v"])[1])


@pytest.mark.cjk_font
def test_the_cache_shrinks_to_h_kv_over_h(chapter):
    g = chapter["glued"]
    assert chapter["small"].nbytes == g["ch16_small_bytes"] == 3 * 2 * 10 * 2 * 16 * 2 * 4
    assert (g["ch16_gib_32"], g["ch16_gib_8"], g["ch16_gib_1"]) == (16, 4, 0.5)
    cache = att.KVCache(32, 32, 128, n_kv_heads=8)  # the formula is what a real cache holds (one token, one layer)
    x = torch.zeros(8, 8, 1, 128, dtype=torch.float16)
    cache.append(0, x, x)
    assert cache.nbytes * 4096 * 32 == g["ch16_gib_8"] * 2**30
    memory = chapter["memory_fig"].axes[0]
    assert_draws_without_warnings(chapter["memory_fig"])
    assert [t.get_text() for t in memory.get_legend().get_texts()] == ["h_kv = 32", "h_kv = 8", "h_kv = 1"]
    assert "GiB" in memory.get_ylabel()


@pytest.mark.cjk_font
def test_the_parameters_saved(chapter):
    g = chapter["glued"]
    assert g["ch16_params_saved"] == 32 * 2 * 4096 * (32 - 8) * 128 == 805_306_368
    assert g["ch16_params_share"] == 0.375 and g["ch16_params_of_all"] == 0.125


@pytest.mark.cjk_font
def test_a_decoding_step_computes_as_many_scores_and_its_time_follows_the_cache(chapter):
    """Margins far below what is measured (in runs here 3-8x for 8 key/value heads and 7-17x for 1; the fused
    kernel 1.2-3.4x and 1.1-2x); the sentences are the ones the measured ratios pick."""
    step, g = chapter["step"], chapter["glued"]
    assert {count for _, count in step.values()} == {32 * 4096}
    assert step[1][0]["step"] < step[8][0]["step"] < step[32][0]["step"]  # fewer bytes to read, less time
    assert g["ch16_speed_1"] > 2 and chapter["speed_8"] > 1.5
    for kv in (32, 8, 1):
        t = step[kv][0]
        assert g[f"ch16_step_ms_{kv}"] == pytest.approx(t["step"] * 1e3)
        assert g[f"ch16_step_floor_{kv}"] == pytest.approx(t["step"] / t["read"])
        assert g[f"ch16_fused_floor_{kv}"] == pytest.approx(t["fused"] / t["read"])
    speed_8, fused_8 = chapter["speed_8"], chapter["fused_8"]
    assert g["ch16_step_sentence"] == chapter["faster"].pick(speed_8)
    assert g["ch16_cause_sentence"] == chapter["cause"].pick(chapter["follows_bytes"])
    assert g["ch16_step_summary"] == chapter["in_summary"].pick(chapter["follows_bytes"])
    assert g["ch16_kernel_summary"] == chapter["kernel_summary"].pick((speed_8, fused_8))
    assert chapter["follows_bytes"] == (speed_8 >= 3 and g["ch16_speed_1"] > speed_8)


def test_the_page_no_longer_says_the_step_time_stays():
    """The old claim: scores, softmax and the weighted sum "它们的用时不会随 h_kv 减少", so MQA is barely faster."""
    body = prose(CHAPTER)
    measured = section(body, "每一步解码快了多少")
    assert "用时不会随" not in body and "也只快了上面那么多" not in body
    assert "一种常见的说法" in measured and "enable_gqa=True" in measured and "读一遍" in measured
    assert "本书不下结论" in measured  # why the kernel is slow is not isolated, so not named
    assert "F.scaled_dot_product_attention(" in _source() and "keys.sum(), values.sum()" in _source()


def test_the_written_answer_follows_the_measurement():
    """Question 4 (1) no longer asks why the step is slow; its model answer says the time follows reading K and V."""
    from nbrun import grade_id, source_notebook

    cells = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}
    question, answer = cells["ex4_text"], cells["written_gqa"]
    assert "不到缓存缩小的 4 倍" not in question and "用时主要由什么决定" in question
    first = answer[answer.index("（1）"):answer.index("（2）")]
    assert "减得比缓存慢" not in first and "不随 $h_{kv}$ 减少" in first  # the scores stay, the time does not
    assert "读的键和值" in first and "随 $h_{kv}$ 一起减少" in first and "读一遍" in first
    assert "这个核的实现" in first  # the fused kernel's figure is the kernel's, not GQA's


@pytest.mark.cjk_font
def test_pooling_changes_the_output_more_for_larger_groups_and_less_alike_heads(chapter):
    errors = chapter["errors"]
    assert sorted(errors) == [0.0, 0.7, 0.95]
    for e in errors.values():
        assert e[0] < 1e-12 and e[1] < e[2] < e[3]
    assert errors[0.95][3] < errors[0.7][3] < errors[0.0][3]
    assert chapter["glued"]["ch16_pool_err_alike"] > 0.1  # "也远不是 0"
    corr = chapter["glued"]["ch16_head_corr"]  # two heads of heads_alike(0.7): correlation c² = 0.49, not c
    assert abs(corr - 0.49) < 0.05 and "相关系数是 $c^2$" in prose(CHAPTER)
    assert chapter["glued"]["ch16_along_tokens_causal"] > 0.1 and "不加掩码时这样做结果碰巧不变" in prose(CHAPTER)
    # identical heads in a group: pooling changes nothing (the other end of the similarity scale)
    w_k, w_v = chapter["heads_alike"](1.0)
    assert np.allclose(chapter["pool"](w_k, 2), w_k[:, :32])


def test_the_pitfalls_hold():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(4, 3, 5))
    k, v = rng.normal(size=(2, 1, 6, 5))
    mqa, _ = anp.grouped_query_attention(q, k, v)
    along_tokens, _ = anp.scaled_dot_product_attention(q, np.repeat(k, 4, axis=-2), np.repeat(v, 4, axis=-2))
    assert np.allclose(along_tokens, mqa)  # h_kv = 1, no mask: repeating along the tokens gives the same output
    mqa, _ = anp.grouped_query_attention(q, k, v, causal=True)
    along_tokens, _ = anp.scaled_dot_product_attention(q, np.repeat(k, 4, axis=-2), np.repeat(v, 4, axis=-2),
                                                       causal=True)
    assert np.abs(along_tokens - mqa).max() > 0.1  # with the causal mask it does not
    k2, v2 = rng.normal(size=(2, 2, 6, 5))
    with pytest.raises(ValueError):  # otherwise the heads no longer match
        anp.scaled_dot_product_attention(q, np.repeat(k2, 2, axis=-2), np.repeat(v2, 2, axis=-2))


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_which_head():
    q = np.zeros((12, 1, 2))
    k = np.zeros((4, 3, 2))
    v = np.arange(4, dtype=float)[:, None, None] * np.ones((4, 3, 1))  # value = its head's number
    out, _ = anp.grouped_query_attention(q, k, v)
    assert out[5, 0, 0] == 1
    assert [o["text"] for o in questions(ASSIGNMENT)[0]["options"] if o.get("correct")] == ["键值头 1"]


def test_selfcheck_memory():
    cache = anp.KVCache(40, 40, 128, n_kv_heads=8)
    x = np.zeros((8, 1, 128), dtype=np.float16)
    for layer in range(40):
        cache.append(layer, x, x)
    right = cache.nbytes * 8192
    assert right == 1.25 * 2**30
    assert right * 5 == 6.25 * 2**30 and right / 2 == 0.625 * 2**30 and right * 2 == 2.5 * 2**30  # the slips
    assert correct(questions(ASSIGNMENT)[1]) == ["1.25 GiB"]


def test_selfcheck_what_changes():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(8, 1, 4))
    k, v = rng.normal(size=(2, 2, 9, 4))
    _, w = anp.grouped_query_attention(q, k, v)
    assert w.size == 8 * 9  # B is wrong: h x n scores
    assert len(correct(questions(ASSIGNMENT)[2])) == 2


def test_selfcheck_repeat():
    rng = np.random.default_rng(2)
    q = rng.normal(size=(6, 2, 4))
    k, v = rng.normal(size=(2, 3, 5, 4))
    want, _ = anp.grouped_query_attention(q, k, v)
    right, _ = anp.scaled_dot_product_attention(q, np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0))
    tiled, _ = anp.scaled_dot_product_attention(q, np.tile(k, (2, 1, 1)), np.tile(v, (2, 1, 1)))
    assert np.allclose(right, want) and not np.allclose(tiled, want)
    assert torch.equal(torch.tensor(k).repeat_interleave(2, dim=0), torch.tensor(np.repeat(k, 2, axis=0)))
    assert correct(questions(ASSIGNMENT)[3]) == ["`np.repeat(k, g, axis=0)`"]


# --------------------------------------------------------------------------- the assignment

DELEGATING = '''
def grouped_query_attention(q, k, v):
    return anp.grouped_query_attention(q, k, v)[0]
'''

TORCH_KERNEL = '''
import torch
import torch.nn.functional as F


def grouped_query_attention(q, k, v):
    t = [torch.as_tensor(x) for x in (q, k, v)]
    if t[0].shape[-3] % t[1].shape[-3] or t[1].shape[-3] != t[2].shape[-3]:
        raise ValueError("头数不对")
    return F.scaled_dot_product_attention(*t, enable_gqa=True).numpy()
'''

NOISY_BYTES = '''
import sys
import warnings


def gqa_cache_bytes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, dtype, batch=1):
    print("调试：n_kv_heads =", n_kv_heads, file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    if n_heads % n_kv_heads:
        raise ValueError("n_kv_heads 必须整除 n_heads")
    return 2 * n_layers * n_tokens * n_kv_heads * d_head * np.dtype(dtype).itemsize * batch
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "interleaved_groups", "bytes_with_query_heads", "pool_sum")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's function behind the student's name scores 0; torch's fused kernel keeps only the error checks
        "delegating": assignments.with_cells(source, {"grouped_query_attention": DELEGATING}),
        "torch": assignments.with_cells(source, {"grouped_query_attention": TORCH_KERNEL}),
        "mixed": assignments.with_cells(source, mixed),
        "noisy": assignments.with_cells(source, {"gqa_cache_bytes": NOISY_BYTES}),
    }, {
        "delegating": [0, 2, 3],
        "torch": [3 * 2 / 10, 2, 3],
        # each misses its exercise's point, so a failed essential check caps its cell at a third
        "mixed": [1, 2 / 3, 1],
        "noisy": [3, 2, 3],
    })  # 8 autograded + the written answer (2, by hand)


def test_the_batch_check_names_only_what_the_function_did():
    """Interleaved groups (np.tile) give the right shape and equal that mistake's model: the batch check names the
    grouping.  A repeat along axis 0 fails to broadcast: the check shows the exception and names no mistake (the
    old fixed hint about axis 0 also fired for a function that raised on every input)."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    printed = {}
    for name in ("interleaved_groups", "repeat_along_axis_0"):
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        _, out = execute(nb, replace=kept.cells, hidden=False)
        printed[name] = out["test_grouped_query_attention"].split("有批量维度：")[1]  # the batch check's lines
    assert "交错分组" in printed["interleaved_groups"], printed
    assert "提示" not in printed["repeat_along_axis_0"] and "调用时抛出了异常" in out["test_grouped_query_attention"]
