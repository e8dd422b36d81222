"""Chapter 3 (点积相似度与注意力分数): the lesson's claims, its self-check and its assignment's grading."""

from __future__ import annotations

import math

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT

from attnlib import numpy as anp

ASSIGNMENT = "ch03-scores"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    text = CHAPTER.read_text(encoding="utf-8")
    assert "{doc}`ch05-softmax`" in text


def test_chapter_2_is_linked_once_it_is_in_the_book_and_named_otherwise():
    """A {doc} link to a page missing from _toc.yml breaks the -W build (only the toc's pages are built)."""
    text = CHAPTER.read_text(encoding="utf-8")
    if "file: book/ch02-qkv" in (ROOT / "_toc.yml").read_text(encoding="utf-8"):
        assert "{doc}`ch02-qkv`" in text
    else:
        assert "第 2 章「Q、K、V 与输入投影」" in text and "{doc}`ch02-qkv`" not in text


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_the_worked_dot_product(chapter):
    q, k = chapter["q"], chapter["k"]
    assert chapter["s"][0, 0] == pytest.approx(0.5) == float(np.sum(q * k))
    assert (q * k < 0).any() and (q * k > 0).any()  # "有正有负，相加时一部分互相抵消"


@pytest.mark.cjk_font
def test_dot_product_is_lengths_times_cosine(chapter):
    assert chapter["q2"] @ chapter["k2"] == pytest.approx(2.0 * 3.0 * math.cos(math.radians(60)))


@pytest.mark.cjk_font
def test_a_longer_key_scores_higher_only_when_the_angle_is_acute(chapter):
    by_angle = chapter["by_angle"]
    assert (np.diff(by_angle[30]) > 0).all()
    assert np.allclose(by_angle[90], 0, atol=1e-12)
    assert (np.diff(by_angle[150]) < 0).all() and (by_angle[150] < 0).all()
    assert by_angle[150][-1] == pytest.approx(4 * by_angle[150][0])


@pytest.mark.cjk_font
def test_the_query_length_keeps_the_ranking_and_sharpens_the_weights(chapter):
    anp_, q, keys = chapter["anp"], chapter["unit_q"], chapter["some_keys"]
    rows = [anp_.attention_scores(c * q[None, :], keys, scale=False)[0] for c in (1.0, 3.0)]
    assert np.array_equal(np.argsort(-rows[0]), np.argsort(-rows[1]))
    assert anp_.softmax(rows[1]).max() > anp_.softmax(rows[0]).max() + 0.2


@pytest.mark.cjk_font
def test_dot_product_and_cosine_rank_the_keys_differently(chapter):
    names, rank_dot, rank_cos = chapter["names"], chapter["rank_dot"], chapter["rank_cos"]
    assert names[rank_dot[0]] == "B" and names[rank_cos[0]] == "A"
    assert names[rank_dot[-1]] == names[rank_cos[-1]] == "C"  # the longest key, pointing away, is last in both
    keys = chapter["keys"]
    assert np.linalg.norm(keys[2]) > np.linalg.norm(keys[0]) and chapter["cosines"][2] < 0
    assert chapter["cosines"][1] == pytest.approx(math.cos(math.radians(45)))  # "键 B 偏了 45°"
    assert chapter["cosines"][0] > 0.9 and np.linalg.norm(keys[1]) > 2.5 * np.linalg.norm(keys[0])


@pytest.mark.cjk_font
def test_three_forms_agree_and_do_the_same_multiply_adds(chapter):
    n_q, n_k, d_k = chapter["n_q"], chapter["n_k"], chapter["d_k"]
    assert np.allclose(chapter["S_two"], chapter["S_mat"]) and np.allclose(chapter["S_one"], chapter["S_mat"])
    assert chapter["count_two"] == chapter["count_one"] == chapter["count_mat"] == n_q * n_k * d_k == 1_048_576


@pytest.mark.cjk_font
def test_the_python_loops_are_far_slower_than_one_matrix_product(chapter):
    """A gap of two orders of magnitude on any machine; only a 10x margin is required here."""
    timing = chapter["timing"]
    assert timing["两层循环"] > 10 * timing["矩阵乘法"]
    assert timing["两层循环"] > 10 * timing["一层循环"]


@pytest.mark.cjk_font
def test_the_score_matrix_reads_by_rows_and_is_not_symmetric(chapter):
    S, Q, K, tokens = chapter["S"], chapter["Q"], chapter["K"], chapter["tokens"]
    assert S.shape == (5, 5) and not np.allclose(S, S.T)
    for i in range(5):
        assert np.allclose(S[i], [Q[i] @ K[j] for j in range(5)])  # row i = query i against every key
    assert chapter["anp"].attention_scores(Q[:3], K, scale=False).shape == (3, 5)
    assert tokens[S[1].argmax()] == "猫"


@pytest.mark.cjk_font
def test_the_pitfalls_are_real(chapter):
    q_sq, k_sq = chapter["q_sq"], chapter["k_sq"]
    right = anp.attention_scores(q_sq, k_sq, scale=False)
    assert np.allclose(q_sq @ k_sq.T, right) and not np.allclose(q_sq @ k_sq, right)
    assert chapter["kb"].T.shape == (4, 5, 2)
    for d, std in chapter["spread"].items():  # the spread of the scores is about sqrt(d_k)
        assert abs(std / math.sqrt(d) - 1) < 0.1, (d, std)


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_stretching_a_key():
    q, k = np.array([[1.0, 2.0]]), np.array([[0.5, 1.0], [-1.0, -0.5], [2.0, -1.0]])
    before, after = (anp.attention_scores(q, c * k, scale=False)[0] for c in (1, 3))
    assert np.allclose(after, 3 * before) and not np.allclose(after, 9 * before)
    assert after[0] > before[0] > 0 and after[1] < before[1] < 0 and after[2] == before[2] == 0
    assert "变成原来的 3 倍" in correct(questions(ASSIGNMENT)[0])[0]


def test_selfcheck_ranking_example():
    q, keys = np.array([[3.0, 4.0]]), np.array([[0.6, 0.8], [4.0, 0.0]])
    dots, cos = anp.attention_scores(q, keys, scale=False)[0], anp.cosine_scores(q, keys)[0]
    assert np.allclose(dots, [5.0, 12.0]) and np.allclose(cos, [1.0, 0.6])
    assert np.array_equal(np.argsort(-anp.attention_scores(10 * q, keys, scale=False)[0]), np.argsort(-dots))
    assert np.array_equal(np.argsort(-anp.attention_scores(q, keys)[0]), np.argsort(-dots))  # scaled: still B first
    assert len(correct(questions(ASSIGNMENT)[1])) == 2


def test_selfcheck_multiply_adds_and_shapes():
    assert 100 * 200 * 64 == 1_280_000 and "1\\,280\\,000" in correct(questions(ASSIGNMENT)[2])[0]
    q, k = np.zeros((2, 8, 10, 64)), np.zeros((2, 8, 12, 64))
    assert anp.attention_scores(q, k).shape == (2, 8, 10, 12) and k.T.shape == (64, 12, 8, 2)
    with pytest.raises(ValueError):
        q @ k.T  # noqa: B018 - the option's claim: it does not even run
    assert correct(questions(ASSIGNMENT)[3]) == ["$(2, 8, 10, 12)$"]


# --------------------------------------------------------------------------- the assignment

@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    model = assignments.model_cells(ASSIGNMENT)
    mixed = {
        "scores_double_loop": model["scores_double_loop"],
        "scores_one_loop": assignments.wrong_cells(ASSIGNMENT, "one_loop_over_keys_as_rows")["scores_one_loop"],
        # the reference under another name: found however it is bound
        "scores_matrix": "from attnlib.numpy import attention_scores as dots\n\n\n"
                         "def scores_matrix(q, k):\n    return dots(q, k, scale=False)\n",
        # right, but noisy: a warning on stderr must not cost the points
        "rank_keys": "import warnings\n\n" + model["rank_keys"].replace(
            '    q = np.asarray(q, dtype=float)', '    warnings.warn("排名中")\n    q = np.asarray(q, dtype=float)', 1),
    }
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {"mixed": assignments.with_cells(blank, mixed)}, {
        # the transposed one-loop form passes 2 of 6 checks (one loop, the ValueError); the reference scores 0
        "mixed": [2, 2 / 3, 0, 2],
    }, tol=1e-9)  # 8 autograded + the written answer (2, by hand)
