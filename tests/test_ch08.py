"""Chapter 8 (掩码、因果与交叉注意力): the lesson's claims hold, the self-check is right, the assignment grades.

The self-check's facts are checked with attnlib and torch, and the assignment is generated, submitted and
autograded by nbgrader.
"""

from __future__ import annotations

import math

import assignments
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, prose

from attnlib import numpy as anp

ASSIGNMENT = "ch08-masks"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    opening = body[:body.index("## 一个公式")]
    assert "{doc}`ch05-softmax`" in opening  # opens from chapter 5's masked softmax
    assert "一种常见的说法" in body  # the mask-inside-the-scaling formula, quoted and then checked


def test_chapter_7_is_linked_once_it_is_in_the_book_and_named_otherwise():
    """A {doc} link to a page missing from _toc.yml breaks the -W build (only the toc's pages are built)."""
    opening = prose(CHAPTER)[:300]
    if "file: book/ch07-parallel" in (ROOT / "_toc.yml").read_text(encoding="utf-8"):
        assert "{doc}`ch07-parallel`" in opening
    else:
        assert "第 7 章「并行计算」" in opening and "{doc}`ch07-parallel`" not in CHAPTER.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_one_formula_three_uses(chapter):
    w = chapter["weights"]
    enc, dec, cross = w["编码器自注意力"], w["解码器自注意力（因果）"], w["交叉注意力"]
    assert enc.shape == (5, 5) and dec.shape == (4, 4) and cross.shape == (4, 5)
    for m in (enc, dec, cross):
        assert np.allclose(m.sum(axis=-1), 1)
    assert (enc[:, 3:] == 0).all() and (enc[3:, :3] > 0).all()  # padding keys unread, padding queries still answer
    assert np.array_equal(dec > 0, np.tril(np.ones((4, 4), dtype=bool)))
    assert (cross[:, 3:] == 0).all() and (cross[:, :3] > 0).all()


@pytest.mark.cjk_font
def test_figure_has_three_labelled_panels_and_draws_without_warnings(chapter):
    fig = chapter["fig"]
    assert_draws_without_warnings(fig)  # e.g. a missing CJK glyph
    assert [ax.get_title() for ax in fig.axes] == list(chapter["uses"])
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == chapter["src"]
    assert [t.get_text() for t in fig.axes[2].get_yticklabels()] == chapter["tgt"]


@pytest.mark.cjk_font
def test_the_causal_mask_stops_the_future_from_leaking(chapter):
    leak, t = chapter["leak"], chapter["t"]
    assert (leak[True][:t] == 0).all() and (leak[True][t:] > 0).all()
    assert leak[False][:t].min() > 0.1  # glued as ch08_leak_unmasked: "至少变了 …"
    x, x_new = chapter["x"], chapter["x_new"]
    assert np.array_equal(x[:t], x_new[:t]) and not np.allclose(x[t:], x_new[t:])


@pytest.mark.cjk_font
def test_where_the_mask_goes(chapter):
    placement = chapter["placement"]
    assert placement["-inf 掩码"][0] == 0  # -inf / sqrt(d_k) is still -inf
    assert placement["有限偏置"][0] > 0.05  # a finite bias inside the scaling changes the weights
    assert max(p[1] for p in placement.values()) < 1e-12  # torch adds a float mask after the scaling


@pytest.mark.cjk_font
def test_zeroing_after_softmax_breaks_the_rows_and_leaks(chapter):
    zeroed, renormed, right = chapter["zeroed"], chapter["renormed"], chapter["right"]
    sums = zeroed.sum(axis=-1)
    assert (sums[:-1] < 0.99).all() and sums[-1] == pytest.approx(1)  # the last row has no future
    assert sums.min() < 0.5  # glued as ch08_zeroed_min_sum
    assert chapter["after_leak"] > 0.1
    assert np.allclose(renormed, right)  # renormalising equals masking first, in exact arithmetic


@pytest.mark.cjk_font
def test_renormalising_fails_where_the_masked_score_dominates(chapter):
    assert np.isnan(chapter["w_late"]).all()
    assert np.allclose(anp.softmax(chapter["row"], mask=chapter["keep"]), [0.26894142, 0.73105858, 0])
    # the glued thresholds: a gap above them underflows, one well below does not
    for dtype, threshold in ((np.float32, 103.3), (np.float16, 16.6)):
        assert -math.log(float(np.finfo(dtype).smallest_subnormal)) == pytest.approx(threshold, abs=0.1)
        keep = np.array([True, False])
        for gap, fails in ((threshold + 3, True), (threshold - 3, False)):
            with np.errstate(invalid="ignore"):
                w = anp.softmax(np.array([0.0, gap], dtype=dtype)) * keep
                w = w / w.sum()
            assert bool(np.isnan(w).all()) == fails, (dtype, gap)


@pytest.mark.cjk_font
def test_padding_masks_broadcast_and_empty_rows_give_zeros(chapter):
    assert chapter["pad"].shape == (3, 1, 5) and chapter["both"].shape == (3, 5, 5)
    both = chapter["both"]
    assert np.array_equal(both[1], anp.causal_mask(5) & (np.arange(5) < 3))
    w3, out3 = chapter["w3"], chapter["out3"]
    assert not w3[2].any() and not out3[2].any() and np.allclose(w3[:2].sum(axis=-1), 1)
    assert np.allclose(chapter["by_torch"], out3)
    assert np.isnan(chapter["naive"][2]).all()


@pytest.mark.cjk_font
def test_fewer_queries_than_keys_align_bottom_right(chapter):
    assert np.array_equal(anp.causal_mask(2, 5), [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    full, last2, top_left = chapter["full"], chapter["last2"], chapter["top_left"]
    assert np.allclose(last2, full[3:])
    assert np.abs(top_left - full[3:]).max() > 0.1
    assert np.allclose(chapter["torch_causal"], top_left)  # torch's is_causal aligns top-left


@pytest.mark.cjk_font
def test_the_two_torch_conventions(chapter):
    assert torch.allclose(chapter["flipped"], chapter["by_sdpa"])
    unflipped, w_unflipped = chapter["unflipped"], chapter["w_unflipped"]
    nan_rows = torch.isnan(unflipped).all(dim=-1)
    assert nan_rows[0].all() and nan_rows[1].tolist() == [False, False, False, True]
    assert (w_unflipped[1, 0, :3] == 0).all() and w_unflipped[1, 0, 3:].sum() == pytest.approx(1)


def test_a_large_finite_negative_is_not_minus_infinity():
    """The pitfall: -1e9 gives a fully masked row uniform weights, and is -inf in float16 anyway."""
    row = np.array([0.3, -1.2, 2.0])
    filled = anp.softmax(np.where(np.zeros(3, dtype=bool), row, -1e9))
    assert np.allclose(filled, 1 / 3)
    with np.errstate(over="ignore"):
        assert np.isneginf(np.float16(-1e9))


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_causal_alignment():
    mask = anp.causal_mask(2, 5)
    assert np.flatnonzero(mask[0]).tolist() == [0, 1, 2, 3] and mask[1].all()
    top_left = np.tril(np.ones((2, 5), dtype=bool))
    assert np.flatnonzero(top_left[0]).tolist() == [0] and np.flatnonzero(top_left[1]).tolist() == [0, 1]
    assert correct(questions(ASSIGNMENT)[0]) == ["键 0 到键 3"]


def test_selfcheck_zeroing_after_softmax():
    rng = np.random.default_rng(81)
    q, k, v = rng.normal(size=(3, 6, 4))
    causal = anp.causal_mask(6)
    right, w_right = anp.scaled_dot_product_attention(q, k, v, causal=True)
    w = anp.softmax(anp.attention_scores(q, k)) * causal
    assert (w.sum(axis=-1)[:-1] < 1 - 1e-3).all()  # A
    assert not np.allclose(w, w_right)  # B is wrong
    k2, v2 = k.copy(), v.copy()
    k2[5], v2[5] = rng.normal(size=4), rng.normal(size=4)
    w2 = anp.softmax(anp.attention_scores(q, k2)) * causal
    assert not np.allclose((w2 @ v2)[:5], (w @ v)[:5])  # C: the future leaks into earlier rows
    assert np.allclose(w / w.sum(axis=-1, keepdims=True), w_right)  # D
    assert np.allclose((w / w.sum(axis=-1, keepdims=True)) @ v, right)
    assert len(correct(questions(ASSIGNMENT)[1])) == 3


def test_selfcheck_torch_multihead_polarity():
    torch.manual_seed(0)
    d = 4
    mha = torch.nn.MultiheadAttention(d, 1, batch_first=True, dtype=torch.float64).eval()
    x = torch.randn(1, 5, d, dtype=torch.float64)
    allowed = torch.as_tensor(anp.causal_mask(5)) | torch.eye(5, dtype=torch.bool).roll(2, 1)  # not symmetric
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)

    def expected(bias):
        w = torch.softmax(q @ k.mT / math.sqrt(d) + bias, dim=-1)
        return mha.out_proj(w @ v)

    right = expected(torch.zeros(5, 5, dtype=torch.float64).masked_fill(~allowed, float("-inf")))
    with torch.no_grad():
        got = {m: mha(x, x, x, attn_mask=mask)[0] for m, mask in
               (("A", allowed), ("B", allowed.double()), ("C", allowed.T), ("D", ~allowed))}
        assert torch.allclose(got["D"], right)
        assert torch.allclose(got["B"], expected(allowed.double()))  # a float mask is added to the scores
        for wrong in "ABC":
            assert not torch.allclose(got[wrong], right, equal_nan=True), wrong
        with pytest.raises(RuntimeError):  # n_q != n_k: the transposed mask does not fit
            mha(x[:, :3], x, x, attn_mask=~torch.as_tensor(anp.causal_mask(3, 5)).T)
    assert correct(questions(ASSIGNMENT)[2]) == ["`~allowed`"]


def test_selfcheck_cross_attention_shapes():
    rng = np.random.default_rng(82)
    q, k, v = rng.normal(size=(3, 8)), rng.normal(size=(7, 8)), rng.normal(size=(7, 16))
    out, w = anp.scaled_dot_product_attention(q, k, v, mask=anp.padding_mask([5], 7)[0])
    assert w.shape == (3, 7) and out.shape == (3, 16) and (w[:, 5:] == 0).all()
    assert correct(questions(ASSIGNMENT)[3]) == [r"权重 $3\times7$，输出 $3\times16$"]


# --------------------------------------------------------------------------- the assignment

NOISY_ATTENTION = '''
import sys
import warnings


def masked_attention(q, k, v, mask=None, causal=False):
    print("调试：q 的形状", np.shape(q), file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    allowed = np.ones((n_q, n_k), dtype=bool)
    if mask is not None:
        allowed = allowed & np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & causal_mask(n_q, n_k)
    weights = anp.softmax(scores, mask=allowed)
    return weights @ v, weights
'''

DELEGATING_CROSS = '''
from attnlib import numpy as lib


def cross_attention(x_dec, memory, memory_lengths, w_q, w_k, w_v):
    mask = padding_mask(memory_lengths, memory.shape[-2])
    return lib.scaled_dot_product_attention(x_dec @ w_q, memory @ w_k, memory @ w_v, mask=mask)
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    top_left = assignments.wrong_cells(ASSIGNMENT, "top_left_causal")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # the top-left causal mask of np.tril, and a cross-attention that hands the work to attnlib
        "mixed": assignments.with_cells(source, top_left | {"cross_attention": DELEGATING_CROSS}),
        # a right masked_attention that prints to stderr and warns
        "noisy": assignments.with_cells(source, {"masked_attention": NOISY_ATTENTION}),
    }, {
        # top-left misses the point of the causal mask: essential checks fail, so the mask cell (3 of 8 pass), the
        # combined mask built on it (3 of 5: its visible n_q < n_k case is essential) and the attention cell (9 of
        # 16) keep a third; the delegation to attnlib scores 0
        "mixed": [2 / 3, 1, 1 / 3, 2 / 3, 0],
        "noisy": [2, 1, 1, 2, 2],
    })  # 8 autograded + the written answer (2, by hand)


def test_a_single_query_names_no_cause_the_flipped_offset_shares_with_inverted_polarity():
    """causal_mask(1, 6) is all True: a mask with True and False swapped and one whose offset has the wrong sign
    both give all False there, so that check names neither (the old fixed hint said "True 和 False 正好反了" to a
    function whose only mistake was the offset's sign); the visible causal_mask(2, 5) tells the two apart."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    printed = {}
    for name in ("offset_sign_flipped", "inverted_polarity"):
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        _, out = execute(nb, replace=kept.cells)
        lines = out["test_causal_mask"]
        single = lines.split("causal_mask(1, 6)")[1].split("✗")[0]  # the lines of the one-query check
        assert "提示" not in single, single
        printed[name] = lines.split("causal_mask(2, 5)")[1].split("✗")[0]
    assert "偏移的符号反了" in printed["offset_sign_flipped"] and "正好反了" not in printed["offset_sign_flipped"]
    assert "True 和 False 正好反了" in printed["inverted_polarity"]


def test_the_combined_mask_is_checked_visibly_with_fewer_queries_than_keys():
    """decoder_mask with causal_mask's two sizes swapped is right on a square input only: the visible
    n_q < n_k check catches it before hand-in and caps the cell at a third."""
    from nbrun import execute, read_kept, source_notebook

    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "decoder_swapped_arguments.py")
    scores, out = execute(source_notebook(ASSIGNMENT), replace=kept.cells, hidden=False)
    assert scores["test_decoder_mask"] == pytest.approx(1 / 3)
    assert "broadcast" in out["test_decoder_mask"] and "提示" not in out["test_decoder_mask"]
