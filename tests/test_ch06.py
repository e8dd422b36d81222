"""Chapter 6 (加权求和与完整公式): the lesson's claims hold, its self-check is right, its assignment grades."""

from __future__ import annotations

import math
import re

import assignments
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from chapters import BY_NAME, correct_indices, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, prose

from attnlib import numpy as anp

ASSIGNMENT = "ch06-attention"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    assert body.index("{doc}`ch05-softmax`") < 100  # opens from chapter 5
    assert body.count("一种常见的说法是") >= 2  # the (0,1) claim and the n x d_k claim, each then refuted
    assert "{doc}`ch10-efficiency`" in body  # the output-only path is taught there


def test_chapter_8_is_linked_once_it_is_in_the_book_and_named_otherwise():
    """A {doc} link to a page missing from _toc.yml breaks the -W build (only the toc's pages are built)."""
    text = CHAPTER.read_text(encoding="utf-8")
    if "file: book/ch08-masks" in (ROOT / "_toc.yml").read_text(encoding="utf-8"):
        assert "{doc}`ch08-masks`" in text
    else:
        assert "第 8 章「掩码、因果与交叉注意力」" in text and "{doc}`ch08-masks`" not in text


def test_the_toc_and_the_roadmap_list_this_chapter():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第二部分 完整的注意力")
    files = [c["file"] for c in part["chapters"]]
    assert {"file": "book/ch06-attention", "title": "6. 加权求和与完整公式"} == part["chapters"][0]
    assert files == sorted(files)  # 6, 7, 8, 9 in order
    captions = [p["caption"] for p in toc["parts"]]
    assert captions.index("第二部分 完整的注意力") == captions.index("第一部分 基础") + 1
    roadmap = next(line for line in (ROOT / "book" / "intro.md").read_text(encoding="utf-8").splitlines()
                   if line.startswith("- **第二部分"))
    assert "{doc}`ch06-attention`" in roadmap and "{doc}`ch07-parallel`" in roadmap


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_each_output_is_a_convex_combination_of_the_values(chapter):
    V, out, w = chapter["V"], chapter["out"], chapter["weights"]
    assert np.allclose(out, w @ V) and np.allclose(chapter["by_hand"], out)
    assert (w >= 0).all() and np.allclose(w.sum(axis=1), 1)
    assert chapter["inside_box"].all()
    # inside the triangle: barycentric coordinates of every output are the (non-negative) weights
    coords = np.linalg.solve(np.vstack([V.T, np.ones(3)]), np.vstack([out.T, np.ones(len(out))]))
    assert np.allclose(coords.T, w) and (coords >= 0).all()
    assert len(chapter["tokens"]) == 3 and V.shape == (3, 2)


@pytest.mark.cjk_font
def test_uniform_weights_give_the_mean_and_a_single_key_is_copied(chapter):
    V = chapter["V"]
    assert np.allclose(chapter["uniform_w"], 1 / 3) and np.allclose(chapter["uniform_out"][0], V.mean(axis=0))
    w = chapter["causal_w"]
    assert w[0, 0] == 1.0 and (w[0, 1:] == 0).all()  # exactly 1 and exactly 0: not "inside (0, 1)"
    assert (w[np.triu_indices(3, 1)] == 0).all()
    assert np.array_equal(chapter["causal_out"][0], V[0])


@pytest.mark.cjk_font
def test_a_fully_masked_row_outputs_zero_which_lies_outside_the_hull(chapter):
    V = chapter["V"]
    assert np.array_equal(chapter["empty_out"], np.zeros((1, 2)))
    assert (V.min(axis=0) > 0).all()  # the zero vector is outside the box, so outside the hull


@pytest.mark.cjk_font
def test_the_box_holds_for_any_number_of_keys_and_needs_the_denominator(chapter):
    many = chapter["many"]
    assert sorted(many) == [10, 100, 1000, 10000]
    for o, _raw, v in many.values():
        assert ((v.min(axis=0) <= o) & (o <= v.max(axis=0))).all()
    raw_size = [np.abs(raw).max() for _o, raw, _v in many.values()]
    assert raw_size[-1] > 50 * raw_size[0] and raw_size[-1] > 10 * max(np.abs(v).max() for *_, v in many.values())


@pytest.mark.cjk_font
def test_the_hull_figure_has_chinese_labels(chapter):
    fig = chapter["hull_fig"]
    assert_draws_without_warnings(fig)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "值向量的凸包" in labels and any("均值" in label for label in labels)
    assert re.search(r"[\u4e00-\u9fff]", ax.get_title())


@pytest.mark.cjk_font
def test_shapes_of_the_full_formula(chapter):
    assert chapter["a"].shape == (2, 5) and chapter["o"].shape == (2, 7)
    with pytest.raises(ValueError, match=r"\(5, 3\)") as info:
        anp.scaled_dot_product_attention(chapter["q"], chapter["k"], chapter["v"][:4])
    assert "(4, 7)" in str(info.value)


@pytest.mark.cjk_font
def test_the_two_demos_match_torch_and_read_as_the_prose_says(chapter):
    assert max(chapter["gaps"]) < 1e-12
    w1, out1 = chapter["w1"], chapter["out1"]
    assert w1[:, 2].min() > 0.5 and w1[:, 1].max() < 0.1  # everyone looks at 北京, nobody at 爱
    v1 = anp.qkv_projection(chapter["X1"], *chapter["W1"])[2]
    assert np.ptp(out1, axis=0).max() < 0.2 * np.ptp(v1, axis=0).max()  # the three outputs are close
    assert out1.shape == chapter["X1"].shape and chapter["W1"][2].shape == (4, 4)  # d_v = d_model here
    w2, out2, v2 = chapter["w2"], chapter["out2"], chapter["v2"]
    assert 0.2 < w2.min() and w2.max() < 0.3  # nearly uniform
    assert np.abs(anp.attention_scores(chapter["q2"], chapter["k2"])).max() < 0.2  # "分数几乎全是 0"
    assert chapter["mean_gap"] == np.abs(out2 - v2.mean(axis=0)).max() < 0.05 * np.ptp(v2, axis=0).max()
    left, right = chapter["demo_fig"].axes[:2]
    assert [t.get_text() for t in left.get_xticklabels()] == ["我", "爱", "北京"]
    assert [t.get_text() for t in right.get_yticklabels()] == chapter["four"]


def test_the_demos_draw_the_same_numbers_as_the_global_seed():
    """np.random.seed(s) then np.random.randn draws what np.random.RandomState(s).randn draws."""
    saved = np.random.get_state()  # noqa: NPY002 - the global state the demos used
    try:
        for seed, shapes in ((0, [(4, 4)] * 3), (42, [(4, 8)] + [(8, 4)] * 3)):
            np.random.seed(seed)  # noqa: NPY002
            by_global = [np.random.randn(*s) for s in shapes]  # noqa: NPY002
            draw = np.random.RandomState(seed)
            assert all(np.array_equal(a, draw.randn(*s)) for a, s in zip(by_global, shapes, strict=True))
    finally:
        np.random.set_state(saved)  # noqa: NPY002


@pytest.mark.cjk_font
def test_the_reference_reads_as_the_prose_explains(chapter):
    import inspect

    source = inspect.getsource(anp.scaled_dot_product_attention)
    for fragment in ("as_float_arrays", "check_qkv", "tiled_attention", "q * (1.0 / math.sqrt(d_k))",
                     "hide_future_", "softmax_(scores"):
        assert fragment in source
    q, k, v = chapter["qm"], chapter["km"], chapter["vm"]
    out, none = anp.scaled_dot_product_attention(q, k, v, need_weights=False)
    assert none is None and np.allclose(out, anp.scaled_dot_product_attention(q, k, v)[0])
    with pytest.raises(TypeError):
        anp.scaled_dot_product_attention(np.ones((2, 2), dtype=int), k[:2, :2], v[:2, :2])
    scores = np.zeros((3, 3))
    anp.attention.hide_future_(scores)
    assert np.array_equal(np.isinf(scores), ~anp.causal_mask(3))  # in place, the future becomes -inf


@pytest.mark.cjk_font
def test_scaling_q_first_keeps_float32_and_equals_scaling_the_scores(chapter):
    q32 = chapter["q32"]
    assert (q32 / np.sqrt(64)).dtype == np.float64 and (q32 * (1.0 / 8.0)).dtype == np.float32
    assert anp.scaled_dot_product_attention(q32, q32, q32)[0].dtype == np.float32
    q, k = chapter["qm"], chapter["km"]
    assert np.allclose((q * (1.0 / 8.0)) @ k.T, q @ k.T / 8.0)


@pytest.mark.cjk_font
def test_the_reference_allocates_one_score_matrix_and_the_formula_three(chapter):
    peaks, n, d = chapter["peaks"], chapter["n"], chapter["d"]
    assert peaks["anp.scaled_dot_product_attention"] < 1.5 < 2.5 < peaks["照公式直写"]
    # "多出的零头是输出和每行的最大值、和": the output is n x d, the rest a few vectors of length n
    extra = peaks["anp.scaled_dot_product_attention"] - 1
    assert d / n <= extra < d / n + 0.02


@pytest.mark.cjk_font
def test_the_two_mistakes_leave_the_box(chapter):
    mistakes = chapter["mistakes"]
    assert np.allclose(mistakes["正确：A @ V"], 1.0)
    for name in ("权重转置：A.T @ V", "按列 softmax"):
        o = mistakes[name]
        assert np.allclose(o, o[:, :1])  # every row a multiple of the common value vector
        assert np.abs(o - 1).max() > 0.1  # ... but not the vector itself: outside the box


def test_torch_masks_have_opposite_polarities():
    """F.scaled_dot_product_attention: True = may attend; nn.MultiheadAttention's attn_mask: True = may not."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, 4, generator=gen, dtype=torch.float64)
    allowed = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    got = F.scaled_dot_product_attention(x, x, x, attn_mask=allowed)
    want, _ = anp.scaled_dot_product_attention(x.numpy(), x.numpy(), x.numpy(), mask=allowed.numpy())
    assert np.allclose(got.numpy(), want)
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        _, w = mha(x, x, x, attn_mask=~allowed)  # inverted: True = may not attend
    assert (w[0][~allowed] == 0).all() and (w[0][allowed] > 0).all()


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_equal_scores_give_the_mean():
    v = np.array([[0.0, 3.0], [6.0, 0.0], [3.0, 6.0]])
    k = np.ones((3, 2))
    q = np.full((1, 2), 0.7 / math.sqrt(2))  # (q . k) / sqrt(2) = 0.7 for every key
    assert np.allclose(anp.attention_scores(q, k), 0.7 * np.ones(3))
    out, _ = anp.scaled_dot_product_attention(q, k, v)
    assert np.allclose(out[0], [3, 3])
    options = [o["text"] for o in questions(ASSIGNMENT)[0]["options"]]
    assert correct_indices(questions(ASSIGNMENT)[0]) == [1] and "(3, 3)" in options[1]
    assert "(9, 9)" in options[0] and np.allclose(v.sum(axis=0), 9)
    # the distractor is what the stated mistake gives: the scores used as weights
    assert "(6.3, 6.3)" in options[2] and np.allclose(0.7 * np.ones(3) @ v, 6.3)
    assert "0.7\\times(9, 9)" in questions(ASSIGNMENT)[0]["options"][2]["why"] and "(3, 6)" in options[3]


def test_selfcheck_shapes():
    rng = np.random.default_rng(1)
    out, w = anp.scaled_dot_product_attention(rng.normal(size=(3, 8)), rng.normal(size=(5, 8)),
                                              rng.normal(size=(5, 2)))
    assert w.shape == (3, 5) and out.shape == (3, 2)
    question = questions(ASSIGNMENT)[1]
    assert [question["options"][i]["text"] for i in correct_indices(question)] == [r"权重 $3\times5$，输出 $3\times2$"]


def test_selfcheck_properties_of_the_output():
    question = questions(ASSIGNMENT)[2]
    assert question["multi"] and correct_indices(question) == [0, 2]
    rng = np.random.default_rng(2)
    for _ in range(200):
        q, k, v = 3 * rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))  # n_q = n_k
        mask = rng.random((6, 6)) < 0.6
        mask[:, 0] = True  # at least one key per row
        out, _ = anp.scaled_dot_product_attention(q, k, v, mask=mask)
        assert ((v.min(axis=0) - 1e-12 <= out) & (out <= v.max(axis=0) + 1e-12)).all()  # A right
        assert (np.linalg.norm(out, axis=1) <= np.linalg.norm(v, axis=1).max() + 1e-12).all()  # B wrong
        causal_out, _ = anp.scaled_dot_product_attention(q, k, v, causal=True)
        assert np.array_equal(causal_out[0], v[0])  # C right
    empty, _ = anp.scaled_dot_product_attention(q, k, v, mask=np.zeros((6, 6), bool))
    assert np.array_equal(empty, np.zeros((6, 2)))  # D wrong for attnlib ...
    with np.errstate(all="ignore"):
        filled = anp.softmax(np.where(np.zeros((6, 6), bool), anp.attention_scores(q, k), -1e9))
    assert np.allclose(filled @ v, v.mean(axis=0))  # ... and the mean comes from a large negative fill


def test_selfcheck_why_q_is_scaled_first():
    question = questions(ASSIGNMENT)[3]
    assert correct_indices(question) == [3]
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(4, 64)), rng.normal(size=(100, 64))
    assert np.allclose((q * (1 / 8)) @ k.T, (q @ k.T) / 8)  # B: the same numbers
    assert q.size < (q @ k.T).size  # D: n_q d_k multiplications instead of n_q n_k
    q32 = q.astype(np.float32)
    assert (q32 / np.sqrt(64)).dtype == np.float64 and (q32 * (1 / math.sqrt(64))).dtype == np.float32
    w = anp.softmax(anp.attention_scores(q, k))
    assert np.allclose(w.sum(axis=1), 1)  # A: the rows sum to 1 whichever way the scaling is done


# --------------------------------------------------------------------------- the assignment

DELEGATION = '''from attnlib import numpy as lib


def scaled_dot_product_attention(q, k, v, mask=None):
    return lib.scaled_dot_product_attention(q, k, v, mask=mask)
'''

NOISY_GAPS = '''import sys
import warnings


def permutation_gaps(layer, x, perm):
    print("检查置换等变……", file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    x = np.asarray(x, dtype=float)
    perm = np.asarray(perm)
    out, weights = layer.forward(x)
    out_p, weights_p = layer.forward(x[perm])
    return float(np.abs(out_p - out[perm]).max()), float(np.abs(weights_p - weights[perm][:, perm]).max())
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    partial = assignments.wrong_cells(ASSIGNMENT, "weights_transposed", "reseeded_per_matrix",
                                      "weights_permuted_on_rows_only")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        "partial": assignments.with_cells(source, partial),
        "mixed": assignments.with_cells(source, {"scaled_dot_product_attention": DELEGATION,
                                                 "permutation_gaps": NOISY_GAPS}),
    }, {
        # A^T V: 8 of 21 checks pass (the pair, the example's four weight checks, the far-apart rows' weights, the
        # ValueError and its message: no output is right, and on non-square inputs A^T V raises), capped at a third
        # (its outputs are essential);
        # a class that reseeds for every matrix, on top of the transposed attention: 6 of 15, capped at a third
        # (the w_k draw is essential); weights permuted on their rows only: 2 of 7 (the list form and the untouched
        # input; the positions layer's gaps are checked by value), under the cap of a third
        "partial": [4 * (1 / 3), 2 * (1 / 3), 2 * 2 / 7],
        # the reference behind the student's name: 0, and the class that calls it keeps its draws, the
        # reproducibility check and d_v's default (8 of 15) but misses forward, so a third; a right answer that
        # prints to stderr and warns keeps its points
        "mixed": [0, 2 * (1 / 3), 2],
    })  # 8 autograded + the written answer (2, by hand)


@pytest.mark.grading
def test_the_max_shift_is_part_of_the_point_as_in_chapter_7():
    """Exercise 1 asks for scores in the thousands without nan, and its 本题要点 says so: an attention without the
    max shift is capped here as in chapter 7 (whose point says the same), by a visible check."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    point = next(c.source for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ex1_text")
    assert "分数上千时也不溢出" in point.split("**本题要点**")[1]
    kept = {ch: read_kept(ROOT / "grading" / "wrong" / ch / "no_max_shift.py") for ch in (ASSIGNMENT, "ch07-parallel")}
    assert {k.severity for k in kept.values()} == {"essential"}
    scores, out = execute(nb, replace=kept[ASSIGNMENT].cells, hidden=False)
    assert scores["test_sdpa"] == pytest.approx(4 / 3) and "个 NaN（期望里没有）" in out["test_sdpa"]
