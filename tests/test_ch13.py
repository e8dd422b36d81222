"""Chapter 13 (常见误区): every experiment's claim holds, and its exercise assignment grades as intended.

The lesson runs once (``chapters.lesson_fixture``); what every chapter meets is in ``test_chapters.py``.
"""

from __future__ import annotations

import os
import pathlib
import re

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, lesson_fixture

ROOT = pathlib.Path(__file__).resolve().parents[1]
ASSIGNMENT = "ch13-misconceptions"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def test_prose_covers_all_eight_misconceptions():
    text = CHAPTER.read_text(encoding="utf-8")
    headings = re.findall(r"^## 误区[一二三四五六七八]：", text, re.M)
    assert len(headings) == 8


@pytest.mark.cjk_font
def test_dot_product_and_cosine_rank_differently(chapter):
    assert chapter["dots"].argmax() != chapter["cosines"].argmax()
    scaled = chapter["anp"].attention_scores(chapter["q"], chapter["keys"])[0]
    assert scaled.argmax() == chapter["dots"].argmax()  # scaling keeps the dot product's ranking


@pytest.mark.cjk_font
def test_scaled_scores_are_not_normalised(chapter):
    scaled = chapter["scaled"]
    assert abs(scaled.var() - 1) < 0.1 and abs(chapter["raw"].var() - 64) < 6
    assert chapter["outside"] > 0.6 and scaled.min() < -2 and scaled.max() > 2


@pytest.mark.cjk_font
def test_larger_d_k_costs_time_and_memory(chapter):
    cost = chapter["cost"]
    assert cost[1024]["params"] == 16 * cost[64]["params"]
    assert cost[1024]["qkv_mib"] == pytest.approx(16 * cost[64]["qkv_mib"])
    assert cost[1024]["peak_mib"] > cost[256]["peak_mib"] > cost[64]["peak_mib"]
    assert cost[1024]["ms"] > cost[64]["ms"]


@pytest.mark.cjk_font
def test_highest_weight_is_not_the_most_influential(chapter):
    w, effect = chapter["w_all"][0], chapter["effect"]
    assert w.argmax() != effect.argmax()
    assert effect.argmin() == w.argmax()  # the prose: removing "苹果" changes the output least
    assert w.argmin() == effect.argmax()  # and removing the lowest-weight word changes it most


@pytest.mark.cjk_font
def test_q_k_v_differ_from_x_and_each_other(chapter):
    X, Q, K, V = (chapter[n] for n in "XQKV")
    assert Q.shape != X.shape and not np.allclose(Q, K) and not np.allclose(K, V)
    anp = chapter["anp"]
    s_same, s_proj = anp.attention_scores(X, X), anp.attention_scores(Q, K)
    assert np.allclose(s_same, s_same.T) and not np.allclose(s_proj, s_proj.T)
    assert (s_same.argmax(1) == np.arange(6)).all() and not (s_proj.argmax(1) == np.arange(6)).all()


@pytest.mark.cjk_font
def test_compression_and_amplification_are_measured_by_the_score_difference(chapter):
    anp = chapter["anp"]
    small, large, lifted = chapter["small"], chapter["large"], chapter["lifted"]
    for row in (small, large, lifted):
        w = anp.softmax(row)
        assert np.isclose(w[0] / w[1], np.exp(row[0] - row[1]))  # the weight ratio is e^delta, nothing else
    assert chapter["ratios"]["分数差 0.78"] < np.e < 1000 < chapter["ratios"]["分数差 7.8"]
    assert np.allclose(anp.softmax(small), [0.686, 0.314], atol=5e-4)
    # the share of the row total is no baseline: a shift moves it, the weights stay
    assert np.allclose(anp.softmax(small), anp.softmax(lifted))
    assert abs(small[0] / small.sum() - lifted[0] / lifted.sum()) > 0.4
    four = anp.softmax(np.array([0.83, 0.05, 0.30, 0.30]))
    assert np.allclose(four[:2], [0.38, 0.17], atol=0.005)  # the often-quoted pair needs two more keys


@pytest.mark.cjk_font
def test_gradient_vanishes_without_scaling(chapter):
    scaled, unscaled = np.array(chapter["grads"][True]), np.array(chapter["grads"][False])
    assert scaled.max() / scaled.min() < 1.5  # flat in d_k
    assert (np.diff(unscaled) < 0).all() and unscaled[-1] < 0.01 * scaled[-1]
    assert chapter["falls"] == sorted(chapter["falls"]) and chapter["falls"][0] > 2  # shrinking faster and faster


@pytest.mark.cjk_font
def test_heads_differ_unless_weights_are_shared(chapter):
    assert chapter["head_gap"](chapter["heads"]) > 0.3
    assert chapter["head_gap"](chapter["same"]) < 1e-12
    # the control shares one set of projections across heads, not one matrix across Q, K and V
    assert not np.allclose(chapter["shared_q"], chapter["shared_k"])
    assert not np.allclose(chapter["shared_k"], chapter["shared_v"])


# --------------------------------------------------------------------------- the assignment

@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    import nbformat

    samples = ROOT / "grading" / "samples" / ASSIGNMENT
    # per autograded cell: cosine 3, occlusion 3, backward 2 (the written answer is graded by hand)
    course, _ = assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        name: nbformat.read(samples / name / f"{ASSIGNMENT}.ipynb", as_version=4) for name in ("correct", "partial")
    }, {
        "correct": [3, 3, 2],
        # cosine without normalised keys passes 1 of 7 checks; the weights taken as the effect 1 of 6 (both miss
        # their exercise's point, and both stay under the cap of a third); the right gradient whose code emits a
        # warning keeps its 2 points
        "partial": [3 * 1 / 7, 0.5, 2],
    }, tol=1e-9)
    assert os.path.getsize(course.path("autograded", "partial", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")) > 0
