"""Chapter 2 (Q、K、V 与输入投影): every claim of the lesson holds, and its assignment grades as intended."""

from __future__ import annotations

import pathlib

import assignments
import numpy as np
import pytest
import torch
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import assert_draws_without_warnings, prose

from attnlib import numpy as anp

ROOT = pathlib.Path(__file__).resolve().parents[1]
ASSIGNMENT = "ch02-qkv"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page itself

def test_page_has_the_planned_parts_and_length():
    text = CHAPTER.read_text(encoding="utf-8")
    assert text.index("{doc}`ch01-pipeline`") < text.index("## 三个角色")  # opens from chapter 1
    for heading in ("## 三个角色", "## 为什么要三个不同的投影", "## 参数量"):
        assert heading in text, heading
    body = prose(CHAPTER)
    assert body.count("图书馆") == 1  # the metaphor, once


# --------------------------------------------------------------------------- the claims of the prose

@pytest.mark.cjk_font
def test_a_longer_query_sharpens_the_weights_without_changing_its_direction(chapter):
    Q, K = chapter["Q"], chapter["K"]
    rows = [anp.softmax(anp.attention_scores(c * Q[:1], K))[0] for c in (1, 2, 4)]
    maxima = [w.max() for w in rows]
    assert maxima == sorted(maxima) and maxima[-1] - maxima[0] > 0.3
    assert len({int(w.argmax()) for w in rows}) == 1
    assert np.isclose(chapter["w1"].max(), maxima[0]) and np.isclose(chapter["w4"].max(), maxima[-1])
    assert (rows[0] > 0).all()  # nothing is "retrieved": every value takes part


@pytest.mark.cjk_font
def test_shapes_and_a_value_width_of_its_own(chapter):
    n, d_k, d_v = 6, 4, 5
    assert chapter["X"].shape == (n, 8)
    assert chapter["Q"].shape == chapter["K"].shape == (n, d_k) and chapter["V"].shape == (n, d_v)
    assert chapter["weights"].shape == (n, n) and chapter["out"].shape == (n, d_v)
    assert len({n, d_k, d_v}) == 3  # every width distinct, so the shapes printed tell them apart
    with pytest.raises(ValueError, match=r"\(8, 3\)") as info:
        anp.qkv_projection(chapter["X"], chapter["W_q"], chapter["W_k"][:, :3], chapter["W_v"])
    assert "(8, 4)" in str(info.value)


@pytest.mark.cjk_font
def test_rows_are_projected_independently_with_the_same_matrices(chapter):
    X, W_q = chapter["X"], chapter["W_q"]
    perm = np.random.default_rng(0).permutation(6)
    q_perm = anp.qkv_projection(X[perm], W_q, W_q, W_q)[0]
    assert np.allclose(q_perm, chapter["Q"][perm])


@pytest.mark.cjk_font
def test_a_shared_projection_makes_the_scores_symmetric_not_the_weights(chapter):
    S_same, S_sep, A_same = chapter["S_same"], chapter["S_sep"], chapter["A_same"]
    assert np.allclose(S_same, S_same.T) and not np.allclose(S_sep, S_sep.T)
    assert not np.allclose(A_same, A_same.T)  # row normalisation breaks the symmetry of the weights
    assert np.allclose(np.diag(S_same) * 2.0, (chapter["Q_same"] ** 2).sum(axis=1))  # |q_i|^2 / sqrt(d_k) * 2
    diag_top = chapter["diag_top"]
    assert diag_top == np.mean(S_same.argmax(axis=1) == np.arange(6)) and 0 < diag_top < 1
    assert diag_top > np.mean(S_sep.argmax(axis=1) == np.arange(6))


def test_the_diagonal_often_wins_with_a_shared_projection():
    """The prose's "往往": over many random sentences the diagonal is the row maximum far above chance."""
    rng = np.random.default_rng(11)
    wins = []
    for _ in range(200):
        x, w = rng.normal(size=(6, 8)), rng.normal(size=(8, 4))
        s = anp.attention_scores(*anp.qkv_projection(x, w, w, w)[:2])
        wins.append(np.mean(s.argmax(axis=1) == np.arange(6)))
    assert np.mean(wins) > 3 / 6 > 1 / 6  # chance would be 1/6


@pytest.mark.cjk_font
def test_figure_has_two_labelled_score_matrices(chapter):
    fig = chapter["fig"]
    assert_draws_without_warnings(fig)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("共用投影") and titles[1].startswith("三个独立的投影")
    assert all("（6×6）" in t for t in titles)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == chapter["tokens"]


@pytest.mark.cjk_font
def test_parameter_count_matches_torch_linear_layers(chapter):
    assert chapter["by_formula"] == 2 * 512 * 64 + 512 * 64 == 98304
    assert chapter["in_torch"] == 98304 + 64 + 64 + 64
    linear = chapter["layers"][0]
    assert tuple(linear.weight.shape) == (64, 512)
    x = torch.randn(3, 512)
    assert torch.allclose(linear(x), x @ linear.weight.T + linear.bias, atol=1e-5)  # x @ W.T + b


@pytest.mark.cjk_font
def test_the_class_is_reproducible_and_leaves_the_global_state_alone(chapter):
    SelfAttention = chapter["SelfAttention"]
    before = np.random.get_state()  # noqa: NPY002 - the global state the class must leave alone
    a, b = SelfAttention(8, 4, 5, seed=0), SelfAttention(8, 4, 5, seed=0)
    after = np.random.get_state()  # noqa: NPY002
    assert np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    assert all(np.array_equal(getattr(a, w), getattr(b, w)) for w in ("w_q", "w_k", "w_v"))
    assert not np.allclose(a.w_q, a.w_k)
    assert a.n_parameters() == chapter["layer"].n_parameters() == 2 * 8 * 4 + 8 * 5
    for n in (3, 300):  # the same parameters, whatever the length
        out, w = a.forward(np.random.default_rng(n).normal(size=(n, 8)))
        assert out.shape == (n, 5) and w.shape == (n, n)


@pytest.mark.cjk_font
def test_a_fixed_0_1_scale_is_wrong_at_both_ends(chapter):
    init, n = chapter["init"], chapter["n"]
    assert init[8, "乘以 0.1"][1] < 1.5 / n  # next to uniform: attention tells nothing apart
    assert init[512, "乘以 0.1"][0] > 5 and init[512, "乘以 0.1"][1] > 0.5  # saturated
    for d in (8, 64, 512):
        assert 0.7 < init[d, "1/√d_model"][0] < 1.3  # "都在 1 附近"
        assert 0.5 < init[d, "乘以 0.1"][0] / (d * 0.1**2) < 2  # about d_model * sigma^2, as the prose derives


def test_reseeding_for_every_matrix_makes_w_q_equal_w_k():
    w_q = np.random.default_rng(4).normal(size=(8, 4))
    w_k = np.random.default_rng(4).normal(size=(8, 4))
    assert np.array_equal(w_q, w_k)


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_query_is_a_vector_not_a_search():
    assert correct(questions(ASSIGNMENT)[0])[0].startswith("它是一个向量")
    rng = np.random.default_rng(5)
    x, w_q, w_k, w_v = rng.normal(size=(5, 6)), *rng.normal(size=(3, 6, 3))
    q, k, v = anp.qkv_projection(x, w_q, w_k, w_v)
    out, w = anp.scaled_dot_product_attention(q, k, v)
    assert (w > 0).all() and not any(np.allclose(out[i], v[w[i].argmax()]) for i in range(5))  # B wrong
    w2 = anp.softmax(anp.attention_scores(2 * q, k))
    assert not np.allclose(w, w2)  # C wrong
    assert q.shape != x.shape  # D wrong


def test_selfcheck_parameter_count():
    q = questions(ASSIGNMENT)[1]
    numbers = [int(o["text"].replace(",", "")) for o in q["options"] if o["text"][0].isdigit()]
    assert [int(t.replace(",", "")) for t in correct(q)] == [81920] and len(numbers) == 3
    layers = [torch.nn.Linear(512, d, bias=False) for d in (64, 64, 32)]
    assert sum(p.numel() for layer in layers for p in layer.parameters()) == 81920
    assert 3 * 512 * 64 in numbers  # W_V taken as 512 x 64: wrong
    assert 81920 + 64 + 64 + 32 in numbers  # with the biases: wrong


def test_selfcheck_shared_projection():
    assert correct(questions(ASSIGNMENT)[2]) == [r"分数矩阵 $QK^{\top}$ 是对称矩阵"]
    rng = np.random.default_rng(6)
    found_off_diagonal = False
    for _ in range(50):
        x, w, w_v = rng.normal(size=(5, 6)), rng.normal(size=(6, 3)), rng.normal(size=(6, 4))
        q, k, v = anp.qkv_projection(x, w, w, w_v)
        s = anp.attention_scores(q, k)
        out, a = anp.scaled_dot_product_attention(q, k, v)
        assert np.allclose(s, s.T) and not np.allclose(a, a.T) and out.shape != x.shape
        found_off_diagonal |= bool((s.argmax(axis=1) != np.arange(5)).any())
    assert found_off_diagonal  # C is not "always"


def test_selfcheck_shapes():
    q = questions(ASSIGNMENT)[3]
    assert q["multi"] and sorted(correct(q)) == sorted(["$d_v$ 可以不等于 $d_k$", "注意力输出的列数等于 $d_v$"])
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 8))
    q_, k_, v_ = anp.qkv_projection(x, rng.normal(size=(8, 3)), rng.normal(size=(8, 3)), rng.normal(size=(8, 7)))
    assert anp.scaled_dot_product_attention(q_, k_, v_)[0].shape == (4, 7)
    with pytest.raises(ValueError):
        anp.qkv_projection(x, rng.normal(size=(8, 3)), rng.normal(size=(8, 2)), rng.normal(size=(8, 7)))


# --------------------------------------------------------------------------- the assignment

NOISY_COUNT = '''
import sys
import warnings


def count_parameters(d_model, d_k, d_v=None, *, bias=False):
    print("调试：d_model =", d_model, file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    d_v = d_k if d_v is None else d_v
    return d_model * (2 * d_k + d_v) + (2 * d_k + d_v if bias else 0)
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    partial = assignments.wrong_cells(ASSIGNMENT, "only_two_dimensions", "times_0_1", "values_counted_with_d_k")
    # per autograded cell: projection 2, class 4, count 2 (the written answer is graded by hand)
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        "partial": assignments.with_cells(source, partial),
        "noisy": assignments.with_cells(source, {"count_parameters": NOISY_COUNT}),
    }, {
        # each misses its exercise's point, so an essential check caps its cell at a third: a projection
        # for one sentence only (10 of 16 checks, the batch fails); with it, a class drawn at "times 0.1"
        # (7 of 16: the exact draws, the scale and the batch forward fail); W_V counted as d_model x d_k
        # (4 of 8)
        "partial": [2 / 3, 4 / 3, 2 / 3],
        # a right count whose code prints to stderr and warns keeps its points
        "noisy": [2, 4, 2],
    })
