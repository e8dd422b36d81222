"""Chapter 22 (注意力汇聚点与流式生成): the lesson's claims hold, the self-check is right, the assignment grades.

What the lesson's cells leave shows, on SmolLM2-135M-Instruct reading the first 256 tokens of a section of the
Python documentation (perplexity over the predictions from position 128 on): many heads of the later layers put
most of their weight on the first token, whose hidden state becomes outsized in the layer just before them while
its key is short (RMSNorm) and, in those layers, its value too; hiding it from every later query
hands its role to the next token (perplexity unchanged), hiding it only from the queries after that does not
(perplexity up); a window alone is far worse than four sinks plus the window; a rolling cache decoding one token
at a time gives the logits of its parallel equivalent, with RoPE at the cache's slots (StreamingLLM) as at the
original indices, and the two differ; a sink logit lets a head read (almost) nothing, computed stably.  The
self-check's facts are checked with attnlib, and the assignment, which needs no model, is generated, submitted
and autograded by nbgrader.
"""

from __future__ import annotations

import math
import re

import assignments
import numpy as np
import pytest
import torch
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp
from attnlib import torch as att
from grading import runner

ASSIGNMENT = "ch22-sinks"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapters_21_11_and_10_and_cites_what_it_uses():
    body = prose(CHAPTER)
    opening = body[:body.index("## 第一个词元分走的注意力")]
    for doc in ("ch21-real-model", "ch11-kv-cache", "ch10-efficiency"):
        assert f"{{doc}}`{doc}`" in opening, doc
    assert "Xiao 等，2023" in opening
    sinks = section(body, "汇聚点 logit：允许一个头什么都不看")
    assert "Miller（2023）" in sinks and "gpt-oss" in sinks and "不除以 $\\sqrt d$" in sinks
    positions = section(body, "滚动缓存交给 RoPE 的位置")
    assert "3.2 节" in positions and "streaming_llm/pos_shift/modify_llama.py" in positions
    assert "recent_size + 1" in positions  # their evaluation trims after each step: the window is one more


def test_the_conditions_of_every_measurement_are_stated():
    """The text, its length, where the loss is taken and the single thread are in the prose and in the code."""
    body, source = prose(CHAPTER), _source()
    assert 'topics["execmodel"]' in source and "[:256]" in source and "START = len(ids), 128" in source
    assert "Execution model" in body and "{glue:text}`ch22_n`" in body and "{glue:text}`ch22_start`" in body
    # the loss is taken on the predictions from position START on, said in the prose (glued), not only in a comment
    assert "只算从第 {glue:text}`ch22_start` 个位置起的 {glue:text}`ch22_scored` 个预测" in body
    windows = section(body, "只留窗口，还是再留几个汇聚点")
    assert "{glue:text}`ch22_start`" in windows and "计分的每个查询都已经看不见第 0 个词元" in windows
    assert "assert START >= max(windows)" in source
    assert "长文本" not in body  # the length is stated: "这段 {glue:text}`ch22_n` 个词元的文字"
    assert "torch.set_num_threads(1)" in source and "seed" not in body.lower() and "种子" not in body
    # "做的计算与 model.forward 相同": asserted, bit for bit, on a short input
    assert "assert torch.equal(forward(short), model.forward(short))" in source and "逐位相同" in body
    assert "optim" not in source and "backward" not in source  # nothing is trained


def test_the_library_s_eviction_and_positions_are_streamingllm_s():
    """StreamingLLM's code keeps start_size + recent_size tokens after each step and rotates the keys of the cache by
    their slots (kv_cache.py, pos_shift/modify_llama.py): the new query sees recent_size + 1 recent tokens, its own
    included, at the last slot.  SinkKVCache with window = recent_size + 1 holds the same tokens at every step."""
    start, recent = 4, 6
    cache = anp.SinkKVCache(1, 1, 1, n_sink=start, window=recent + 1)
    past = []  # their cache between steps: the original indices
    for t in range(30):
        attended = past + [t]  # their step attends to what was kept plus the new token
        cache.append(0, np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))
        assert cache.tokens().tolist() == attended
        assert cache.positions().tolist() == list(range(len(attended)))  # the query at the last slot
        past = attended if len(attended) <= start + recent else attended[:start] + attended[-recent:]


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_many_heads_put_most_of_their_weight_on_the_first_token(chapter):
    share, g = chapter["share"], chapter["glued"]
    assert share.shape == (30, 9) and g["ch22_all_heads"] == 270
    assert g["ch22_over_half"] == int((share > 0.5).sum()) > 27  # more than a tenth of the heads
    assert g["ch22_scored"] == g["ch22_n"] - 1 - g["ch22_start"] == 127
    assert g["ch22_uniform"] == pytest.approx(np.mean(1 / np.arange(129, 257)))
    assert g["ch22_max_share"] > 100 * g["ch22_uniform"]
    busy = share.mean(1) > 0.2
    assert g["ch22_busy"] == busy.sum() and busy[g["ch22_first_busy"]:].all()
    assert g["ch22_low_share"] < 0.05 and chapter["idle"][:2].all()
    assert "最前面的两层（第 0、1 层，图中最上面两行）" in prose(CHAPTER)  # layers 0 and 1, not the last ones
    assert 0 < (share > 0.8).sum() <= 5  # the figure's alt text: "个别格子接近最亮"
    fig = chapter["share_fig"]
    assert_draws_without_warnings(fig)
    assert [ax.get_xlabel() for ax in fig.axes[:1]] == ["头"] and fig.axes[0].get_ylabel() == "层"


@pytest.mark.cjk_font
def test_the_first_token_s_hidden_state_is_outsized_its_key_is_not(chapter):
    g, lift = chapter["glued"], chapter["lift"]
    assert g["ch22_lift"] > 50 and g["ch22_lift_layer"] == int(lift.argmax())
    # "经过第 0 到第 10 层……再经过第 11 层，一下子变成……；……正是从紧接着的第 12 层开始的"
    assert g["ch22_lift_before"] == lift[:g["ch22_lift_layer"]].max() < g["ch22_lift"] / 10
    assert g["ch22_lift_prev"] + 1 == g["ch22_lift_layer"] == g["ch22_first_busy"] - 1
    assert g["ch22_key_max"] < 1  # "键却不长"
    assert g["ch22_value_busy"] < 0.5 < g["ch22_value_idle"]


@pytest.mark.cjk_font
def test_hiding_the_first_token_hands_its_role_to_the_next_one_only_if_that_one_sees_nothing_before(chapter):
    g = chapter["glued"]
    assert abs(g["ch22_ppl_hide_all"] / g["ch22_ppl_full"] - 1) < 0.02  # "几乎不变"
    assert g["ch22_lift_all"] > 50 and g["ch22_over_1_all"] > 0.5 * g["ch22_over_half"]
    assert g["ch22_lift_late"] < 2 and g["ch22_over_1_late"] == 0
    assert g["ch22_rest_late"] < g["ch22_lift"] / 3  # "不到第 0 个词元的三分之一"
    assert g["ch22_ppl_hide_late"] > 1.05 * g["ch22_ppl_full"]  # "升到"
    mask = chapter["hide"]["late"]
    assert mask[1, 0] and not mask[2:, 0].any() and mask[0, 0]
    assert all(re.search("[\u4e00-\u9fff]", label) for label in chapter["said"].values())  # printed in Chinese


@pytest.mark.cjk_font
def test_a_window_alone_is_far_worse_than_four_sinks_and_the_window(chapter):
    g, ppl = chapter["glued"], chapter["ppl"]
    for w in (16, 32, 64):
        assert g["ch22_ppl_full"] < ppl[4, w] < ppl[0, w]
        assert g[f"ch22_ppl_0_{w}"] == ppl[0, w] and g[f"ch22_ppl_4_{w}"] == ppl[4, w]
    assert [ppl[0, w] for w in (16, 32, 64)] == sorted((ppl[0, w] for w in (16, 32, 64)), reverse=True)
    assert g["ch22_gain"] == pytest.approx(min(ppl[0, w] / ppl[4, w] for w in (16, 32, 64))) and g["ch22_gain"] > 2
    fig = chapter["window_fig"]
    assert_draws_without_warnings(fig)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["只留窗口", "4 个汇聚点 + 窗口", "全部因果注意力"]
    ax = fig.axes[0]  # the log axis is labelled with plain numbers, not "2×10¹"
    ticks = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]
    assert len(ticks) >= 3 and all(re.fullmatch(r"\d+", text) for text in ticks), ticks


@pytest.mark.cjk_font
def test_the_parallel_mask_equals_the_rolling_cache_and_streamingllm_s_slots_differ(chapter):
    g = chapter["glued"]
    assert max(chapter["same"].values()) < 1e-3 < g["ch22_roll_gap"]
    assert g["ch22_stream_agree"] == chapter["agree"].pick(max(chapter["same"].values()))
    assert g["ch22_slots_sentence"] == chapter["differ"].pick(abs(g["ch22_ppl_slots"] / g["ch22_ppl_4_32"] - 1))
    assert (g["ch22_roll_cap"], g["ch22_roll_slot"]) == (8, 7) and g["ch22_roll_last"] == 12
    seqs = chapter["seqs"]
    assert [len(s) for s in seqs] == [14, 14] and seqs[0][:10] == seqs[1][:10] == chapter["ids"][:10]


def test_slot_attention_is_streamingllm_s_cache_on_random_weights():
    """The lesson's parallel form of StreamingLLM's positions, checked here without the model: query t meets sink j
    at distance min(t, s + w - 1) - j, the keys of its window at their original distances."""
    rng = np.random.default_rng(0)
    n, s, w, d = 14, 2, 4, 8
    q, k, v = (rng.normal(size=(1, n, d)) for _ in range(3))
    pos = np.arange(n)
    slot = np.minimum(pos, s + w - 1)
    kr = anp.apply_rope(k, pos)
    near, far = anp.apply_rope(q, pos) @ kr.swapaxes(-1, -2), anp.apply_rope(q, slot) @ kr.swapaxes(-1, -2)
    scores = np.where(pos < s, far, near) / math.sqrt(d)
    parallel = anp.softmax(scores, mask=anp.streaming_mask(n, n_sink=s, window=w)) @ v
    cache = anp.SinkKVCache(1, 1, d, n_sink=s, window=w)
    for t in range(n):
        keys, values = cache.append(0, k[:, t:t + 1], v[:, t:t + 1])
        p = cache.positions()
        out, _ = anp.scaled_dot_product_attention(anp.apply_rope(q[:, t:t + 1], p[-1:]), anp.apply_rope(keys, p),
                                                  values)
        np.testing.assert_allclose(out[:, 0], parallel[:, t], rtol=1e-10, atol=1e-12)


@pytest.mark.cjk_font
def test_a_sink_logit_lets_a_head_read_nothing_and_is_computed_stably(chapter):
    g, w = chapter["glued"], chapter["w"]
    assert g["ch22_tensors"] == 272 and not [name for name in chapter["weights"] if "sink" in name]
    assert g["ch22_out_five"] < 0.1 < g["ch22_out_plain"] and g["ch22_sink_five"] > 0.9
    for key in ("one", "five"):  # "相差不到百分之一"
        assert abs(g[f"ch22_match_{key}"] / g["ch22_match_plain"] - 1) < 0.01
    for rows in w.values():
        np.testing.assert_allclose(rows.sum(-1), 1)  # six keys and the sink share everything
    assert np.isnan(chapter["naive"]).any() and np.isfinite(chapter["stable"]).all()
    # "x 超过约 709.8 时 exp(x) 超出 float64……float32 里超过约 88.7"
    assert round(g["ch22_exp_top64"], 1) == 709.8 and round(g["ch22_exp_top32"], 1) == 88.7
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(np.float64(709.8))) and np.isfinite(np.exp(np.float64(709.7)))
        assert np.isinf(np.exp(np.float32(88.8))) and np.isfinite(np.exp(np.float32(88.7)))
    fig = chapter["logit_fig"]
    assert_draws_without_warnings(fig)
    assert [ax.get_title() for ax in fig.axes] == ["哪个键都不匹配", "与键 2 很匹配"]


def test_the_pitfalls_hold():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(3, 2, 4, 5))
    b = np.array([1.5, -0.5])
    plain, _ = anp.scaled_dot_product_attention(q, k, v)
    shifted = q @ k.swapaxes(-1, -2) / math.sqrt(5) + b[:, None, None]  # b added to every score
    np.testing.assert_allclose(anp.softmax(shifted) @ v, plain)  # changes nothing
    assert np.abs(anp.sink_attention(q, k, v, b)[0] - plain).max() > 0.01  # in the denominator it does
    one_short = anp.streaming_mask(9, n_sink=2, window=2)
    assert not np.array_equal(one_short, anp.streaming_mask(9, n_sink=2, window=3))
    fifo = anp.streaming_mask(9, n_sink=0, window=5)  # a FIFO of s + w tokens is a window alone
    cache = anp.SinkKVCache(1, 1, 1, n_sink=0, window=5)
    for _ in range(9):
        cache.append(0, np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))
    assert cache.tokens().tolist() == np.flatnonzero(fifo[-1]).tolist() == [4, 5, 6, 7, 8]
    with np.errstate(over="ignore", invalid="ignore"):  # shifting by the scores only: a fully masked row
        s = np.full((1, 3), -np.inf)
        m = s.max(-1, keepdims=True)
        assert np.isnan(np.exp(s - m)).all()


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_which_keys():
    row = anp.streaming_mask(10, n_sink=2, window=3)[9]
    assert np.flatnonzero(row).tolist() == [0, 1, 7, 8, 9]
    assert correct(questions(ASSIGNMENT)[0]) == ["0、1、7、8、9"]


def test_selfcheck_the_position_of_the_new_query():
    cache = att.SinkKVCache(1, 1, 1, n_sink=4, window=8)
    for _ in range(30):
        cache.append(0, torch.zeros(1, 1, 1), torch.zeros(1, 1, 1))
    assert cache.tokens()[-1] == 29 and cache.positions()[-1] == 11 and cache.length == 12
    assert correct(questions(ASSIGNMENT)[1]) == ["11"]


def test_selfcheck_sink_logits():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 2, 3, 4))
    s = q @ k.swapaxes(-1, -2) / 2
    assert np.allclose(anp.softmax(s + 0.7), anp.softmax(s))  # A
    out, w = anp.sink_attention(q, k, v, np.zeros(2), mask=np.zeros((3, 3), dtype=bool))
    assert not out.any() and not w.any()  # C
    _, w = anp.sink_attention(q, k, v, np.zeros(2))
    assert (w.sum(-1) < 1).all()  # D is wrong
    assert len(correct(questions(ASSIGNMENT)[2])) == 2


@pytest.mark.cjk_font
def test_selfcheck_hiding_the_first_token(chapter):
    g = chapter["glued"]
    assert abs(g["ch22_ppl_hide_all"] / g["ch22_ppl_full"] - 1) < 0.02 and g["ch22_lift_all"] > 50
    assert g["ch22_ppl_hide_all"] < 100 < g["ch22_ppl_0_16"]  # not "几百" as with a window alone
    assert correct(questions(ASSIGNMENT)[3])[0].startswith("困惑度几乎不变")


# --------------------------------------------------------------------------- the assignment

def test_the_exercises_need_no_model():
    """Grading runs where the model may be missing (a class hub, kernels run as nobody): no cell loads it."""
    from nbrun import source_notebook

    text = "\n".join(c.source for c in source_notebook(ASSIGNMENT).cells if c.cell_type == "code")
    assert "pretrained" not in text and "load_smollm2" not in text and "LlamaModel" not in text


def test_the_written_question_states_the_lesson_s_conditions(chapter):
    from nbrun import grade_id, source_notebook

    cells = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}
    question, answer = cells["ex4_text"], cells["written_sinks"]
    assert f"{chapter['N']} 个词元" in question and "4 个汇聚点" in question
    assert "完全相同（舍入误差之内）" in question  # float32: the cache and the mask agree to rounding
    assert "4 个汇聚点加窗口 32" in answer and chapter["ppl"].get((4, 32)) is not None
    assert "\\min(t, s+w-1) - j" in answer


def test_the_reference_sink_attention_keeps_a_fractional_sink_logit_and_float32():
    """The model answer converts the sink logits to a float dtype: integer inputs do not truncate b = 0.5 to 0, and
    float32 inputs stay float32."""
    namespace = {"np": np}
    exec(assignments.model_cells(ASSIGNMENT)["sink_attention"], namespace)  # noqa: S102 - our own answer
    rng = np.random.default_rng(5)
    q, k, v = (rng.integers(-2, 3, size=(2, 3, 4)) for _ in range(3))
    b = np.array([0.5, -1.5])
    out, w = namespace["sink_attention"](q, k, v, b)
    want_out, want_w = anp.sink_attention(q.astype(float), k.astype(float), v.astype(float), b)
    np.testing.assert_allclose(w, want_w, rtol=1e-12)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-12)
    out, w = namespace["sink_attention"](*(x.astype(np.float32) for x in (q, k, v)), b)
    assert out.dtype == w.dtype == np.float32
    np.testing.assert_allclose(w, want_w, rtol=1e-5)


DELEGATING = {
    "sink_attention": "def sink_attention(q, k, v, sink_logits, mask=None):\n"
                      "    return anp.sink_attention(q, k, v, sink_logits, mask=mask)\n",
    "streaming_mask": "def streaming_mask(n_q, n_k, n_sink, window):\n"
                      "    return anp.streaming_mask(n_q, n_k, n_sink=n_sink, window=window)\n",
    "sink_cache": "class SinkCache:\n"
                  "    def __init__(self, n_sink, window):\n"
                  "        self.n_sink, self.window, self.cache = n_sink, window, None\n"
                  "    def append(self, k, v):\n"
                  "        k, v = np.asarray(k)[:, None], np.asarray(v)[:, None]\n"
                  "        if self.cache is None:\n"
                  "            self.cache = anp.SinkKVCache(1, k.shape[0], k.shape[-1], n_sink=self.n_sink,\n"
                  "                                         window=self.window)\n"
                  "        keys, values = self.cache.append(0, k, v)\n"
                  "        return keys, values, self.cache.positions(0)\n"
                  "    def tokens(self):\n"
                  "        return self.cache.tokens(0).tolist()\n",
}


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "sink_added_to_scores", "window_one_short", "sinks_dropped")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's sink attention, mask and rolling cache behind the student's names score 0
        "delegating": assignments.with_cells(source, DELEGATING),
        "mixed": assignments.with_cells(source, mixed),
        # right, but every call prints to stderr, warns and writes to fd 2: nbgrader zeroes a test cell with any
        # stderr, so the test cells run the student's code only through checks.call
        "noisy": runner.sheet(source, "noisy"),
    }, {
        "delegating": [0, 0, 0],
        # each misses its exercise's point, so a failed essential check caps its cell at a third (the sink added
        # to the scores passes the checks that do not involve the sink: 6 of 14, below the cap of 1)
        "mixed": [6 / 7, 2 / 3, 1],
        "noisy": [3, 2, 3],
    })  # 8 autograded + the written answer (2, by hand)


def test_a_hint_names_only_what_the_function_did():
    """The sink added to every score equals the model of a sink with no effect: its weights check names it. Without
    any shift, scores in the thousands give NaN: the check reports what it saw and names no mistake."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    printed = {}
    for name in ("sink_added_to_scores", "no_max_shift"):
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        _, out = execute(nb, replace=kept.cells, hidden=False)
        printed[name] = out["test_sink_attention"]
    first = re.search(r"✗ 【要点】2 个头.*?(?=\n[✓✗])", printed["sink_added_to_scores"], re.S).group(0)
    assert "汇聚点 logit 没有起作用" in first
    big = re.search(r"✗ 【要点】分数上千.*?(?=\n[✓✗])", printed["no_max_shift"], re.S).group(0)
    assert "NaN" in big and "提示" not in big


def test_a_mask_check_says_where_the_masks_differ():
    """A window one too long differs from the right 10 x 10 mask only at entries a printed mask leaves out (its
    middle rows and columns): the failed check says how many entries differ and where, and, as the answer equals
    that mistake's model, names it."""
    from nbrun import execute, read_kept, source_notebook

    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "window_one_long.py")
    _, out = execute(source_notebook(ASSIGNMENT), replace=kept.cells, hidden=False)
    first = re.search(r"✗ 【要点】10 个查询.*?(?=\n[✓✗])", out["test_streaming_mask"], re.S).group(0)
    assert "5 / 100 个数不一致，相差最大的在下标 (5, 2) 处：期望 0，实际 1" in first, first
    assert "提示" in first and "窗口多算了一个" in first
    shown = anp.streaming_mask(10, 10, n_sink=2, window=3)
    assert "..." in np.array2string(shown, threshold=30)  # the arrays themselves are shown cut short
