"""Chapter 14 (面试题): the page's self-check facts, checked with attnlib."""

import numpy as np

from attnlib import numpy as anp


def test_unscaled_dot_product_std_is_sqrt_dk():
    rng = np.random.default_rng(14)
    q, k = rng.normal(size=(200_000, 256)), rng.normal(size=(200_000, 256))
    dots = np.einsum("nd,nd->n", q, k)
    assert abs(dots.std() - 16) < 0.2, dots.std()
    assert abs((dots / np.sqrt(256)).std() - 1) < 0.02


def test_self_attention_scores_are_n_by_n():
    n, d_k = 7, 5
    x = np.random.default_rng(0).normal(size=(n, d_k))
    assert anp.attention_scores(x, x).shape == (n, n)
    _, w = anp.scaled_dot_product_attention(x, x, x, causal=True)
    assert w.shape == (n, n) and np.count_nonzero(w) == n * (n + 1) // 2


def test_eight_heads_of_512_scale_by_sqrt_64():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 512))
    w_q, w_k, w_v, w_o = (rng.normal(size=(512, 512)) / np.sqrt(512) for _ in range(4))
    heads = anp.split_heads(x @ w_q, 8)
    assert heads.shape == (8, 6, 64)
    assert anp.merge_heads(heads).shape == (6, 512)
    _, weights = anp.multi_head_attention(x, x, w_q, w_k, w_v, w_o, 8)
    q, k = anp.split_heads(x @ w_q, 8), anp.split_heads(x @ w_k, 8)
    by_64 = anp.softmax(q @ np.swapaxes(k, -1, -2) / 8.0)
    by_512 = anp.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(512))
    np.testing.assert_allclose(weights, by_64, rtol=1e-10)
    assert not np.allclose(weights, by_512, atol=1e-3)


# The chapter each quiz question tests (reviewed by hand against the questions' text). The quiz notebooks'
# introductions and the chapter 14 table must state the same chapters.
QUESTION_CHAPTERS = {
    "quiz-sdpa": {1: 3, 2: 4, 3: 5, 4: 4, 5: 7, 6: 2, 7: 8, 8: 7, 9: 6, 10: 9},
    "quiz-qkv": {1: 2, 2: 2, 3: 4, 4: 5, 5: 6, 6: 9, 7: 10, 8: 3, 9: 11, 10: 5},
    "quiz-modern": {1: 15, 2: 15, 3: 15, 4: 15, 5: 16, 6: 11, 7: 16, 8: 10, 9: 10, 10: 10},
    "quiz-frontier": {1: 17, 2: 17, 3: 18, 4: 18, 5: 19, 6: 19, 7: 19, 8: 20, 9: 20, 10: 20},
    "quiz-practice": {1: 22, 2: 22, 3: 22, 4: 21, 5: 21, 6: 23, 7: 23, 8: 24, 9: 24, 10: 24},
}


def chapter_ranges(chapters) -> str:
    """``{2, 3, 4, 6}`` -> ``"2–4、6"``: runs of consecutive chapters, as the book writes them."""
    ordered, runs = sorted(set(chapters)), []
    for c in ordered:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return "、".join(f"{a}–{b}" if b > a else f"{a}" for a, b in runs)


def test_chapter_ranges_are_stated_consistently():
    import pathlib
    import re

    import nbformat

    root = pathlib.Path(__file__).resolve().parents[1]
    page = (root / "book" / "ch14-interview.md").read_text(encoding="utf-8")
    assert chapter_ranges([2, 3, 4, 5, 6, 9, 10, 11]) == "2–6、9–11"
    for name, chapters in QUESTION_CHAPTERS.items():
        stated = chapter_ranges(chapters.values())
        intro = nbformat.read(root / "solutions" / name / f"{name}.ipynb", as_version=4).cells[0].source
        assert f"对应第 {stated} 章" in intro, (name, stated)
        row = re.search(rf"^\| `{name}` .*\| 第 (\S+) 章 \|$", page, re.M)
        assert row and row.group(1) == stated, (name, row and row.group(1), stated)
