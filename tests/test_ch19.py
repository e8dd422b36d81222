"""Chapter 19 (delta 规则与 Gated DeltaNet): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: chapter 10's causal linear attention is the recurrence over a state with a running
denominator; one key written twice reads back the mean under linear attention and the last value under the delta
rule; orthonormal keys with beta = 1 make an exact memory, a rewrite changes one key only, and a gate of 0.9 leaves
0.9^7 of a value seven steps later; the state of a stated model is 32 MiB at any length while its KV cache grows
linearly; five small recall models (Zoology's layout, DeltaNet's short convolution for all) are trained here and the
sentences about their order and about delta against linear are the ones the measured accuracies pick (and for
other outcomes a training could give, exactly one sentence holds and says what those numbers say); the
chunked form equals the recurrence and its timing sentence is the one the measured ratio picks.
"""

from __future__ import annotations

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, code_cells, prose, section

from attnlib import numpy as anp
from grading import runner

ASSIGNMENT = "ch19-delta"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapters_10_and_11_and_names_the_papers():
    body = prose(CHAPTER)
    opening = body[:body.index("## 把线性注意力写成状态")]
    for link in ("{doc}`ch10-efficiency`", "{doc}`ch11-kv-cache`"):
        assert link in opening, link
    assert "Widrow 和 Hoff（1960）" in opening and "Schlag、Irie、Schmidhuber（2021）" in opening  # the rule, DeltaNet
    assert "Yang 等（2024）" in opening and "Yang、Kautz、Hatamizadeh，2025" in opening  # chunked form, gated


def test_chapter_10_leads_here():
    linear = section(prose(ROOT / "book" / "ch10-efficiency.md"), "线性注意力：换掉 softmax")
    assert "{doc}`ch19-delta`" in linear


def test_the_claims_state_their_conditions_and_the_measurements_their_limits():
    body, source = prose(CHAPTER), _source()
    cannot = section(body, "把线性注意力写成状态")
    assert "不带{term}`掩码" in cannot and "带{term}`因果掩码" in cannot  # with and without a mask
    recall = section(body, "关联回忆：训练几个小模型")
    assert "本书不从这张表推断大模型的表现" in recall and "{glue:text}`ch19_order_sentence`" in recall
    chunked = section(body, "分块形式：同样的结果，矩阵乘法来算")
    assert "本机" in chunked and "{glue:text}`ch19_cpus`" in chunked and "取最快的一次" in chunked
    assert "本书不说快慢的原因" in chunked and "repeat=3" in source and "3 次" in chunked
    assert "torch.set_num_threads(1)" in source and "torch.manual_seed(0)" in source
    assert "GPU" not in body


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_linear_attention_is_a_state_that_only_adds(chapter):
    assert chapter["by_state"].shape == (12, 4)  # checked against anp.linear_attention in the cell
    v1, v2 = chapter["v1"], chapter["v2"]
    np.testing.assert_allclose(chapter["lin_read"], (v1 + v2) / 2, atol=1e-12)
    np.testing.assert_allclose(chapter["delta_read"], v2, atol=1e-12)
    assert chapter["glued"]["ch19_lin_miss"] == pytest.approx(0.5)


@pytest.mark.cjk_font
def test_the_delta_rule_is_an_exact_memory_that_a_gate_fades(chapter):
    keys, values, memory = chapter["keys"], chapter["values"], chapter["memory"]
    np.testing.assert_allclose(keys @ keys.T, np.eye(8), atol=1e-12)
    assert chapter["recall_error"] < 1e-12
    np.testing.assert_allclose(keys @ memory, values, atol=1e-12)
    g = chapter["glued"]
    assert g["ch19_steps_after"] == 7 and g["ch19_kept"] == pytest.approx(0.9 ** 7)
    np.testing.assert_allclose(keys[1] @ chapter["faded"], 0.9 ** 6 * values[1], atol=1e-12)


@pytest.mark.cjk_font
def test_the_state_is_constant_while_the_cache_grows(chapter):
    g = chapter["glued"]
    assert g["ch19_state_mib"] == 32 * 32 * 128 * 128 * 2 / 2**20 == 32
    for n in (4096, 32768, 131072):
        assert g[f"ch19_kv_mib_{n}"] == 2 * 32 * 32 * 128 * n * 2 / 2**20
    assert g["ch19_kv_mib_131072"] == 65536


@pytest.mark.cjk_font
def test_the_recall_models_are_trained_and_the_order_sentence_is_picked(chapter):
    acc, g = chapter["acc"], chapter["glued"]
    assert set(acc) == {"linear", "delta", "gated", "softmax", "hybrid"}
    for name, a in acc.items():
        assert 0 <= a <= 1 and g[f"ch19_acc_{name}"] == a
    assert acc["softmax"] > 1 / 16 + 0.5  # far above chance (1/16): the models learned something
    assert g["ch19_order_sentence"] == chapter["order"].pick(chapter["seen"])
    assert g["ch19_versus_sentence"] == chapter["versus"].pick(chapter["gap"])
    assert chapter["gap"]["gain"] == pytest.approx(100 * (acc["delta"] - acc["linear"]))
    assert chapter["seen"] == chapter["tiers"](acc)
    ranked = sorted(acc, key=acc.get, reverse=True)
    assert chapter["seen"]["order"] == "、".join(chapter["names"][n] for n in ranked)
    assert chapter["seen"]["n"] == 1 + sum(acc[a] - acc[b] >= 0.05 for a, b in zip(ranked, ranked[1:], strict=False))


# Accuracies another training could give (ties, the delta rule below linear attention, all apart, all close):
# whatever the run measures, exactly one sentence of each pair holds, and it says what the numbers say.
OTHER_RUNS = [
    ({"linear": 0.711, "delta": 0.984, "gated": 0.984, "softmax": 1.0, "hybrid": 1.0}, 2, "高 27 个百分点"),
    ({"linear": 0.80, "delta": 0.65, "gated": 0.97, "softmax": 1.0, "hybrid": 0.99}, 3, "反而比线性注意力低 15"),
    ({"linear": 0.10, "delta": 0.30, "gated": 0.50, "softmax": 0.90, "hybrid": 0.70}, 5, "高 20 个百分点"),
    ({"linear": 0.97, "delta": 0.99, "gated": 0.98, "softmax": 1.0, "hybrid": 0.96}, 1, "相差不到 5 个百分点"),
]


@pytest.mark.parametrize(("acc", "n_groups", "versus"), OTHER_RUNS)
@pytest.mark.cjk_font
def test_the_recall_sentences_hold_for_any_training_outcome(chapter, acc, n_groups, versus):
    seen = chapter["tiers"](acc)
    assert seen["n"] == n_groups
    sentence = chapter["order"].pick(seen)  # exactly one holds, or pick raises
    assert (f"分成 {n_groups} 组" in sentence) == (1 < n_groups < 5)
    assert ("两两相差 5 个百分点以上" in sentence) == (n_groups == 5)
    gain = 100 * (acc["delta"] - acc["linear"])
    assert versus in chapter["versus"].pick({"gain": gain, "size": abs(gain)})
    assert ("方向与上文" in chapter["versus"].pick({"gain": gain, "size": abs(gain)})) == (gain >= 5)


@pytest.mark.cjk_font
def test_the_chunked_form_equals_the_recurrence_and_its_sentence_is_picked(chapter):
    q, k, v, beta, alpha = (chapter[n] for n in ("q", "k", "v", "beta", "alpha"))
    assert q.shape == (2048, 64)
    got = anp.chunked_delta_rule(q, k, v, beta, alpha=alpha, chunk_size=48)
    np.testing.assert_allclose(got[0], chapter["ref"][0], atol=1e-8)
    g = chapter["glued"]
    assert g["ch19_chunk_sentence"] == chapter["faster"].pick(chapter["ratio"])
    assert g["ch19_step_ms"] == pytest.approx(chapter["t_step"] * 1e3)


def test_the_pitfalls_hold():
    rng = np.random.default_rng(5)
    k = np.array([[1.5, 1.0, 0.0, 0.0]])  # beta |k|^2 = 0.9 * 3.25 > 2: the erase amplifies
    k2 = np.repeat(k, 20, axis=0)
    v = rng.normal(size=(20, 3))
    _, grown = anp.delta_rule(k2, k2, v, np.full(20, 0.9))
    unit = k2 / np.linalg.norm(k2, axis=-1, keepdims=True)
    _, bounded = anp.delta_rule(unit, unit, v, np.full(20, 0.9))
    assert np.abs(grown).max() > 100 * np.abs(bounded).max()  # unnormalised keys blow the state up
    assert "每一块都从零状态开始" in section(prose(CHAPTER), "常见的坑")


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_linear_attention_adds():
    k = np.array([[0.6, 0.8]])
    v1, v2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    s = np.outer(k[0], v1) + np.outer(k[0], v2)
    np.testing.assert_allclose(s.T @ k[0], v1 + v2)
    assert correct(questions(ASSIGNMENT)[0]) == ["$\\mathbf v_1 + \\mathbf v_2$"]


def test_selfcheck_gate_multiplies_the_old_state():
    rng = np.random.default_rng(7)
    k = rng.normal(size=(1, 3))
    k /= np.linalg.norm(k)
    s0, v = rng.normal(size=(3, 2)), rng.normal(size=(1, 2))
    _, s = anp.delta_rule(k, k, v, np.array([0.5]), alpha=np.array([0.8]), initial_state=s0)
    old = 0.8 * s0
    np.testing.assert_allclose(s, old + 0.5 * np.outer(k[0], v[0] - k[0] @ old))
    assert "乘在旧状态" in correct(questions(ASSIGNMENT)[1])[0]


def test_selfcheck_state_size():
    assert 32 * 32 * 128 * 128 * 2 == 32 * 2**20
    assert len(correct(questions(ASSIGNMENT)[2])) == 2


def test_selfcheck_chunks_pass_the_state():
    rng = np.random.default_rng(9)
    q, k, v = rng.normal(size=(3, 12, 4))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    beta = np.full(12, 0.5)
    whole = anp.delta_rule(q, k, v, beta)[0]
    fresh = np.concatenate([anp.delta_rule(q[i:i + 4], k[i:i + 4], v[i:i + 4], beta[i:i + 4])[0]
                            for i in range(0, 12, 4)])
    assert np.abs(fresh[4:] - whole[4:]).max() > 1e-2 and np.allclose(fresh[:4], whole[:4])
    assert "状态 $S$" in correct(questions(ASSIGNMENT)[3])[0]


# --------------------------------------------------------------------------- the assignment

DELEGATING = {
    "delta_recurrence": "def delta_recurrence(q, k, v, beta, alpha=None, state=None):\n"
                        "    return anp.delta_rule(q, k, v, beta, alpha=alpha, initial_state=state)\n",
    "gated_delta_layer": "def gated_delta_layer(x, weights):\n"
                         "    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731\n"
                         "    q, k = unit_rows(x @ weights['w_q']), unit_rows(x @ weights['w_k'])\n"
                         "    out, _ = anp.delta_rule(q, k, x @ weights['w_v'], sig(x @ weights['w_beta']),\n"
                         "                            alpha=sig(x @ weights['w_alpha']))\n"
                         "    return out @ weights['w_o']\n",
    "chunked_delta": "def chunked_delta(q, k, v, beta, chunk_size, state=None):\n"
                     "    return anp.chunked_delta_rule(q, k, v, beta, initial_state=state, chunk_size=chunk_size)\n",
}


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "gate_after_write", "keys_not_normalised", "chunks_from_zero_state")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's delta rule behind the student's names scores 0 where it is the function under test
        "delegating": assignments.with_cells(source, DELEGATING),
        "mixed": assignments.with_cells(source, mixed),
        # right, but every call prints to stderr, warns and writes to fd 2: nbgrader zeroes a test cell with any
        # stderr, so the test cells run the student's code only through checks.call
        "noisy": runner.sheet(source, "noisy"),
    }, {
        "delegating": [0, 0, 0],
        # each misses its exercise's point, so a failed essential check caps its cell at a third
        "mixed": MIXED,
        "noisy": [3, 2, 3],
    })  # 8 autograded + the written answer (2, by hand)


MIXED = [1, 0.5, 2 / 3]


def test_the_written_answer_follows_the_lesson():
    from nbrun import grade_id, source_notebook

    cells = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}
    answer = cells["written_delta"]
    assert 32 * 32 * 128 * 128 * 2 == 32 * 2**20 and "32 MiB" in answer
    assert 2 * 32 * 32 * 128 * 131072 * 2 == 65536 * 2**20 and "65536 MiB" in answer
    assert "正交" in answer and "擦" in answer


# --------------------------------------------------------------------------- errata of the review (issue 35)

def test_a_write_moves_the_read_by_beta_times_the_key_s_squared_length():
    """k^T S_t = v_old + beta |k|^2 (v - v_old) for any key, any state and any gate: the step is beta |k|^2,
    beta only for unit keys."""
    rng = np.random.default_rng(31)
    k, q = rng.normal(size=(2, 1, 5)) * 1.7
    v, s0 = rng.normal(size=(1, 3)), rng.normal(size=(5, 3))
    beta, alpha = 0.4, 0.9
    _, s = anp.delta_rule(q, k, v, np.array([beta]), alpha=np.array([alpha]), initial_state=s0)
    old = (alpha * s0).T @ k[0]
    np.testing.assert_allclose(s.T @ k[0], old + beta * (k[0] @ k[0]) * (v[0] - old), atol=1e-12)
    assert k[0] @ k[0] > 1  # not a unit key: the step is not beta


@pytest.mark.cjk_font
def test_the_state_diverges_along_a_key_only_when_the_step_exceeds_two(chapter):
    reads, writes = chapter["reads"], chapter["writes"]
    assert sorted(reads) == [0.5, 1.0, 1.5, 2.5]
    for c, read in reads.items():
        np.testing.assert_allclose(np.abs(read - 1), np.abs(1 - c) ** writes, atol=1e-12)
    assert np.abs(reads[1.5] - 1)[-1] < np.abs(reads[1.5] - 1)[1]  # overshoots, yet converges
    assert np.abs(reads[2.5] - 1)[-1] > 10  # beta |k|^2 > 2: every write moves it further away
    g = chapter["glued"]
    assert g["ch19_far_25"] == pytest.approx(1.5**8) and g["ch19_far_05"] == pytest.approx(0.5**8)
    for c in (1.9, 2.1):  # either side of 2, with a random unit key and state
        rng = np.random.default_rng(32)
        key = rng.normal(size=4)
        key *= np.sqrt(c) / np.linalg.norm(key)  # beta = 1, |k|^2 = c
        ks = np.tile(key, (200, 1))
        _, s = anp.delta_rule(ks, ks, np.ones((200, 2)), np.ones(200), initial_state=rng.normal(size=(4, 2)))
        assert (np.abs(s).max() > 1e3) == (c > 2)
    fig = chapter["step_fig"]
    from lessons import assert_draws_without_warnings

    assert_draws_without_warnings(fig)
    assert [line.get_label() for line in fig.axes[0].get_lines()][:4] == [
        "β‖k‖² = 0.5", "β‖k‖² = 1", "β‖k‖² = 1.5", "β‖k‖² = 2.5"]
    body = prose(CHAPTER)
    assert "每一步把它往 $\\mathbf v_t$ 挪 $\\beta_t$ 那么多" not in body
    assert "只有键是单位向量时才是 $\\beta_t$" in section(body, "delta 规则：先擦后写")
    assert "$\\beta_t\\lVert\\mathbf k_t\\rVert^2 > 2$" in section(body, "写入的步长：什么时候状态会发散")


@pytest.mark.cjk_font
def test_beta_only_on_the_erase_converges_to_v_over_beta(chapter):
    """The pitfall: S = (I - beta k k^T) S + k v^T along a unit key reads back v / beta, bounded, not growing."""
    assert chapter["glued"]["ch19_only_erase"] == pytest.approx(2.0)
    rng = np.random.default_rng(33)
    key = rng.normal(size=5)
    key /= np.linalg.norm(key)
    v = rng.normal(size=3)
    for beta in (0.25, 0.8):
        s, reads = np.zeros((5, 3)), []
        for _ in range(200):
            s = s - beta * np.outer(key, key @ s) + np.outer(key, v)
            reads.append(np.linalg.norm(key @ s))
        np.testing.assert_allclose(key @ s, v / beta, atol=1e-10)
        assert max(reads) <= np.linalg.norm(v) / beta + 1e-12  # bounded all along
    pitfalls = section(prose(CHAPTER), "常见的坑")
    assert "越积越大" not in pitfalls and "收敛到 $\\mathbf v/\\beta_t$" in pitfalls


@pytest.mark.cjk_font
def test_the_chunked_form_equals_the_recurrence_up_to_rounding(chapter):
    assert 0 <= chapter["worst_chunk"] < 1e-10
    assert chapter["glued"]["ch19_chunk_equal"] == chapter["equal"].pick(chapter["worst_chunk"])
    chunked = section(prose(CHAPTER), "分块形式：同样的结果，矩阵乘法来算")
    assert "在 float64 下相等" not in chunked and "{glue:text}`ch19_chunk_equal`" in chunked
    assert "Yang 等（2024）为 DeltaNet 给出的算法" in chunked


@pytest.mark.cjk_font
def test_the_papers_are_named_for_what_each_did_and_kimi_linear_uses_kda(chapter):
    recall = section(prose(CHAPTER), "关联回忆：训练几个小模型")
    assert "KDA（Kimi Delta Attention）" in recall and "每个通道一个" in recall and "{doc}`ch17-mla`" in recall
    assert "Qwen3-Next、Kimi Linear 等模型把若干层 Gated DeltaNet" not in recall
    fig = chapter["recall_fig"]
    from lessons import assert_draws_without_warnings

    assert_draws_without_warnings(fig)
    ax = fig.axes[0]
    widths = [bar.get_width() for bar in ax.patches]
    assert widths == [chapter["acc"][m] for m in chapter["kinds"]][::-1]
    assert [t.get_text() for t in ax.get_yticklabels()] == [chapter["names"][m] for m in chapter["kinds"]][::-1]
    assert "{numref}`fig-ch19-recall`" in recall


def test_the_exercise_states_the_step_and_where_the_state_diverges():
    """The notebook's sentences, by code: the read along k moves beta |k|^2 of the way from the old value to v
    (beta for a unit key); writing again and again along one direction grows the state once beta |k|^2 > 2."""
    from nbrun import grade_id, source_notebook

    cells = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}
    assert "\\beta_t\\lVert\\mathbf k_t\\rVert^2" in cells["written_delta"]
    assert "\\beta\\lVert\\mathbf k\\rVert^2 > 2" in cells["ex2_text"]
    rng = np.random.default_rng(3)
    s, k, v, beta = rng.normal(size=(4, 3)), 1.7 * rng.normal(size=4), rng.normal(size=3), 0.3
    _, after = anp.delta_rule(k[None], k[None], v[None], np.array([beta]), initial_state=s)
    old = s.T @ k
    np.testing.assert_allclose(after.T @ k, old + beta * (k @ k) * (v - old))
    unit = k / np.linalg.norm(k)
    for length, grows in ((1.0, False), (1.4, False), (1.5, True)):  # beta = 0.9: beta |k|^2 = 0.9, 1.76, 2.03
        keys = np.tile(length * unit, (400, 1))
        _, state = anp.delta_rule(keys, keys, np.tile(v, (400, 1)), np.full(400, 0.9))
        assert (np.abs(state).max() > 1e3) == grows, (length, np.abs(state).max())


# --------------------------------------------------------------------------- the review of part 6

def test_the_state_form_is_said_to_agree_as_measured(chapter):
    """The page said "逐位一致" where the cell asserted only allclose (the gap is a rounding error, not 0): the
    sentence is now picked by the measured gap."""
    gap, sentences = chapter["state_gap"], chapter["state_agrees"]
    assert gap == float(np.abs(chapter["by_state"] - chapter["by_sums"]).max()) < 1e-12
    assert chapter["glued"]["ch19_state_sentence"] == sentences.pick(gap)
    assert "逐位相同" in sentences.pick(0.0) and "舍入误差" not in sentences.pick(0.0)
    assert "最多相差 2e-16" in sentences.pick(2.2e-16) and "逐位" not in sentences.pick(2.2e-16)
    with pytest.raises(ValueError):
        sentences.pick(1e-3)  # a real difference: no sentence holds, the page does not build
    state = section(prose(CHAPTER), "把线性注意力写成状态")
    assert "逐位一致" not in state and "{glue:text}`ch19_state_sentence`" in state


def test_orthogonal_directions_are_untouched_only_without_a_gate():
    rng = np.random.default_rng(11)
    key = np.array([[1.0, 0.0, 0.0]])
    s0, v = rng.normal(size=(3, 2)), rng.normal(size=(1, 2))
    for alpha, untouched in ((1.0, True), (0.8, False)):
        _, s = anp.delta_rule(key, key, v, np.ones(1), alpha=np.array([alpha]), initial_state=s0)
        assert np.allclose(s[1:], s0[1:]) is untouched
    rule = section(prose(CHAPTER), "delta 规则：先擦后写")
    assert "$\\alpha_t = 1$ 时，与 $\\mathbf k_t$ 正交的方向不受影响" in rule


def test_the_self_check_writes_the_chunk_system_in_the_page_s_notation():
    why = questions(ASSIGNMENT)[3]["options"][0]["why"]
    assert "U - W S" not in why and "$(I + A)D = BV - BKS$" in why
    assert "(I + A)\\,D = BV - BKS" in CHAPTER.read_text(encoding="utf-8")  # the page's display equation


def test_an_answer_that_changes_the_given_state_loses_only_the_untouched_check():
    """The hidden check computed its expected outputs from s0 after the student's call, so an answer updating the
    given state in place (right outputs) failed the essential 40-step check and kept a third.  Expected outputs and
    models now come from the copy made before the call."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "state_changed_in_place.py")
    assert kept.severity == "edge"
    scores, out = execute(nb, replace=kept.cells)
    printed = out["test_delta_recurrence"]
    failed = [line for line in printed.splitlines() if line.startswith("✗")]
    assert failed == ["✗ 没有改动传入的初始状态：未通过"], printed
    assert scores["test_delta_recurrence"] == pytest.approx(3 * 7 / 8)
