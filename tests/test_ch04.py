"""Chapter 4 (缩放因子 √d_k): the lesson's claims hold, its self-check is right, its assignment grades as intended.

Tolerances on measurements come from their sampling error: the sample variance of n Gaussian dot products has
a relative standard error of sqrt((2 + 6/d_k)/n), a fraction measured on n samples a standard error of sqrt(p
(1 - p) / n).
"""

from __future__ import annotations

import math

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import prose

from attnlib import numpy as anp

ASSIGNMENT = "ch04-scaling"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    assert body.index("{doc}`ch03-scores`") < 300  # opens from chapter 3
    assert "一种常见的说法是" in body  # the percentage-scale claim is quoted as a common statement, then refuted


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_measured_variance_follows_d_k_within_its_sampling_error(chapter):
    dims, var_raw, var_scaled, rel_se = chapter["dims"], chapter["var_raw"], chapter["var_scaled"], chapter["rel_se"]
    assert list(dims) == [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert np.allclose(rel_se, np.sqrt((2 + 6 / dims) / chapter["n_samples"]))
    assert (np.abs(var_raw / dims - 1) < 4 * rel_se).all()
    assert (np.abs(var_scaled - 1) < 4 * rel_se).all()
    assert np.allclose(var_scaled, var_raw / dims)  # the same samples, divided by sqrt(d_k)
    assert chapter["rel_se"][-1] == pytest.approx(0.014, abs=0.001)  # "约 1.4%"


@pytest.mark.cjk_font
def test_the_variance_needs_no_normal_distribution(chapter):
    """Uniform components on [-sqrt 3, sqrt 3]: E[y^4] = (9/5)^2 per product, so Var(X^2) = 2 d^2 + 0.24 d."""
    d, n = chapter["d_u"], chapter["n_u"]
    assert chapter["q_u"].var() == pytest.approx(1, abs=0.01)
    assert abs(chapter["var_uniform"] / d - 1) < 5 * math.sqrt((2 + 0.24 / d) / n)


@pytest.mark.cjk_font
def test_unscaled_softmax_saturates_and_scaled_does_not(chapter):
    raw, scaled, n_k = chapter["raw_sat"], chapter["scaled_sat"], chapter["n_k"]
    raw_max, raw_h = np.array(raw["max"]), np.array(raw["entropy"])
    scaled_max, scaled_h = np.array(scaled["max"]), np.array(scaled["entropy"])
    assert raw_max[0] < 0.5 and raw_max[-1] > 0.9 and raw_h[-1] < 0.2 < 1.5 < raw_h[0]
    assert np.corrcoef(np.log(chapter["dims"]), raw_h)[0, 1] < -0.9  # falls steadily with d_k
    assert np.ptp(scaled_max) < 0.1 and np.ptp(scaled_h) < 0.3  # flat in d_k
    assert (scaled_h < math.log(n_k)).all() and scaled_h.min() > 2.0


@pytest.mark.cjk_font
def test_gradient_vanishes_without_scaling(chapter):
    scaled, raw = chapter["grad_scaled"], chapter["grad_raw"]
    assert scaled.max() / scaled.min() < 1.5
    assert raw[0] == pytest.approx(scaled[0], rel=0.2)  # "d_k 小的时候两者相近"
    assert raw[-1] < 1e-3 * scaled[-1] and np.log10(scaled[-1] / raw[-1]) > 3
    assert (np.diff(raw[1:]) < 0).all()


@pytest.mark.cjk_font
def test_scaled_scores_are_not_normalised(chapter):
    dots, outside, theory = chapter["scaled_dots"], chapter["outside"], chapter["normal_outside"]
    n = dots.size
    assert theory == pytest.approx(0.5 + 0.5 * (1 - math.erf(1 / math.sqrt(2))))
    assert abs(outside - theory) < 4 * math.sqrt(theory * (1 - theory) / n)
    assert abs(dots.var() - 1) < 4 * math.sqrt((2 + 6 / 64) / n)
    assert dots.min() < -3 and dots.max() > 3
    row = chapter["row"]
    assert (row < 0).any() and not math.isclose(row.sum(), 1.0, abs_tol=0.05)


@pytest.mark.cjk_font
def test_non_unit_components_leave_their_variance_after_scaling(chapter):
    n = chapter["n_samples"]
    for d in (16, 64, 256):
        raw = anp.dot_product_variance(d, n, std_q=2.0, std_k=1.5)
        scaled = anp.dot_product_variance(d, n, std_q=2.0, std_k=1.5, scale=True)
        assert abs(raw / (9 * d) - 1) < 5 * math.sqrt((2 + 6 / d) / n)
        assert scaled == pytest.approx(raw / d)
    assert chapter["scaled"] == pytest.approx(9, rel=0.05)  # glued as ch04_var_sigma_scaled


@pytest.mark.cjk_font
def test_initialisation_sets_the_scale_of_the_components(chapter):
    init = chapter["init"]
    good_q, good_s = init["元素方差 1/d_model"]
    bad_q, bad_s = init["元素方差 1"]
    assert abs(good_q - 1) < 0.2 and abs(good_s - 1) < 0.2
    assert bad_q > 0.8 * 64 and bad_s > 0.8 * 64**2


@pytest.mark.cjk_font
def test_dividing_by_d_k_flattens_the_weights():
    """The pitfall's claim, on its own numbers: /d_k gives nearly uniform rows, /sqrt(d_k) does not."""
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((256, 256)), rng.standard_normal((16, 256))
    h_sqrt = anp.weight_entropy(anp.softmax(anp.attention_scores(q, k, scale=1 / 16))).mean()
    h_d = anp.weight_entropy(anp.softmax(anp.attention_scores(q, k, scale=1 / 256))).mean()
    assert math.log(16) - h_d < 0.01 < 0.3 < math.log(16) - h_sqrt


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_standard_deviation_at_256():
    n = 20_000
    v = anp.dot_product_variance(256, n, seed=5)
    assert abs(math.sqrt(v) / 16 - 1) < 5 * 0.5 * math.sqrt((2 + 6 / 256) / n)  # the sd's relative error is half
    assert math.sqrt(anp.dot_product_variance(256, n, seed=5, scale=1 / 256)) == pytest.approx(math.sqrt(v) / 256)
    assert correct(questions(ASSIGNMENT)[0]) == ["16"]


def test_selfcheck_non_unit_components():
    n = 20_000
    v = anp.dot_product_variance(64, n, std_q=2.0, std_k=2.0, scale=True, seed=6)
    assert abs(v / 16 - 1) < 5 * math.sqrt((2 + 6 / 64) / n)
    assert correct(questions(ASSIGNMENT)[1]) == ["16"]


def test_selfcheck_what_scaling_does():
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((64, 64)), rng.standard_normal((32, 64))
    raw, scaled = anp.attention_scores(q, k, scale=False), anp.attention_scores(q, k)
    assert np.array_equal(raw.argsort(-1), scaled.argsort(-1))  # same ranking in every row
    assert not np.allclose(scaled.sum(-1), 1)
    outside = np.mean((scaled < 0) | (scaled > 1))
    assert abs(outside - 2 / 3) < 0.05
    u = rng.standard_normal((64, 32))
    g_small = np.median(anp.softmax_grad_norm(raw[:, :] * 0.25, u))  # as if d_k were 4
    g_large = np.median(anp.softmax_grad_norm(raw * 4, u))  # as if d_k were 1024
    assert g_large < 0.1 * g_small
    assert len(correct(questions(ASSIGNMENT)[2])) == 3


# --------------------------------------------------------------------------- the assignment

@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    model = assignments.model_cells(ASSIGNMENT)
    mixed = {
        "dot_product_variance": assignments.wrong_cells(ASSIGNMENT, "variance_over_the_wrong_axis")[
            "dot_product_variance"],
        # the reference through the module: caught by the static check
        "scaled_scores": "from attnlib import numpy as lib\n\n\n"
                         "def scaled_scores(q, k):\n    return lib.attention_scores(q, k)\n",
        # right, but prints to stderr: the points are kept
        "row_entropy": "import sys\n\n" + model["row_entropy"].replace(
            "    w = np.asarray(weights, dtype=float)",
            '    print("计算熵……", file=sys.stderr)\n    w = np.asarray(weights, dtype=float)', 1),
    }
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {"mixed": assignments.with_cells(blank, mixed)}, {
        # the variance over the wrong axis passes "a float", "seeded" and the two seed checks of the hidden part
        # (4 of 8), but misses the essential variance checks: a third of 3; the reference gives 0; the noisy but
        # right entropy keeps its 3 points
        "mixed": [1, 0, 3],
    }, tol=1e-9)  # 8 autograded + the written answer (2, by hand)


SIGN_FLIPPED = '''
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    return np.sum(w * np.log(np.where(w > 0, w, 1.0)), axis=-1)
'''


@pytest.mark.grading
def test_only_an_entropy_of_the_opposite_sign_is_told_so():
    """The sign sentence is the model of a result equal to -H: a 0 ln 0 guard whose np.where branches are swapped
    gives 0 (and nan), not -H, so its feedback names no cause (the old rule told it "熵是负的")."""
    from nbrun import ROOT, execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    swapped = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "where_branches_swapped.py")
    _, out = execute(nb, replace=swapped.cells, hidden=False)
    assert "提示" not in out["test_row_entropy"] and "实际 -0" in out["test_row_entropy"]
    _, out = execute(nb, replace={"row_entropy": SIGN_FLIPPED}, hidden=False)
    assert out["test_row_entropy"].count("结果正好是熵的相反数") == 4  # the four visible checks: none is all zero
