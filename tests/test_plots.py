"""attnlib.plots: a Chinese font is found (even past a stale matplotlib font cache) and figures show glyphs."""

from __future__ import annotations

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
