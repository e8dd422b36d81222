"""Chapter 7 (并行计算): the lesson's claims hold, its self-check is right, its assignment grades as intended.

Timings are only compared where the gap between the quantities is large (a factor of several), never against
one machine's numbers.
"""

from __future__ import annotations

import re

import assignments
import numpy as np
import pytest
import torch
import yaml
from chapters import BY_NAME, correct_indices, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, prose, section
from torch.utils.flop_counter import FlopCounterMode

from attnlib import numpy as anp
from attnlib import torch as att

ASSIGNMENT = "ch07-parallel"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _multiply_adds(f, *arrays) -> int:
    with FlopCounterMode(display=False) as counter:
        f(*(torch.as_tensor(a) for a in arrays))
    return counter.get_total_flops() // 2


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    assert body.index("{doc}`ch06-attention`") < 100  # opens from chapter 6
    assert "一种常见的说法是" in body  # the claim about the cost, quoted, then corrected
    measured = section(body, "测量：用时随 $n$ 的变化")
    assert "threadpool_limits(1)" in measured and "没有在 GPU 上测量" in measured
    assert "{glue:text}`ch07_cpus`" in measured  # the machine's cores are glued, never typed
    assert "本书没有在 GPU 上测量" in section(body, "GPU 改变了什么")


def test_no_gpu_figure_is_claimed():
    """Every number of the prose is glued from this machine's cells; the GPU section states none."""
    gpu = section(prose(CHAPTER), "GPU 改变了什么")
    assert "{glue" not in gpu and not re.search(r"\d+(\.\d+)?\s*(倍|毫秒|秒)", gpu)


def test_the_toc_lists_this_chapter_after_chapter_6():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第二部分 完整的注意力")
    assert part["chapters"][1] == {"file": "book/ch07-parallel", "title": "7. 并行计算"}


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_the_loop_equals_the_matrix_form_in_any_order(chapter):
    assert np.abs(chapter["by_loop"] - chapter["by_matrix"]).max() < 1e-12
    assert np.array_equal(chapter["one_at_a_time"], chapter["by_loop"])
    assert not np.array_equal(chapter["order"], np.arange(len(chapter["order"])))  # really shuffled


@pytest.mark.cjk_font
def test_both_forms_do_the_same_multiply_adds(chapter):
    macs = chapter["macs"]
    assert macs["逐个查询的循环"] == macs["矩阵形式"] == 512 * 512 * 128
    rng = np.random.default_rng(0)
    for n_q, n_k, d_k, d_v in ((3, 7, 4, 5), (10, 2, 8, 1)):
        q, k, v = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k)), rng.normal(size=(n_k, d_v))
        per_query = n_k * (d_k + d_v)  # grows with n and with d: not "only with the length"
        assert _multiply_adds(att.attention_loop, q, k, v) == n_q * per_query
        assert _multiply_adds(att.scaled_dot_product_attention, q, k, v) == n_q * per_query


@pytest.mark.cjk_font
def test_an_all_at_once_rnn_needs_one_round_per_step(chapter):
    n = len(chapter["exact_rows"])
    assert chapter["exact_rows"] == list(range(1, n + 1))
    assert min(chapter["later_errors"][:-1]) > 0.5  # "其余各行直到最后一轮都错得很远"
    assert np.allclose(chapter["guess"], chapter["h_true"], atol=1e-12)


def test_a_weaker_recurrence_shrinks_the_error_faster_but_still_needs_n_rounds():
    """The prose's parenthesis: with a small U the error falls quickly, yet row t is exact only after t rounds."""
    gen = np.random.default_rng(2)
    n, d = 8, 4
    x = gen.normal(size=(n, d))
    w_in, u = gen.normal(size=(2, d, d)) / np.sqrt(d)
    errors = {}
    for scale in (0.3, 3.0):
        h_true, guess, worst = anp.rnn_scan(x, w_in, scale * u), np.zeros((n, d)), []
        for r in range(1, n + 1):
            previous = np.vstack([np.zeros((1, d)), guess[:-1]])
            guess = np.tanh(x @ w_in + previous @ (scale * u))
            error = np.abs(guess - h_true).max(axis=1)
            assert (error[:r] < 1e-12).all()
            worst.append(error[r:].max() if r < n else 0.0)
        errors[scale] = np.array(worst)
    assert (errors[0.3][:-1] > 0).all()  # never exact before its round
    assert errors[0.3][3] < 0.01 * errors[3.0][3]


@pytest.mark.cjk_font
def test_measured_times_follow_the_work(chapter):
    timing, speedup, growth = chapter["timing"], chapter["speedup"], chapter["growth"]
    assert list(chapter["sizes"]) == [16, 32, 64, 128, 256, 512, 1024]
    assert np.allclose(speedup, timing["逐个查询的循环"] / timing["矩阵形式"])
    # the matrix form is faster at every n (measured 3-11 times here), but by a few times, not by thousands
    assert speedup.min() > 1.3 and np.median(speedup) > 2 and speedup.max() < 100
    # n x 4: the matrix form's work grows 16 times, the RNN's 4 times; the measured growths scatter with
    # the load (17-25 and 2.5-6 seen on a busy 2-core machine), so only their wide gap is held
    assert growth["矩阵形式"] > 6 and growth["矩阵形式"] > 2 * growth["RNN 扫描"]
    # one thread, n = 1024: the RNN scan, 16 times less work, takes less time than the matrix form
    assert timing["RNN 扫描"][-1] < timing["矩阵形式"][-1]
    assert chapter["work"]["注意力"] == 16 * chapter["work"]["RNN"]
    # how much faster the RNN is depends on the load; the cell chooses the sentence for the measured ratio
    gain = 1 / chapter["rnn_vs_matrix"]
    assert ("只快了" in chapter["rnn_gain"].pick(gain)) == (1 < gain < 8)


@pytest.mark.cjk_font
def test_the_log_log_figure_is_labelled_in_chinese(chapter):
    fig = chapter["fig"]
    assert_draws_without_warnings(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"逐个查询的循环", "矩阵形式", "RNN 扫描"} <= set(labels)
    assert "本机测得" in ax.get_title() and "一个 CPU 线程" in ax.get_ylabel()


def test_the_library_loops_are_what_the_lesson_says():
    """attention_loop makes one pass per query, rnn_scan one step per position (both on torch too)."""
    rng = np.random.default_rng(3)
    x, w, u = rng.normal(size=(6, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4, 4))
    assert _multiply_adds(att.rnn_scan, x, w, u) == 6 * (3 * 4 + 4 * 4)
    assert np.allclose(anp.rnn_scan(x, w, u), att.rnn_scan(*(torch.as_tensor(a) for a in (x, w, u))).numpy())


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_multiply_adds_of_the_matrix_form():
    assert correct_indices(questions(ASSIGNMENT)[0]) == [1]
    n, d = 1000, 64
    assert n * n * (d + d) == 128_000_000 and n * (d + d) == 128_000
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 100, 64))  # the count scales as n^2: check it at n = 100
    assert _multiply_adds(att.scaled_dot_product_attention, q, k, v) == 100 * 100 * 128
    assert _multiply_adds(att.attention_loop, q, k, v) == 100 * 100 * 128


def test_selfcheck_what_must_wait():
    question = questions(ASSIGNMENT)[1]
    assert question["multi"] and correct_indices(question) == [0]
    rng = np.random.default_rng(5)
    x, w, u = rng.normal(size=(8, 4)), rng.normal(size=(4, 4)) / 2, rng.normal(size=(4, 4)) / 2
    hs = anp.rnn_scan(x, w, u)
    assert np.allclose(hs[3], np.tanh(x[3] @ w + hs[2] @ u))  # A: step t uses h_{t-1}
    xw = x @ w  # D: every x_t W at once
    assert np.allclose(xw[5], x[5] @ w)
    q, k, v = rng.normal(size=(3, 6, 4))
    full, weights = anp.scaled_dot_product_attention(q, k, v)
    for i in rng.permutation(6):  # B, C: each row on its own, in any order
        row, row_w = anp.scaled_dot_product_attention(q[i:i + 1], k, v)
        assert np.allclose(row[0], full[i]) and np.allclose(row_w[0], weights[i])


def test_selfcheck_which_does_more_multiply_adds():
    assert correct_indices(questions(ASSIGNMENT)[2]) == [2]
    n, d = 4096, 64
    attention, rnn = 2 * n * n * d, n * (d * d + d * d)
    assert attention // rnn == n // d == 64
    rng = np.random.default_rng(6)
    m = 256  # the same ratio n / d, counted by torch at a size that runs quickly
    q, k, v = rng.normal(size=(3, m, 4))
    w, u = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    assert _multiply_adds(att.scaled_dot_product_attention, q, k, v) == (m // 4) * _multiply_adds(att.rnn_scan, q, w, u)


def test_selfcheck_what_a_gpu_changes():
    assert correct_indices(questions(ASSIGNMENT)[3]) == [3]
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(3, 5, 4))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    on = [torch.as_tensor(a, device=device) for a in (q, k, v)]
    with FlopCounterMode(display=False) as counter:  # A: the count does not depend on the device
        att.scaled_dot_product_attention(*on)
    assert counter.get_total_flops() // 2 == 5 * 5 * 8


# --------------------------------------------------------------------------- the assignment

NOISY_LOOP = '''import sys


def attention_row(q_i, k, v):
    print("算一个查询……", file=sys.stderr)
    q_i, k, v = (np.asarray(a, dtype=float) for a in (q_i, k, v))
    s = k @ q_i / np.sqrt(q_i.shape[-1])
    e = np.exp(s - np.max(s))
    return (e / np.sum(e)) @ v


def attention_loop(q, k, v):
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    out = np.empty((q.shape[0], v.shape[-1]))
    for i in range(q.shape[0]):
        out[i] = attention_row(q[i], k, v)
    return out
'''

DELEGATION = '''from attnlib import numpy as lib


def attention_matrix(q, k, v):
    return lib.scaled_dot_product_attention(q, k, v)[0]
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    partial = assignments.wrong_cells(ASSIGNMENT, "no_max_shift", "transpose_with_dot_T", "ratio_inverted")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        "partial": assignments.with_cells(source, partial),
        "mixed": assignments.with_cells(source, {"attention_loop": NOISY_LOOP, "attention_matrix": DELEGATION}),
    }, {
        # no max shift: 8 of 10 checks (only the scores in the thousands fail, an essential check), so a third;
        # k.T: 5 of 7 (the two batches fail; an edge case, no cap); matrix / loop reported as the ratio: 11 of 13
        # (the ratios of the known times, visible and essential, and hidden, fail), capped at a third
        "partial": [3 * (1 / 3), 2 * 5 / 7, 3 * (1 / 3)],
        # a right loop that prints to stderr keeps its points; the reference behind the student's name scores 0;
        # the timing function itself is right: only the checks that run it on the two forms fail (the two visible
        # ones on the real run and the last hidden one), edge checks: 10 of 13, no cap
        "mixed": [3, 0, 3 * 10 / 13],
    })  # 8 autograded + the written answer (2, by hand)


def test_the_known_times_are_read_from_a_fake_clock_that_is_put_back():
    """The timing checks run the student's compare_times on functions of known cost, timed by a fake clock that
    stands behind time.perf_counter (and a name imported from time) during the call: the times are exact, the
    mistakes' models exact, nothing sleeps.  The real clock is back after the cell, and a timing function that adds
    the two readings (perf_counter() + start) is told so by the visible checks."""
    import time

    from nbrun import execute, read_kept, source_notebook

    real = time.perf_counter
    nb = source_notebook(ASSIGNMENT)
    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "timestamps_plus_start.py")
    scores, out = execute(nb, replace=kept.cells, hidden=False)
    assert time.perf_counter is real and time.perf_counter() > 0
    printed = out["test_compare_times"]
    assert scores["test_compare_times"] == pytest.approx(1.0)
    assert printed.count("记下的是结束时刻加开始时刻") == 2  # the loop's times and the ratio, both essential
    assert "实际：[2000.08, 2000.56]" in printed  # two sums of fake readings, not two durations
