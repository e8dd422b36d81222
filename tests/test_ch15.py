"""Chapter 15 (位置信息): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: without a mask the order task is at chance without positions and learned with them,
with the causal mask it is learned without positions too (deterministically; its time is a bench,
bench/bench_ch15_training.py, never a test); the
sinusoidal code of p + k is one fixed rotation of the code of p; RoPE's score depends on the offset only, the half
split is a permutation of features, ALiBi is a finite bias placed before the softmax that a longer sequence extends
by the same rule, and a cached step must rotate at its true position.
The self-check's facts are checked with attnlib, and the assignment is generated, submitted and autograded.
"""

from __future__ import annotations

import re

import assignments
import numpy as np
import pytest
import torch
import yaml
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp

ASSIGNMENT = "ch15-positions"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapter_6_and_links_its_neighbours():
    body = prose(CHAPTER)
    opening = body[:body.index("## 不带掩码时，看不见顺序的模型学不会顺序")]
    # chapter 6 checks the order blindness by code in an exercise (it proves nothing); the word is defined here
    assert "{doc}`ch06-attention`的练习用代码检验过" in opening and "证明" not in body
    assert "**置换等变性**（permutation equivariance）：输入的词元按某个排列打乱，输出的行就按同一个排列打乱" in opening
    plain = re.sub(r"\{term\}`([^`<]+?)(?: <[^>]*>)?`", r"\1", opening)  # the text as read, without the roles
    assert "不带掩码的自注意力里，把输入的词元（token）换个顺序" in plain  # the condition comes with the claim
    assert "{doc}`ch11-kv-cache`" in opening
    assert "{doc}`ch08-masks`" in section(body, "ALiBi：按距离扣分")  # the bias goes where chapter 8 put biases
    assert "一种常见的说法是" in body
    for heading in ("正弦位置编码", "RoPE：把位置转进查询和键", "缓存解码时的位置"):
        assert f"## {heading}" in body


def test_the_toc_lists_this_chapter_first_in_part_5():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第五部分 进阶")
    assert part["chapters"][0] == {"file": "book/ch15-positions", "title": "15. 位置信息：正弦编码、ALiBi 与 RoPE"}
    captions = [p["caption"] for p in toc["parts"]]
    assert captions.index("第四部分 应用与复盘") < captions.index("第五部分 进阶") < captions.index("附录")


def test_the_training_is_described_as_it_is_done():
    body, source = prose(CHAPTER), "\n".join(code_cells(CHAPTER))
    assert "10 个词元，取自 12 个词元的词表" in body and "N, VOCAB, D = 10, 12, 32" in source
    assert "4000 个训练序列" in body and "order_data(4000, gen)" in source
    assert "训练 400 步" in body and "range(400)" in source
    assert "另外抽的 2000 个序列" in body and "order_data(2000, gen)" in source
    assert "torch.set_num_threads(1)" in source and "torch.manual_seed(0)" in source
    causal = section(body, "带因果掩码时，不加位置也学得会")
    assert "同样的数据、同样的初值和小批量、同样训练 400 步" in causal and 'train("none", causal=True)' in source


# --------------------------------------------------------------------------- the lesson's claims

def test_order_is_learned_only_with_positions(chapter):
    g = chapter["glued"]
    assert abs(g["ch15_acc_none"] - 50) < 5  # "和抛硬币一样"
    assert g["ch15_acc_sin"] > 95 and g["ch15_acc_rope"] > 95  # "几乎全对"
    assert chapter["test_x"].shape == (2000, 10)
    # held out: the test sequences are (almost all) new ones
    seen = {tuple(r) for r in chapter["train_x"].tolist()}
    assert sum(tuple(r) in seen for r in chapter["test_x"].tolist()) < 20
    # each test sequence has exactly one A and one B, and the labels are balanced
    test_x, test_y = chapter["test_x"], chapter["test_y"]
    assert ((test_x == 0).sum(1) == 1).all() and ((test_x == 1).sum(1) == 1).all()
    assert 0.4 < float(test_y.mean()) < 0.6


def test_the_causal_mask_alone_lets_the_model_learn_order(chapter):
    """The common statement holds without a mask only: with causal=True and no positions the task is learned."""
    g = chapter["glued"]
    assert g["ch15_acc_causal"] > 95 and g["ch15_acc_causal"] - g["ch15_acc_none"] > 40  # "几乎全对"
    model = chapter["models"]["causal"]
    assert model.kind == "none" and model.causal and not chapter["models"]["none"].causal
    # no longer order-blind: swapping A and B moves its score, as it moves the scores of the models with positions
    swapped = chapter["test_x"].clone()
    swapped[chapter["test_x"] == 0], swapped[chapter["test_x"] == 1] = 1, 0
    with torch.no_grad():
        assert (model(swapped) - model(chapter["test_x"])).abs().max() > 1
    # why: with equal scores, the causal mask alone gives position j a share that falls with j
    share = chapter["share"]
    assert np.allclose(share["不带掩码"], 0.1) and (np.diff(share["因果掩码"]) < 0).all()
    harmonic = sum(1 / (i + 1) for i in range(10)) / 10  # (1/10) Σ_{i ≥ 0} 1/(i+1)
    assert g["ch15_share_first"] == pytest.approx(harmonic) and g["ch15_share_last"] == pytest.approx(0.01)
    claim = section(prose(CHAPTER), "带因果掩码时，不加位置也学得会")
    assert "Haviv" in claim and "**不带掩码时**注意力看不见顺序" in claim


def test_the_order_blind_model_cannot_tell_a_from_b(chapter):
    """Not badly trained but unable: permuting the tokens leaves its score unchanged (to float32 rounding)."""
    model, x = chapter["models"]["none"], chapter["test_x"][:200]
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (model(x[:, perm]) - model(x)).abs().max() < 1e-5
    assert chapter["moved"]["none"] < 1e-5 and chapter["moved"]["sin"] > 1 and chapter["moved"]["rope"] > 1


def _train_again() -> dict:
    """The setup and training cells again (the three models, then the causal one), in a fresh namespace: what they
    glue."""
    every = code_cells(CHAPTER)
    cells = every[:2] + [next(c for c in every if 'train("none", causal=True)' in c)]
    glued, namespace = {}, {"__name__": "__ch15_again__"}
    import myst_nb

    real, threads = myst_nb.glue, torch.get_num_threads()
    myst_nb.glue = lambda name, value, display=True: glued.__setitem__(name, value)
    try:
        for cell in cells:
            exec(compile(cell, "ch15-positions.md", "exec"), namespace)  # noqa: S102 - our own lesson
    finally:
        myst_nb.glue = real
        torch.set_num_threads(threads)
    return {k: v for k, v in glued.items() if k.startswith("ch15_acc_")}


def test_the_training_is_deterministic(chapter):
    """A second run gives the same accuracies.  How long the four trainings take (the lesson's budget is 30 s) is
    measured by ``make bench`` (bench/bench_ch15_training.py): a wall-clock time depends on the machine's load and
    is never asserted in a test."""
    again = _train_again()
    assert len(again) == 4 and again == {k: chapter["glued"][k] for k in again}


def test_sinusoidal_codes_relative_only_before_the_projections(chapter):
    table = chapter["table"]
    assert table.shape == (64, 32) and max(chapter["diagonals"]) < 1e-12
    assert chapter["glued"]["ch15_sin_spread"] > 0.1
    np.testing.assert_array_equal(table, anp.sinusoidal_positions(64, 32))


def test_a_shift_of_the_sinusoidal_codes_is_one_rotation(chapter):
    """Vaswani et al.'s property: for a fixed k, one matrix M_k maps the code of every p to the code of p + k."""
    assert chapter["glued"]["ch15_shift_gap"] < 1e-12
    shift_matrix = chapter["shift_matrix"]
    codes = anp.sinusoidal_positions(200, 16, base=100.0)
    for k in (3, 17):
        m_k = shift_matrix(k, 16, base=100.0)
        np.testing.assert_allclose(codes[:-k] @ m_k.T, codes[k:], atol=1e-12)
        np.testing.assert_allclose(m_k @ m_k.T, np.eye(16), atol=1e-12)  # a rotation
    # it is RoPE's rotation: turning each code by -k positions gives the code k positions later
    np.testing.assert_allclose(anp.apply_rope(codes[:-3], np.full(197, -3.0), base=100.0), codes[3:], atol=1e-12)
    assert "Vaswani" in section(prose(CHAPTER), "正弦位置编码")


def test_rope_scores_depend_on_the_offset_and_keep_lengths(chapter):
    g = chapter["glued"]
    assert g["ch15_rope_relative_gap"] < 1e-12 and chapter["norm_gap"] < 1e-12
    curves = chapter["curves"]
    assert sorted(curves) == [0, 50, 500] and np.ptp(curves[0]) > 1  # the curve is not flat


def test_the_half_split_is_a_permutation(chapter):
    half, paired, perm = chapter["half"], chapter["paired"], chapter["perm"]
    assert np.abs(half - paired).max() < 1e-12 and chapter["glued"]["ch15_mixed_gap"] > 1
    assert sorted(perm) == list(range(64)) and list(perm[:4]) == [0, 32, 1, 33]


def test_alibi_weights_favour_near_keys(chapter):
    g, weights = chapter["glued"], chapter["weights"]
    assert weights.shape == (8, 12, 12)
    assert g["ch15_near_steep"] > 2 * g["ch15_near_flat"]  # "头 1 …… 头 8 几乎一视同仁"
    assert g["ch15_near_flat"] < 2 / 12  # about 1/12 for every key
    np.testing.assert_array_equal(chapter["bias"], anp.alibi_bias(12, 12, 8))
    # what ALiBi is for (train short, test long): a longer sequence extends the bias by the same rule
    np.testing.assert_array_equal(chapter["longer"][:, :12, :12], chapter["bias"])
    alibi = section(prose(CHAPTER), "ALiBi：按距离扣分")
    assert "Train Short, Test Long" in alibi and "外推" in alibi


def test_the_base_and_the_heads_of_real_models_are_named():
    rope = section(prose(CHAPTER), "RoPE：把位置转进查询和键")
    assert "LLaMA 3 取 500000" in rope and "`rope_theta`" in rope
    assert "GPT-NeoX" in rope and "`rotary_pct = 0.25`" in rope
    assert "RoPE 按头来做" in rope and "d_\\text{head}" in rope
    assert "通常取 10000" not in prose(CHAPTER)


def test_a_cached_step_rotates_at_its_true_position(chapter):
    gaps = chapter["gaps"]
    assert gaps["位置 t"] < 1e-12 and chapter["glued"]["ch15_cache_gap_zero"] > 0.01
    # ALiBi's step is the last row of the full bias (the prose says so)
    np.testing.assert_array_equal(anp.alibi_bias(1, 9, 4)[:, 0], anp.alibi_bias(9, 9, 4)[:, -1])


@pytest.mark.cjk_font
def test_the_figures_are_labelled_in_chinese_and_draw_without_warnings(chapter):
    for fig in (chapter["table_fig"], chapter["score_fig"], chapter["alibi_fig"]):
        assert_draws_without_warnings(fig)
    assert "正弦位置编码" in chapter["table_fig"].axes[0].get_title()
    (score,) = chapter["score_fig"].axes
    assert [t.get_text() for t in score.get_legend().get_texts()] == ["键在位置 0", "键在位置 50", "键在位置 500"]
    left, right = chapter["alibi_fig"].axes[:2]
    assert len(left.lines) == 8 and "偏置" in left.get_title() and "权重" in right.get_title()


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_relative_scores():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 1, 8))
    score = {(m, n): (anp.apply_rope(q, [m]) @ anp.apply_rope(k, [n]).T).item() for m, n in
             ((3, 1), (12, 10), (1, 3), (5, 1))}
    assert score[3, 1] == pytest.approx(score[12, 10], abs=1e-12)  # m - n, not m (A) nor m + n (B)
    assert abs(score[3, 1] - score[5, 1]) > 1e-3 and abs(score[3, 1] - score[1, 3]) > 1e-3
    assert correct(questions(ASSIGNMENT)[0])[0].startswith("除了")


def test_selfcheck_where_the_bias_goes():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 4, 16))
    bias = anp.alibi_bias(4, 4, 1)[0]
    after = anp.softmax(q @ k.T / 4 + bias, mask=anp.causal_mask(4))
    inside = anp.softmax((q @ k.T + bias) / 4, mask=anp.causal_mask(4))
    assert np.abs(after - inside).max() > 1e-3  # C differs from B
    assert correct(questions(ASSIGNMENT)[1]) == ["加在缩放之后、softmax 之前的分数上"]


def test_selfcheck_the_new_tokens_position():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 21, 8))
    full = anp.scaled_dot_product_attention(anp.apply_rope(q), anp.apply_rope(k), v, causal=True)[0][-1]

    def step(q_at, k_at):
        keys = np.concatenate([anp.apply_rope(k[:20]), anp.apply_rope(k[20:], k_at) if k_at else k[20:]])
        return anp.scaled_dot_product_attention(anp.apply_rope(q[20:], [q_at]), keys, v)[0][0]

    assert np.abs(step(20, [20]) - full).max() < 1e-12  # D
    for q_at, k_at in ((0, [0]), (21, [21]), (20, None)):  # A, B, C
        assert np.abs(step(q_at, k_at) - full).max() > 1e-3
    assert correct(questions(ASSIGNMENT)[2])[0].startswith("都按位置 20")


def test_selfcheck_true_statements(chapter):
    assert chapter["moved"]["none"] < 1e-5  # A
    rng = np.random.default_rng(4)
    x, perm = rng.normal(size=(6, 8)), rng.permutation(6)
    plain = anp.scaled_dot_product_attention(x, x, x)[0]
    assert np.abs(anp.scaled_dot_product_attention(x[perm], x[perm], x[perm])[0] - plain[perm]).max() < 1e-12
    causal = anp.scaled_dot_product_attention(x, x, x, causal=True)[0]  # A's condition: with the mask it fails
    assert np.abs(anp.scaled_dot_product_attention(x[perm], x[perm], x[perm], causal=True)[0]
                  - causal[perm]).max() > 1e-3
    statement = questions(ASSIGNMENT)[3]["options"][0]
    assert "不带掩码" in statement["text"] and "检验过" in statement["why"] and "证明" not in statement["why"]
    table = anp.sinusoidal_positions(20, 16)
    gram = table @ table.T
    assert max(np.ptp(np.diagonal(gram, offset=k)) for k in range(20)) < 1e-12  # C
    slopes = -anp.alibi_bias(2, 2, 8)[:, 1, 0]
    assert len(set(slopes)) == 8  # D is false
    assert len(correct(questions(ASSIGNMENT)[3])) == 2


# --------------------------------------------------------------------------- the assignment

DELEGATING = {
    "rope": "def rope(x, positions=None, base=10000.0):\n    return anp.apply_rope(x, positions, base=base)\n",
    "alibi": "def alibi(n_q, n_k, n_heads):\n    return anp.alibi_bias(n_q, n_k, n_heads)\n",
}

NOISY_ALIBI = '''
import sys
import warnings


def alibi(n_q, n_k, n_heads):
    print("调试：n_heads =", n_heads, file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    slopes = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)
    t = np.arange(n_q) + (n_k - n_q)
    return -slopes[:, None, None] * np.abs(t[:, None] - np.arange(n_k))
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "rope_wrong_frequency", "alibi_top_left",
                                    "decode_positions_from_zero")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib behind the student's names: the rotation and the bias score 0
        "delegating": assignments.with_cells(source, DELEGATING),
        "mixed": assignments.with_cells(source, mixed),
        # a right bias that prints to stderr and warns
        "noisy": assignments.with_cells(source, {"alibi": NOISY_ALIBI}),
    }, {
        "delegating": [0, 0, 3],
        # each misses its exercise's point: capped at a third (the rotation, the bias), or under it (the step is
        # right only where the cache is empty: 1 of 8 checks)
        "mixed": [1, 2 / 3, 3 / 8],
        "noisy": [3, 2, 3],
    })  # 8 autograded + the written answer (2, by hand)


@pytest.mark.grading
def test_the_two_decoding_mistakes_get_their_own_hints():
    """Rotating the new tokens from position 0 and not rotating the new key are told apart where two new tokens enter
    at once (their output and the returned keys): Validate names each mistake, never the other one (for one new
    token, position 0 and "not rotated" coincide)."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    hints = {}
    for name in ("decode_positions_from_zero", "decode_key_not_rotated"):
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        hints[name] = (kept.diagnosis, execute(nb, replace=kept.cells, hidden=False)[1]["test_rope_decode_step"])
    (from_zero, shown_zero), (not_rotated, shown_unrotated) = hints.values()
    assert from_zero in shown_zero and not_rotated not in shown_zero
    assert not_rotated in shown_unrotated and from_zero not in shown_unrotated
    assert shown_zero.count(from_zero) == 3  # the steps' output, the two new positions' output and the returned keys
