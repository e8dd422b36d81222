"""Chapter 1 (可视化总览): every claim of the lesson holds, the animation works when built; the exercises grade."""

from __future__ import annotations

import base64
import html.parser
import pathlib
import re

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import assert_draws_without_warnings

from attnlib import numpy as anp

ROOT = pathlib.Path(__file__).resolve().parents[1]
ASSIGNMENT = "ch01-pipeline"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py

PNG = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- the page itself

def test_page_has_the_planned_parts_and_length():
    text = CHAPTER.read_text(encoding="utf-8")
    assert text.index("{doc}`intro`") < text.index("## 一个公式")  # opens from the 前言


# --------------------------------------------------------------------------- the claims of the prose

@pytest.mark.cjk_font
def test_shapes_follow_the_table(chapter):
    n, d_model, d_k, d_v = 4, 6, 3, 3
    assert len(chapter["tokens"]) == n and chapter["X"].shape == (n, d_model)
    assert chapter["W_q"].shape == chapter["W_k"].shape == (d_model, d_k) and chapter["W_v"].shape == (d_model, d_v)
    assert chapter["Q"].shape == chapter["K"].shape == (n, d_k) and chapter["V"].shape == (n, d_v)
    for name in ("S", "S_scaled", "A"):
        assert chapter[name].shape == (n, n), name
    assert chapter["O"].shape == (n, d_v)


@pytest.mark.cjk_font
def test_each_row_is_projected_on_its_own(chapter):
    X, W_q = chapter["X"], chapter["W_q"]
    for i in range(len(X)):  # the prose: q_i depends on x_i only
        assert np.allclose(anp.qkv_projection(X[i:i + 1], W_q, W_q, W_q)[0][0], chapter["Q"][i])


@pytest.mark.cjk_font
def test_scores_are_all_pairs_and_not_symmetric(chapter):
    S, Q, K = chapter["S"], chapter["Q"], chapter["K"]
    assert np.allclose(S, [[Q[i] @ K[j] for j in range(4)] for i in range(4)])
    assert not np.allclose(S, S.T)
    assert f"{S[0, 3]:.2f}" != f"{S[3, 0]:.2f}"  # the two glued numbers differ as printed


@pytest.mark.cjk_font
def test_scaling_divides_by_root_d_k_and_keeps_every_ranking(chapter):
    S, S_scaled = chapter["S"], chapter["S_scaled"]
    assert np.allclose(S_scaled, S / np.sqrt(3))
    assert (np.argsort(S, axis=1) == np.argsort(S_scaled, axis=1)).all()


@pytest.mark.cjk_font
def test_weights_rows_sum_to_one_columns_do_not(chapter):
    A = chapter["A"]
    assert np.allclose(A.sum(axis=1), 1)
    assert not np.allclose(A.sum(axis=0), 1)
    assert (A > 0).all()


@pytest.mark.cjk_font
def test_the_weights_the_prose_reads(chapter):
    A, top = chapter["A"], chapter["top"]
    assert top[0] == 3  # "我" gives its largest share to "书"
    assert (top != np.arange(4)).all()  # no token attends most to itself in this example
    assert A[0, 3] < 0.5  # the largest share of "我" is not a majority: everything is mixed


@pytest.mark.cjk_font
def test_output_is_the_weighted_sum_and_equals_the_library(chapter):
    A, V, output = chapter["A"], chapter["V"], chapter["O"]
    assert np.allclose(output[0], sum(A[0, j] * V[j] for j in range(4)))
    out, weights = anp.scaled_dot_product_attention(chapter["Q"], chapter["K"], V)
    assert np.allclose(out, output) and np.allclose(weights, A)


@pytest.mark.cjk_font
def test_the_pitfalls(chapter):
    Q, K, Q3, K3 = chapter["Q"], chapter["K"], chapter["Q3"], chapter["K3"]
    with pytest.raises(ValueError):
        Q @ K
    assert Q3.shape == K3.shape == (3, 3) and not np.allclose(Q3 @ K3, Q3 @ K3.T)
    assert not np.allclose(anp.softmax(chapter["S_scaled"], axis=0).sum(axis=1), 1)
    assert chapter["too_flat"].max() < chapter["A"].max()  # dividing by d_k flattens the weights
    assert f"{chapter['too_flat'].max():.3f}" != f"{chapter['A'].max():.3f}"


@pytest.mark.cjk_font
def test_attention_mixes_everything_and_selects_nothing(chapter):
    A, output, V, top = chapter["A"], chapter["O"], chapter["V"], chapter["top"]
    assert A.min() > 0.01 and f"{A.min():.2f}" != "0.00"
    assert chapter["gap"] > 0.1 and np.isclose(chapter["gap"], np.linalg.norm(output[0] - V[top[0]]))


# --------------------------------------------------------------------------- the figures and the animation

class _Player(html.parser.HTMLParser):
    """Collects the frames, buttons, slider and remote loads of the HTML players in a page."""

    def __init__(self):
        super().__init__()
        self.players, self.frames, self.buttons, self.sliders, self.remote = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "attn-player" in (a.get("class") or "").split():
            self.players.append(a)
        if tag == "img" and "attn-player-frame" in (a.get("class") or ""):
            self.frames.append(a)
        if tag == "button" and a.get("data-action"):
            self.buttons.append(a["data-action"])
        if tag == "input" and "attn-player-slider" in (a.get("class") or ""):
            self.sliders.append(a)
        for key in ("src", "href"):
            if re.match(r"(?:https?:)?//", a.get(key) or ""):
                self.remote.append(a[key])


def _check_player(page: str, n_frames: int) -> _Player:
    parser = _Player()
    parser.feed(page)
    assert len(parser.players) == 1, "exactly one animation"
    player = parser.players[0]
    assert player["data-frames"] == str(n_frames) and int(player["data-interval"]) > 0
    assert len(parser.frames) == n_frames
    for i, frame in enumerate(parser.frames):
        assert frame["src"].startswith("data:image/png;base64,"), "frames are embedded, never fetched"
        assert base64.b64decode(frame["src"].split(",", 1)[1]).startswith(PNG)
        assert ("hidden" in frame) == (i > 0), "only the first frame shows before the script runs"
        assert re.search(r"[\u4e00-\u9fff]", frame["alt"]), "each frame has a Chinese description"
    assert parser.buttons == ["first", "prev", "play", "next", "last"]
    assert len(parser.sliders) == 1 and parser.sliders[0]["max"] == str(n_frames - 1)
    assert "addEventListener" in page and "document.currentScript" in page
    assert not parser.remote, parser.remote
    return parser


@pytest.mark.cjk_font
def test_animation_has_a_frame_per_step_and_loads_nothing(chapter):
    from attnlib import plots

    parser = _check_player(chapter["player"], len(plots.PIPELINE_STEPS))
    assert [f["alt"] for f in parser.frames] == list(plots.PIPELINE_STEPS)
    assert len(chapter["player"]) < 400_000, "frames few and small: the page stays light"


@pytest.mark.cjk_font
def test_static_figure_shows_every_matrix_with_its_shape_in_chinese(chapter):

    fig = chapter["fig"]
    assert_draws_without_warnings(fig)  # no missing glyph
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 8
    for title, shape in zip(titles, ["4×6", "4×3", "4×3", "4×3", "4×4", "4×4", "4×4", "4×3"], strict=True):
        assert re.search(r"[\u4e00-\u9fff]", title) and f"（{shape}）" in title, title
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == chapter["tokens"]


@pytest.mark.book
@pytest.mark.cjk_font
def test_built_page_holds_the_working_animation_with_nothing_from_another_host():
    from test_book import _AssetParser, _tail, built_book

    result = built_book()
    assert result.returncode == 0, _tail(result.log)
    page = (result.html_dir / "book" / "ch01-pipeline.html").read_text(encoding="utf-8")
    _check_player(page, 6)
    loads = _AssetParser()
    loads.feed(page)
    assert not [u for u in loads.loads if re.match(r"(?:https?:)?//", u)]
    static = re.findall(r'<img[^>]+src="([^"]+\.png)"', page)
    assert static and all((result.html_dir / "book" / s).resolve().is_file() for s in static)
    assert "下载本章练习笔记本" in page and "自测：可视化总览" in page


@pytest.mark.book
@pytest.mark.browser
@pytest.mark.cjk_font
def test_animation_plays_in_a_real_browser():
    from test_book import built_book
    from test_selfcheck import Browser

    result = built_book()
    assert result.returncode == 0
    browser = Browser()
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=(result.html_dir / "book" / "ch01-pipeline.html").as_uri())
        browser.wait_for("document.readyState === 'complete' && document.querySelector('.attn-player-ready') !== null")
        player = "document.querySelector('.attn-player')"
        shown = f"Array.from({player}.querySelectorAll('.attn-player-frame')).filter(f => !f.hidden).length"
        assert browser.eval(f"{player}.dataset.current") == "0" and browser.eval(shown) == 1
        browser.click(f"{player}.querySelector(\"button[data-action='next']\")")
        browser.wait_for(f"{player}.dataset.current === '1'")
        assert browser.eval(f"{player}.querySelector('.attn-player-caption').textContent").startswith("2 / 6")
        browser.click(f"{player}.querySelector(\"button[data-action='play']\")")
        browser.wait_for(f"Number({player}.dataset.current) >= 3", timeout=20)
        browser.click(f"{player}.querySelector(\"button[data-action='play']\")")  # pause
        browser.wait_for(f"{player}.dataset.playing === 'false'")
        assert browser.eval(shown) == 1
        browser.click(f"{player}.querySelector(\"button[data-action='first']\")")
        browser.wait_for(f"{player}.dataset.current === '0'")
    finally:
        browser.close()


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_shapes():
    q1 = questions(ASSIGNMENT)[0]
    assert correct(q1) == [r"$A$ 是 $5\times5$，$O$ 是 $5\times6$"]
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 8))
    q, k, v = anp.qkv_projection(x, rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 6)))
    out, weights = anp.scaled_dot_product_attention(q, k, v)
    assert weights.shape == (5, 5) and out.shape == (5, 6)


def test_selfcheck_what_sums_to_one():
    q2 = questions(ASSIGNMENT)[1]
    assert correct(q2) == ["权重矩阵 $A$ 的每一行"]
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 5, 4))
    out, A = anp.scaled_dot_product_attention(q, k, v)
    assert np.allclose(A.sum(axis=-1), 1)
    assert not np.allclose(A.sum(axis=0), 1)
    assert not np.allclose(anp.attention_scores(q, k).sum(axis=-1), 1)
    assert not np.allclose(out.sum(axis=-1), 1)


def test_selfcheck_statements_about_unmasked_attention():
    q3 = questions(ASSIGNMENT)[2]
    assert q3["multi"] and len(correct(q3)) == 2
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 8))
    q, k, v = anp.qkv_projection(x, *rng.normal(size=(3, 8, 4)))
    s = anp.attention_scores(q, k, scale=False)
    assert not np.allclose(s, s.T)  # A: right
    assert (np.argsort(s, axis=1) == np.argsort(anp.attention_scores(q, k), axis=1)).all()  # B: right
    out, w = anp.scaled_dot_product_attention(q, k, v)
    assert (w > 0).all()  # C: wrong, no weight is exactly 0
    assert not any(np.allclose(out[i], v[w[i].argmax()]) for i in range(6))  # D: wrong


# --------------------------------------------------------------------------- the assignment

NOISY_ATTENTION = '''
import sys
import warnings


def attention(q, k, v):
    print("调试：开始计算", file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    s = scaled_scores(q, k)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    partial = assignments.wrong_cells(ASSIGNMENT, "weights_on_the_left", "no_max_shift")
    # per autograded cell: projections 2, scaled scores 3, attention 3 (the written answer is graded by hand)
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        "partial": assignments.with_cells(source, partial),
        "noisy": assignments.with_cells(source, {"attention": NOISY_ATTENTION}),
    }, {
        # Q, K, V transposed: only "returns three arrays" of 10 checks passes; without the max shift
        # the huge scores overflow: 9 of 10 checks pass
        "partial": [0.2, 3, 2.7],
        # right answers whose code prints to stderr and warns keep their points
        "noisy": [2, 3, 3],
    }, tol=1e-9)
