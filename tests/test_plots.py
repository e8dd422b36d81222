"""attnlib.plots: a Chinese font is found (even past a stale matplotlib font cache) and figures show glyphs."""

from __future__ import annotations

import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from attnlib import plots  # noqa: E402

pytestmark = pytest.mark.cjk_font

TOKENS = ["我", "爱", "北京", "<pad>"]


def _font_file(family: str) -> str:
    return font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)


def _without_cjk_fonts(fonts) -> list:
    """The font list of a cache written before any CJK font was installed.

    Matplotlib's own placeholder font (every character a box) stays: it is in every cache.
    """
    return [f for f in fonts if f.name.startswith("Last Resort") or not plots._has_chinese_glyphs(f.fname)]


def _draw_collecting_warnings(fig) -> list[str]:
    """Render ``fig`` (glyphs are looked up at draw time) and return every warning raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught]


@pytest.fixture(autouse=True)
def _fresh_choice(monkeypatch):
    """Each test chooses the font afresh and leaves rcParams as it found them."""
    monkeypatch.setattr(plots, "_chosen", None)
    with matplotlib.rc_context():
        yield
    plt.close("all")


def test_setup_picks_a_font_with_chinese_glyphs():
    family = plots.setup()
    path = _font_file(family)
    charmap = matplotlib.ft2font.FT2Font(path).get_charmap()
    assert all(ord(c) in charmap for c in "注意力掩码查询键值"), f"{family} ({path}) lacks Chinese glyphs"
    assert matplotlib.rcParams["font.sans-serif"][:2] == [family, "DejaVu Sans"]
    assert matplotlib.rcParams["font.family"] == ["sans-serif"]


def test_setup_is_idempotent():
    first = plots.setup()
    assert plots.setup() == first
    assert matplotlib.rcParams["font.sans-serif"].count(first) == 1


def test_font_registered_from_fontconfig_when_matplotlib_cache_is_stale(monkeypatch):
    """A font list cached before the CJK font was installed: setup registers the font itself."""
    real = list(font_manager.fontManager.ttflist)
    stale = _without_cjk_fonts(real)
    assert len(stale) < len(real), "this machine should have a CJK font installed (fonts-wqy-microhei)"
    assert any(f.name.startswith("Last Resort") for f in stale), "matplotlib's placeholder font stays in the list"
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)
    family = plots.cjk_font_family()
    assert family in {f.name for f in font_manager.fontManager.ttflist}
    assert plots._has_chinese_glyphs(_font_file(family))


def test_no_chinese_font_gives_a_clear_error(monkeypatch):
    stale = _without_cjk_fonts(font_manager.fontManager.ttflist)
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)
    monkeypatch.setattr(plots, "_system_cjk_files", lambda: [])
    with pytest.raises(RuntimeError, match="fonts-wqy-microhei") as info:
        plots.setup()
    assert "中文" in str(info.value)


def test_heatmap_draws_chinese_labels_without_missing_glyphs():
    weights = np.array([[1.0, 0, 0, 0], [0.7, 0.3, 0, 0], [0.2, 0.5, 0.3, 0], [0, 0, 0, 0]])
    ax = plots.attention_heatmap(weights, TOKENS, TOKENS, title="因果掩码后的注意力权重")
    caught = _draw_collecting_warnings(ax.figure)
    assert not [m for m in caught if "missing" in m.lower() or "glyph" in m.lower()], caught
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS
    cell_texts = [t.get_text() for t in ax.texts]
    assert cell_texts[:2] == ["1.00", "0.00"] and len(cell_texts) == 16
    assert ax.get_title() == "因果掩码后的注意力权重"
    assert ax.images[0].get_array().shape == (4, 4)


def test_heatmap_accepts_torch_tensors_that_track_gradients():
    w = torch.softmax(torch.randn(3, 5, requires_grad=True), dim=-1)
    ax = plots.attention_heatmap(w, annotate=False, colorbar=False)
    np.testing.assert_allclose(ax.images[0].get_array(), w.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize(("weights", "q", "k", "match"), [
    (np.ones((2, 2, 2)), None, None, "二维"),
    (np.ones((2, 3)), ["a"], None, "query_labels"),
    (np.ones((2, 3)), None, ["a", "b"], "key_labels"),
])
def test_heatmap_rejects_bad_input(weights, q, k, match):
    with pytest.raises(ValueError, match=match):
        plots.attention_heatmap(weights, q, k)


def test_weight_bars_one_group_per_row():
    rows = {"T = 0.5": [0.7, 0.2, 0.1], "T = 2": [0.4, 0.3, 0.3]}
    ax = plots.weight_bars(rows, ["猫", "坐", "垫子"], title="温度", cmap="viridis")
    caught = _draw_collecting_warnings(ax.figure)
    assert not [m for m in caught if "missing" in m.lower() or "glyph" in m.lower()], caught
    assert len(ax.patches) == 6
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == sorted([0.7, 0.2, 0.1, 0.4, 0.3, 0.3])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(rows)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["猫", "坐", "垫子"]


@pytest.mark.parametrize(("rows", "labels", "match"), [
    ({}, None, "至少"),
    ({"a": [0.5, 0.5], "b": [1.0]}, None, "同样长度"),
    ({"a": [[0.5, 0.5]]}, None, "一维"),
    ({"a": [0.5, 0.5]}, ["x"], "labels"),
])
def test_weight_bars_rejects_bad_input(rows, labels, match):
    with pytest.raises(ValueError, match=match):
        plots.weight_bars(rows, labels)


def test_without_setup_chinese_would_be_missing():
    """The check above can fail: with only DejaVu Sans, matplotlib warns about missing glyphs."""
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        fig, ax = plt.subplots()
        ax.set_title("注意力")
        caught = _draw_collecting_warnings(fig)
    assert any("missing" in m.lower() for m in caught), caught


# --------------------------------------------------------------------------- matrices, the pipeline and its player

PIPE_TOKENS = ["猫", "追", "老鼠"]


def _pipeline_matrices(n=3, d_model=4, d_k=2, d_v=3, seed=0) -> dict:
    from attnlib import numpy as anp

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d_model))
    q, k, v = anp.qkv_projection(x, rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k)),
                                 rng.normal(size=(d_model, d_v)))
    out, w = anp.scaled_dot_product_attention(q, k, v)
    return {"x": x, "q": q, "k": k, "v": v, "scores": anp.attention_scores(q, k, scale=False),
            "scaled": anp.attention_scores(q, k), "weights": w, "output": out}


def _no_glyph_warnings(fig) -> None:
    caught = _draw_collecting_warnings(fig)
    assert not [m for m in caught if "missing" in m.lower() or "glyph" in m.lower()], caught


def test_matrix_heatmap_writes_values_and_the_shape():
    m = np.array([[1.0, -2.5, 0.5], [0.0, 3.0, -1.0]])
    ax = plots.matrix_heatmap(m, ["甲", "乙"], title="分数")
    _no_glyph_warnings(ax.figure)
    assert ax.get_title() == "分数（2×3）"
    assert [t.get_text() for t in ax.texts] == ["1.00", "-2.50", "0.50", "0.00", "3.00", "-1.00"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["甲", "乙"] and len(ax.get_xticks()) == 0
    lo, hi = ax.images[0].get_clim()
    assert lo == -hi == -3.0  # signed data: a colour scale centred on 0
    white = [t.get_text() for t in ax.texts if t.get_color() == "white"]
    assert white == ["-2.50", "3.00"]  # the darkest cells, at both ends


def test_matrix_heatmap_sequential_scale_and_torch_input():
    w = torch.softmax(torch.randn(3, 4, requires_grad=True), dim=-1)
    ax = plots.matrix_heatmap(w, cmap="Blues", vmin=0.0, vmax=1.0, shape=False, title="权重")
    assert ax.get_title() == "权重" and ax.images[0].get_clim() == (0.0, 1.0)
    np.testing.assert_allclose(ax.images[0].get_array(), w.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize(("m", "rows", "cols", "match"), [
    (np.ones(3), None, None, "二维"),
    (np.ones((2, 3)), ["a"], None, "row_labels"),
    (np.ones((2, 3)), None, ["a"], "col_labels"),
])
def test_matrix_heatmap_rejects_bad_input(m, rows, cols, match):
    with pytest.raises(ValueError, match=match):
        plots.matrix_heatmap(m, rows, cols)


def test_pipeline_figure_draws_every_matrix_with_its_shape():
    fig = plots.pipeline_figure(_pipeline_matrices(), PIPE_TOKENS)
    _no_glyph_warnings(fig)
    titles = [ax.get_title() for ax in fig.axes]
    shapes = ["3×4", "3×2", "3×2", "3×3", "3×3", "3×3", "3×3", "3×3"]
    assert len(titles) == 8 and all(f"（{s}）" in t for t, s in zip(titles, shapes, strict=True)), titles
    assert all(re.search(r"[\u4e00-\u9fff]", t) for t in titles)
    assert all(len(ax.texts) == np.prod(ax.images[0].get_array().shape) for ax in fig.axes)  # every value written
    assert "六个步骤" in fig._suptitle.get_text() and "d_model = 4" in fig._suptitle.get_text()


def test_pipeline_figure_step_highlights_that_step_and_hides_later_ones():
    m = _pipeline_matrices()
    fig = plots.pipeline_figure(m, PIPE_TOKENS, step=2)
    _no_glyph_warnings(fig)
    pending = [ax for ax in fig.axes if [t.get_text() for t in ax.texts] == ["?"]]
    assert len(pending) == 3  # scaled, weights and output are not computed yet
    assert all("（3×3）" in ax.get_title() for ax in pending)
    scores = fig.axes[4]
    assert scores.spines["left"].get_linewidth() == 3 and scores.title.get_color() == plots._HIGHLIGHT
    assert fig._suptitle.get_text().startswith("第 2 步")
    first = plots.pipeline_figure(m, PIPE_TOKENS, step=0)
    assert sum([t.get_text() for t in ax.texts] == ["?"] for ax in first.axes) == 7


@pytest.mark.parametrize(("change", "match"), [
    ({"weights": None}, "缺少"),
    ({"q": np.ones((4, 2))}, "每个词元一行"),
    ({"scores": np.ones((3, 2))}, r"\(3, 3\)"),
    ({"output": np.ones((3, 5))}, "形状不一致"),
])
def test_pipeline_figure_rejects_inconsistent_matrices(change, match):
    m = _pipeline_matrices()
    for key, value in change.items():
        if value is None:
            del m[key]
        else:
            m[key] = value
    with pytest.raises(ValueError, match=match):
        plots.pipeline_figure(m, PIPE_TOKENS)


def test_pipeline_figure_rejects_a_bad_step():
    with pytest.raises(ValueError, match="step"):
        plots.pipeline_figure(_pipeline_matrices(), PIPE_TOKENS, step=6)


def test_figure_png_closes_the_figure_and_shrinks_with_a_palette():
    fig = plots.pipeline_figure(_pipeline_matrices(), PIPE_TOKENS)
    full = plots.figure_png(fig, dpi=60, close=False)
    small = plots.figure_png(fig, dpi=60, colors=64)
    assert full.startswith(b"\x89PNG") and small.startswith(b"\x89PNG")
    assert len(small) < 0.6 * len(full)
    assert fig.number not in plt.get_fignums()
    with pytest.raises(ValueError, match="colors"):
        plots.figure_png(plt.figure(), colors=1)


def _tiny_frames(n: int) -> list[bytes]:
    frames = []
    for i in range(n):
        fig = plt.figure(figsize=(1, 1))
        fig.text(0.5, 0.5, str(i))
        frames.append(plots.figure_png(fig, dpi=20))
    return frames


def test_step_player_is_self_contained():
    import base64

    captions = ["第一帧：开始", "第二帧", "第三帧 <末尾> & 结束"]
    page = plots.step_player_html(_tiny_frames(3), captions, interval_ms=500)
    assert page.count('class="attn-player-frame"') == 3 and page.count(" hidden src=") == 2
    sources = re.findall(r'src="([^"]+)"', page)
    assert len(sources) == 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert all(base64.b64decode(s.split(",", 1)[1]).startswith(b"\x89PNG") for s in sources)
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", page) and "http" not in page
    assert 'data-interval="500"' in page and 'max="2"' in page
    assert "&lt;末尾&gt; &amp; 结束" in page and "<末尾>" not in page  # captions escaped
    for action in ("first", "prev", "play", "next", "last"):
        assert f'data-action="{action}"' in page
    assert "1 / 3\u3000第一帧：开始" in page  # shown even without scripts
    assert '<div class="attn-player-controls" hidden>' in page  # controls appear only when the script runs


@pytest.mark.parametrize(("frames", "captions", "kwargs", "match"), [
    ([], [], {}, "至少"),
    (1, ["a", "b"], {}, "一一对应"),
    ([b"GIF89a"], ["a"], {}, "PNG"),
    (1, ["a"], {"interval_ms": 0}, "interval_ms"),
])
def test_step_player_rejects_bad_input(frames, captions, kwargs, match):
    frames = _tiny_frames(frames) if isinstance(frames, int) else frames
    with pytest.raises(ValueError, match=match):
        plots.step_player_html(frames, captions, **kwargs)


def test_pipeline_animation_has_one_small_frame_per_step():
    page = plots.pipeline_animation(_pipeline_matrices(), PIPE_TOKENS, dpi=50)
    assert page.count('class="attn-player-frame"') == len(plots.PIPELINE_STEPS) == 6
    for caption in plots.PIPELINE_STEPS:
        assert caption in page
    assert len(page) < 150_000
    assert not plt.get_fignums(), "the frames' figures are closed, so a notebook shows only the player"


@pytest.mark.browser
def test_step_player_plays_and_steps_in_a_real_browser(tmp_path):
    from test_selfcheck import Browser

    page = tmp_path / "player.html"
    body = plots.step_player_html(_tiny_frames(4), ["一", "二", "三", "四"], interval_ms=100)
    page.write_text(f'<!doctype html><html lang="zh-CN"><meta charset="utf-8"><body>{body}</body></html>',
                    encoding="utf-8")
    browser = Browser()
    player = "document.querySelector('.attn-player')"
    shown = f"Array.from({player}.querySelectorAll('.attn-player-frame')).findIndex(f => !f.hidden)"

    def press(action: str) -> None:
        browser.click(f"{player}.querySelector(\"button[data-action='{action}']\")")

    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=page.as_uri())
        browser.wait_for("document.readyState === 'complete' && document.querySelector('.attn-player-ready') !== null")
        assert browser.eval(f"{player}.querySelector('.attn-player-controls').hidden") is False
        press("next")
        browser.wait_for(f"{shown} === 1")
        assert browser.eval(f"{player}.querySelector('.attn-player-caption').textContent") == "2 / 4\u3000二"
        press("last")
        browser.wait_for(f"{shown} === 3")
        press("prev")
        browser.wait_for(f"{shown} === 2")
        press("play")  # plays to the end and stops there
        browser.wait_for(f"{shown} === 3 && {player}.dataset.playing === 'false'", timeout=10)
        press("play")  # at the end, play starts again from the first frame
        browser.wait_for(f"{player}.dataset.playing === 'true' || {shown} > 0", timeout=10)
        press("first")
        browser.wait_for(f"{shown} === 0 && {player}.dataset.playing === 'false'")
        browser.eval(f"(() => {{ const s = {player}.querySelector('.attn-player-slider'); s.value = '2';"
                     " s.dispatchEvent(new Event('input')); })()")
        browser.wait_for(f"{shown} === 2")
    finally:
        browser.close()
