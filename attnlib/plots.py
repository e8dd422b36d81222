"""Matplotlib setup and figures shared by the lessons (Chinese labels render as glyphs).

Call :func:`setup` once at the top of a lesson; every helper here calls it too::

    from attnlib import plots
    plots.setup()
    plots.attention_heatmap(weights, ["我", "爱", "北京"], ["我", "爱", "北京"])

The pipeline of chapter 1 has a static figure (:func:`pipeline_figure`) and an
animation that plays in a static HTML page, with no kernel and no network
(:func:`pipeline_animation`, built on the generic :func:`step_player_html`).

Matplotlib keeps a cached list of the fonts it knows.  A cache written before a
CJK font was installed does not list it, so :func:`setup` also asks fontconfig
(``fc-list :lang=zh``) for font files and registers them itself.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import html
import io
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
from matplotlib import font_manager

__all__ = [
    "CJK_FAMILIES", "PIPELINE_STEPS", "attention_heatmap", "cjk_font_family", "figure_png", "matrix_heatmap",
    "pipeline_animation", "pipeline_figure", "setup", "step_player_html", "weight_bars",
]

#: Families tried in this order; the first one installed that has Chinese glyphs wins.
CJK_FAMILIES = (
    "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
    "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Sarasa Gothic SC", "AR PL UMing CN",
    "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC", "Hiragino Sans GB",
)

#: Characters a font must hold to count as a Chinese font.
_PROBE = "注意力掩码"

_FONT_GLOBS = (
    "/usr/share/fonts/**/*wqy*.tt[cf]", "/usr/share/fonts/**/*CJK*.tt[cf]", "/usr/share/fonts/**/*CJK*.otf",
    "/usr/share/fonts/**/*Han*.otf", "/usr/local/share/fonts/**/*.tt[cf]", "/usr/local/share/fonts/**/*.otf",
)

#: Fonts that map every character to a placeholder box: they "have" Chinese glyphs but show none.
#: Matplotlib itself ships "Last Resort High-Efficiency".
_PLACEHOLDER_FONTS = ("Last Resort",)

_chosen: str | None = None


def _has_chinese_glyphs(path: str) -> bool:
    """Whether the font file at ``path`` maps every character of the probe text."""
    try:
        charmap = matplotlib.ft2font.FT2Font(path).get_charmap()
    except (OSError, RuntimeError, ValueError):
        return False
    return all(ord(c) in charmap for c in _PROBE)


def _system_cjk_files() -> list[str]:
    """Font files fontconfig lists for Chinese, or found in the usual font folders."""
    files: list[str] = []
    if shutil.which("fc-list"):
        out = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True, check=False).stdout
        files = [line.split(":")[0].strip() for line in out.splitlines() if line.strip()]
    for pattern in _FONT_GLOBS:
        files.extend(glob.glob(pattern, recursive=True))
    return sorted(set(files))


def _installed_cjk_families(preferred_only: bool) -> dict[str, str]:
    """``{family name: file}`` for fonts matplotlib knows that hold Chinese glyphs.

    With ``preferred_only`` only the families of :data:`CJK_FAMILIES` are opened (fast);
    otherwise every known font is checked.
    """
    found: dict[str, str] = {}
    for entry in font_manager.fontManager.ttflist:
        if entry.name in found or (preferred_only and entry.name not in CJK_FAMILIES):
            continue
        if entry.name.startswith(_PLACEHOLDER_FONTS):
            continue
        if _has_chinese_glyphs(entry.fname):
            found[entry.name] = entry.fname
    return found


def cjk_font_family() -> str:
    """The name of an installed font family with Chinese glyphs.

    Registers the fonts fontconfig knows about when matplotlib's cached font
    list predates them.

    Returns
    -------
    str
        A family name such as ``"WenQuanYi Micro Hei"``.

    Raises
    ------
    RuntimeError
        No font with Chinese glyphs is installed.
    """
    found = _installed_cjk_families(preferred_only=True)
    if not found:
        for path in _system_cjk_files():
            if _has_chinese_glyphs(path):
                font_manager.fontManager.addfont(path)
        found = _installed_cjk_families(preferred_only=False)
    for family in CJK_FAMILIES:
        if family in found:
            return family
    if found:
        return sorted(found)[0]
    raise RuntimeError(
        "没有找到含中文字形的字体，图中的中文会显示成方框。请安装 fonts-wqy-microhei "
        "（Debian/Ubuntu: apt-get install fonts-wqy-microhei）。"
        " (No font with Chinese glyphs found; install fonts-wqy-microhei.)"
    )


def setup(*, dpi: int = 110) -> str:
    """Configure matplotlib for the course's figures and return the Chinese font family used.

    Sets a CJK font first in the sans-serif list, with DejaVu Sans after it so
    that glyphs the CJK font lacks fall back instead of turning into boxes.
    Safe to call more than once.

    Parameters
    ----------
    dpi : int
        Resolution of figures shown in notebooks.

    Returns
    -------
    str
        The CJK font family now first in ``rcParams["font.sans-serif"]``.
    """
    global _chosen
    if _chosen is None:
        _chosen = cjk_font_family()
    rest = [f for f in matplotlib.rcParams["font.sans-serif"] if f not in (_chosen, "DejaVu Sans")]
    matplotlib.rcParams["font.sans-serif"] = [_chosen, "DejaVu Sans", *rest]
    matplotlib.rcParams["font.family"] = ["sans-serif"]
    matplotlib.rcParams["figure.dpi"] = dpi
    matplotlib.rcParams["axes.spines.top"] = False
    matplotlib.rcParams["axes.spines.right"] = False
    return _chosen


def _as_numpy(x) -> np.ndarray:
    """A NumPy copy of an array or a (possibly CUDA, possibly grad-tracking) torch tensor."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def _new_axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def attention_heatmap(weights, query_labels: Sequence[str] | None = None, key_labels: Sequence[str] | None = None,
                      *, ax=None, title: str | None = None, annotate: bool = True, fmt: str = ".2f",
                      cmap: str = "Blues", vmax: float | None = None, colorbar: bool = True):
    """Draw an attention weight matrix as a heatmap with token labels.

    Parameters
    ----------
    weights : array_like, shape (n_q, n_k)
        One weight matrix (NumPy array or torch tensor); rows are queries.
    query_labels, key_labels : sequence of str, optional
        Tick labels, lengths ``n_q`` and ``n_k`` (Chinese is fine).
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str, optional
    annotate : bool
        Write each weight in its cell.
    fmt : str
        Format of the annotations.
    cmap : str
    vmax : float, optional
        Top of the colour scale (default: the largest weight, at least 1e-12).
    colorbar : bool

    Returns
    -------
    matplotlib Axes
    """
    setup()
    w = _as_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights 必须是二维矩阵 (n_q, n_k)，收到形状 {w.shape}。 (weights must be 2-D)")
    n_q, n_k = w.shape
    for name, labels, n in (("query_labels", query_labels, n_q), ("key_labels", key_labels, n_k)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} 有 {len(labels)} 个标签，但矩阵这一维长 {n}。 ({name} length mismatch)")
    ax = _new_axes(ax, (1.0 + 0.6 * n_k, 0.8 + 0.5 * n_q))
    top = float(vmax) if vmax is not None else max(float(w.max()), 1e-12)
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=top, aspect="auto")
    ax.set_xticks(range(n_k), labels=list(key_labels) if key_labels is not None else range(n_k))
    ax.set_yticks(range(n_q), labels=list(query_labels) if query_labels is not None else range(n_q))
    ax.set_xlabel("键（key）")
    ax.set_ylabel("查询（query）")
    ax.tick_params(top=False, bottom=False, left=False, right=False)
    for side in ax.spines.values():
        side.set_visible(False)
    if annotate:
        for i in range(n_q):
            for j in range(n_k):
                colour = "white" if w[i, j] > 0.6 * top else "black"
                ax.text(j, i, format(w[i, j], fmt), ha="center", va="center", color=colour, fontsize=9)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.85, label="注意力权重")
    return ax


def weight_bars(rows: Mapping[str, object], labels: Sequence[str] | None = None, *, ax=None,
                title: str | None = None, xlabel: str = "位置", ylabel: str = "权重", cmap: str | None = None):
    """Compare several weight vectors over the same positions as grouped bars.

    Parameters
    ----------
    rows : mapping of str to array_like, each shape (n,)
        Legend label -> weights, e.g. ``{"T = 0.5": w1, "T = 2": w2}``.
    labels : sequence of str, optional
        Names of the ``n`` positions (tick labels).
    ax : matplotlib Axes, optional
    title, xlabel, ylabel : str
    cmap : str, optional
        A colormap name to colour the groups in order (suits an ordered series such as
        temperatures); default: matplotlib's colour cycle.

    Returns
    -------
    matplotlib Axes
    """
    setup()
    if not rows:
        raise ValueError("rows 至少要有一组权重。 (rows is empty)")
    vectors = {name: _as_numpy(v) for name, v in rows.items()}
    sizes = {v.shape for v in vectors.values()}
    if len(sizes) != 1 or len(next(iter(sizes))) != 1:
        raise ValueError(f"每组权重都必须是同样长度的一维数组，收到形状 {sorted(sizes)}。"
                         " (rows must be 1-D, same length)")
    n = next(iter(sizes))[0]
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels 有 {len(labels)} 个，但每组权重长 {n}。 (labels length mismatch)")
    ax = _new_axes(ax, (max(4.0, 0.9 * n + 2.0), 3.2))
    width = 0.8 / len(vectors)
    x = np.arange(n)
    colours = [None] * len(vectors)
    if cmap is not None:
        colours = list(matplotlib.colormaps[cmap](np.linspace(0.1, 0.85, len(vectors))))
    for g, (name, v) in enumerate(vectors.items()):
        ax.bar(x + (g - (len(vectors) - 1) / 2) * width, v, width=width, label=name, color=colours[g])
    ax.set_xticks(x, labels=list(labels) if labels is not None else x)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05 * max(1e-12, max(float(v.max()) for v in vectors.values())))
    ax.legend(frameon=False)
    if title:
        ax.set_title(title)
    return ax


# --------------------------------------------------------------------------- matrices with their shapes

def _shape_text(m: np.ndarray) -> str:
    return "×".join(str(n) for n in m.shape)


def matrix_heatmap(matrix, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None, *,
                   ax=None, title: str | None = None, shape: bool = True, annotate: bool = True,
                   fmt: str = ".2f", cmap: str | None = None, vmin: float | None = None,
                   vmax: float | None = None, fontsize: float = 8):
    """Draw any matrix as a grid of coloured cells, each with its value, the shape in the title.

    Signed matrices (projections, scores) get a diverging colour map centred on 0;
    pass ``cmap="Blues", vmin=0`` for weights.

    Parameters
    ----------
    matrix : array_like, shape (n_rows, n_cols)
        NumPy array or torch tensor.
    row_labels, col_labels : sequence of str, optional
        Tick labels, lengths ``n_rows`` and ``n_cols``; without them that axis has no ticks.
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str, optional
        Drawn above the matrix; with ``shape`` the shape follows it, e.g. ``"查询 Q（4×3）"``.
    shape : bool
        Append the shape to the title.
    annotate : bool
        Write each value in its cell.
    fmt : str
        Format of the values.
    cmap : str, optional
        Default ``"RdBu_r"``.
    vmin, vmax : float, optional
        Colour limits; default symmetric around 0, ``±max|matrix|``.
    fontsize : float
        Size of the values written in the cells.

    Returns
    -------
    matplotlib Axes
    """
    setup()
    m = _as_numpy(matrix)
    if m.ndim != 2:
        raise ValueError(f"matrix 必须是二维矩阵，收到形状 {m.shape}。 (matrix must be 2-D)")
    for name, labels, n in (("row_labels", row_labels, m.shape[0]), ("col_labels", col_labels, m.shape[1])):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} 有 {len(labels)} 个标签，但矩阵这一维长 {n}。 ({name} length mismatch)")
    ax = _new_axes(ax, (1.0 + 0.55 * m.shape[1], 0.8 + 0.45 * m.shape[0]))
    top = max(float(np.abs(m).max()), 1e-12) if m.size else 1.0
    lo = -top if vmin is None else float(vmin)
    hi = top if vmax is None else float(vmax)
    ax.imshow(m, cmap=cmap or "RdBu_r", vmin=lo, vmax=hi, aspect="auto")
    ax.set_xticks(range(m.shape[1]), labels=list(col_labels) if col_labels is not None else None)
    ax.set_yticks(range(m.shape[0]), labels=list(row_labels) if row_labels is not None else None)
    if col_labels is None:
        ax.set_xticks([])
    if row_labels is None:
        ax.set_yticks([])
    ax.tick_params(top=False, bottom=False, left=False, right=False, labelsize=fontsize + 1)
    for side in ax.spines.values():
        side.set_visible(False)
    if annotate:
        diverging = lo < 0 < hi
        for (i, j), value in np.ndenumerate(m):
            # dark cells get white text: both ends of a diverging map, the top of a sequential one
            strong = abs(value - (lo + hi) / 2) > 0.35 * (hi - lo) if diverging else value > lo + 0.6 * (hi - lo)
            ax.text(j, i, format(value, fmt), ha="center", va="center", fontsize=fontsize,
                    color="white" if strong else "black")
    if title is not None or shape:
        text = title or ""
        ax.set_title(f"{text}（{_shape_text(m)}）" if shape else text, fontsize=fontsize + 2)
    return ax


# --------------------------------------------------------------------------- the pipeline of chapter 1

#: One caption per step of the pipeline (frame ``i`` of the animation shows step ``i``); plain text.
PIPELINE_STEPS = (
    "第 0 步：每个词元一行，叠成输入矩阵 X",
    "第 1 步：三个投影矩阵把 X 变成查询 Q、键 K、值 V",
    "第 2 步：每个查询与每个键做点积，得到分数矩阵 S（Q 乘以 K 的转置）",
    "第 3 步：分数除以 √d_k，得到缩放后的分数",
    "第 4 步：每一行做 softmax，得到注意力权重 A（每行之和为 1）",
    "第 5 步：按权重对值向量加权求和，得到输出 O = AV",
)

#: The same captions as figure titles (matplotlib mathtext).
_STEP_TITLES = (
    "第 0 步：每个词元一行，叠成输入矩阵 $X$",
    "第 1 步：三个投影矩阵把 $X$ 变成查询 $Q$、键 $K$、值 $V$",
    "第 2 步：每个查询与每个键做点积，得到分数 $S=QK^{\\top}$",
    "第 3 步：分数除以 $\\sqrt{d_k}$，得到缩放后的分数",
    "第 4 步：每一行做 softmax，得到注意力权重 $A$（每行之和为 1）",
    "第 5 步：按权重对值向量加权求和，得到输出 $O=AV$",
)

#: Panels of the pipeline figure: (key of the matrix, title, step that produces it, row of the figure).
#: Two panels a row, so the figure fits the text column of a page and its numbers stay legible.
_PANELS = (
    ("x", "输入 $X$", 0, 0),
    ("q", "查询 $Q=XW_Q$", 1, 0),
    ("k", "键 $K=XW_K$", 1, 1),
    ("v", "值 $V=XW_V$", 1, 1),
    ("scores", "分数 $S=QK^{\\top}$", 2, 2),
    ("scaled", "缩放 $S/\\sqrt{d_k}$", 3, 2),
    ("weights", "权重 $A$ = softmax", 4, 3),
    ("output", "输出 $O=AV$", 5, 3),
)

_HIGHLIGHT = "#d95f02"
_PENDING = "#9e9e9e"


def _pipeline_arrays(matrices: Mapping[str, object], tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """The eight matrices of the pipeline as NumPy arrays, their shapes checked against each other."""
    missing = [key for key, *_ in _PANELS if key not in matrices]
    if missing:
        raise ValueError(f"matrices 缺少 {missing}；需要 {[key for key, *_ in _PANELS]}。 (missing matrices)")
    arrays = {key: _as_numpy(matrices[key]) for key, *_ in _PANELS}
    n = len(tokens)
    for key, a in arrays.items():
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{key} 的形状应为 ({n}, …)（每个词元一行），收到 {a.shape}。 "
                             f"({key} must have one row per token)")
    for key in ("scores", "scaled", "weights"):
        if arrays[key].shape != (n, n):
            raise ValueError(f"{key} 的形状应为 ({n}, {n})，收到 {arrays[key].shape}。 ({key} must be n x n)")
    if arrays["output"].shape != arrays["v"].shape or arrays["q"].shape != arrays["k"].shape:
        raise ValueError(f"形状不一致：q {arrays['q'].shape}、k {arrays['k'].shape}、v {arrays['v'].shape}、"
                         f"output {arrays['output'].shape}。 (q/k and v/output shapes must match)")
    return arrays


def _pending_panel(ax, a: np.ndarray, title: str) -> None:
    """An empty frame the size of ``a``: the matrix this step has not computed yet."""
    ax.imshow(np.zeros(a.shape), cmap="Greys", vmin=0, vmax=1, aspect="auto")
    ax.text((a.shape[1] - 1) / 2, (a.shape[0] - 1) / 2, "?", ha="center", va="center", fontsize=16,
            color=_PENDING)
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(True)
        side.set_linestyle((0, (3, 3)))
        side.set_color(_PENDING)
    ax.set_title(f"{title}（{_shape_text(a)}）", fontsize=10, color=_PENDING)


def pipeline_figure(matrices: Mapping[str, object], tokens: Sequence[str], *, step: int | None = None,
                    figsize: tuple[float, float] = (6.4, 8.6), fmt: str = ".2f"):
    """The six steps of attention on one sentence, every matrix drawn with its shape.

    Eight panels, two a row, in the order they are computed: the input ``X``
    and the query ``Q``; the key ``K`` and the value ``V``; the scores and the
    scaled scores; the weights and the output.  Matrix rows are the tokens.

    Parameters
    ----------
    matrices : mapping of str to array_like
        ``x`` (n, d_model); ``q``, ``k`` (n, d_k); ``v`` (n, d_v); ``scores``,
        ``scaled``, ``weights`` (n, n); ``output`` (n, d_v).
    tokens : sequence of str, length n
        Row labels (and column labels of the n x n matrices).
    step : int, optional
        ``0`` to ``5``: draw the state after that step (the matrices of later
        steps are empty dashed frames, this step's panels are outlined and its
        caption from :data:`PIPELINE_STEPS` is the title).  Default: every
        step done, nothing highlighted (the static figure).
    figsize : (float, float)
    fmt : str
        Format of the values written in the cells.

    Returns
    -------
    matplotlib Figure
    """
    import matplotlib.pyplot as plt

    setup()
    arrays = _pipeline_arrays(matrices, tokens)
    if step is not None and not (isinstance(step, int) and 0 <= step < len(PIPELINE_STEPS)):
        raise ValueError(f"step 必须是 0 到 {len(PIPELINE_STEPS) - 1} 的整数或 None，收到 {step!r}。 (bad step)")
    fig = plt.figure(figsize=figsize, layout="constrained")
    n_rows = 1 + max(row for *_, row in _PANELS)
    rows = fig.subfigures(n_rows, 1, hspace=0.02)
    axes: dict[str, object] = {}
    for r in range(n_rows):
        keys = [key for key, _, _, row in _PANELS if row == r]
        widths = [max(arrays[key].shape[1], 2) for key in keys]
        for key, ax in zip(keys, rows[r].subplots(1, len(keys), width_ratios=widths), strict=True):
            axes[key] = ax
    labels = list(tokens)
    for key, title, made_at, _ in _PANELS:
        ax, a = axes[key], arrays[key]
        if step is not None and made_at > step:
            _pending_panel(ax, a, title)
            continue
        square = key in ("scores", "scaled", "weights")
        colours = {"cmap": "Blues", "vmin": 0.0, "vmax": max(float(a.max()), 1e-12)} if key == "weights" else {}
        matrix_heatmap(a, labels, labels if square else None, ax=ax, title=title, fmt=fmt, **colours)
        if step is not None and made_at == step:
            ax.title.set_color(_HIGHLIGHT)
            for side in ax.spines.values():
                side.set_visible(True)
                side.set_color(_HIGHLIGHT)
                side.set_linewidth(3)
    n, d_model, d_k, d_v = arrays["x"].shape[0], arrays["x"].shape[1], arrays["q"].shape[1], arrays["v"].shape[1]
    sizes = f"n = {n}，d_model = {d_model}，d_k = {d_k}，d_v = {d_v}"
    if step is None:
        fig.suptitle(f"缩放点积注意力的六个步骤\n{sizes}", fontsize=11)
    else:
        fig.suptitle(f"{_STEP_TITLES[step]}\n{sizes}", fontsize=11, color=_HIGHLIGHT)
    return fig


def figure_png(fig, *, dpi: int = 80, colors: int | None = None, close: bool = True) -> bytes:
    """The PNG bytes of a matplotlib figure.

    Parameters
    ----------
    fig : matplotlib Figure
    dpi : int
        Resolution.
    colors : int, optional
        Reduce the image to a palette of this many colours (2 to 256): figures of
        flat colour cells and text stay sharp and the file gets several times smaller.
    close : bool
        Close the figure afterwards (so a notebook does not also show it).

    Returns
    -------
    bytes
    """
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white")
    if close:
        plt.close(fig)
    if colors is None:
        return buffer.getvalue()
    if not (isinstance(colors, int) and 2 <= colors <= 256):
        raise ValueError(f"colors 必须是 2 到 256 的整数，收到 {colors!r}。 (colors must be in [2, 256])")
    from PIL import Image

    small = io.BytesIO()
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=colors).save(small, format="png", optimize=True)
    return small.getvalue()


# --------------------------------------------------------------------------- a player that needs no kernel

_PLAYER_STYLE = """
.attn-player { margin: 1em 0; }
.attn-player-frame { display: block; max-width: 100%; height: auto; background: white; }
.attn-player-frame[hidden] { display: none; }
.attn-player-caption { font-weight: bold; margin: 0.4em 0; }
.attn-player-controls { display: flex; flex-wrap: wrap; gap: 0.4em; align-items: center; margin-bottom: 0.6em; }
.attn-player-controls[hidden] { display: none; }
.attn-player-controls button { padding: 0.2em 0.8em; border: 1px solid #888; border-radius: 4px;
  background: #f4f4f4; color: #222; cursor: pointer; font-size: 0.95em; }
.attn-player-controls button:hover { background: #e4e4e4; }
.attn-player-slider { flex: 1 1 8em; min-width: 8em; }
@media print { .attn-player-controls { display: none !important; } }
"""

# Runs once where the player is inserted (a static HTML page or a trusted notebook); no global names.
_PLAYER_SCRIPT = """
(function () {
  var root = document.currentScript.parentNode;
  var frames = root.querySelectorAll(".attn-player-frame");
  var captions = JSON.parse(root.getAttribute("data-captions"));
  var interval = Number(root.getAttribute("data-interval"));
  var controls = root.querySelector(".attn-player-controls");
  var slider = root.querySelector(".attn-player-slider");
  var caption = root.querySelector(".attn-player-caption");
  var playButton = root.querySelector("button[data-action='play']");
  var current = 0, timer = null;
  function show(i) {
    current = Math.max(0, Math.min(frames.length - 1, i));
    for (var j = 0; j < frames.length; j++) { frames[j].hidden = (j !== current); }
    slider.value = String(current);
    caption.textContent = (current + 1) + " / " + frames.length + "\\u3000" + captions[current];
    root.setAttribute("data-current", String(current));
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    playButton.textContent = "\\u25b6 播放";
    root.setAttribute("data-playing", "false");
  }
  function play() {
    if (current === frames.length - 1) { show(0); }
    timer = setInterval(function () {
      if (current >= frames.length - 1) { stop(); } else { show(current + 1); }
    }, interval);
    playButton.textContent = "\\u2016 暂停";
    root.setAttribute("data-playing", "true");
  }
  controls.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) { return; }
    var action = button.getAttribute("data-action");
    if (action === "play") { if (timer === null) { play(); } else { stop(); } return; }
    stop();
    if (action === "first") { show(0); }
    else if (action === "prev") { show(current - 1); }
    else if (action === "next") { show(current + 1); }
    else if (action === "last") { show(frames.length - 1); }
  });
  slider.addEventListener("input", function () { stop(); show(parseInt(slider.value, 10)); });
  controls.hidden = false;
  show(0);
  root.classList.add("attn-player-ready");
})();
"""

_BUTTONS = (("first", "第一步", "« 第一步"), ("prev", "上一步", "‹ 上一步"), ("play", "播放", "▶ 播放"),
            ("next", "下一步", "下一步 ›"), ("last", "最后一步", "最后一步 »"))


def step_player_html(frames: Sequence[bytes], captions: Sequence[str], *, interval_ms: int = 1600,
                     label: str = "分步动画") -> str:
    """A self-contained HTML animation of PNG frames that plays with no kernel and no network.

    Every frame is embedded as a ``data:`` URI.  The caption of the current
    frame and the controls (first, previous, play/pause, next and last
    buttons, a slider) sit above the frames, so they stay in view however
    tall a frame is.  Without scripts the first frame and its caption are
    shown and the controls stay hidden.  Display it in a notebook with
    ``IPython.display.HTML(step_player_html(...))``.

    Parameters
    ----------
    frames : sequence of bytes, length n_frames
        PNG images (see :func:`figure_png`).
    captions : sequence of str, length n_frames
        One caption per frame.
    interval_ms : int
        Time between frames while playing, in milliseconds.
    label : str
        Accessible name of the player.

    Returns
    -------
    str
        One ``<div class="attn-player">`` with its style and script inline.
    """
    frames, captions = list(frames), [str(c) for c in captions]
    if not frames:
        raise ValueError("frames 至少要有一帧。 (no frames)")
    if len(frames) != len(captions):
        raise ValueError(f"frames 有 {len(frames)} 帧，captions 却有 {len(captions)} 条；两者应一一对应。 "
                         "(one caption per frame)")
    bad = [i for i, f in enumerate(frames) if not bytes(f).startswith(b"\x89PNG\r\n\x1a\n")]
    if bad:
        raise ValueError(f"第 {bad} 帧不是 PNG 图像。 (frames must be PNG bytes)")
    if not (isinstance(interval_ms, int) and interval_ms > 0):
        raise ValueError(f"interval_ms 必须是正整数，收到 {interval_ms!r}。 (interval_ms must be > 0)")
    ident = hashlib.sha256(b"".join(frames) + json.dumps(captions).encode()).hexdigest()[:12]
    images = "\n".join(
        f'<img class="attn-player-frame" data-frame="{i}" alt="{html.escape(c)}"'
        f'{" hidden" if i else ""} src="data:image/png;base64,{base64.b64encode(bytes(f)).decode("ascii")}">'
        for i, (f, c) in enumerate(zip(frames, captions, strict=True)))
    buttons = "\n".join(f'<button type="button" data-action="{a}" title="{t}">{text}</button>'
                        for a, t, text in _BUTTONS)
    data = html.escape(json.dumps(captions, ensure_ascii=False), quote=True)
    first = html.escape(f"1 / {len(frames)}\u3000{captions[0]}")
    return (f'<div class="attn-player" id="attn-player-{ident}" role="group" aria-label="{html.escape(label)}" '
            f'data-frames="{len(frames)}" data-interval="{interval_ms}" data-current="0" data-captions="{data}">\n'
            f"<style>{_PLAYER_STYLE}</style>\n"
            f'<p class="attn-player-caption" aria-live="polite">{first}</p>\n'
            f'<div class="attn-player-controls" hidden>\n{buttons}\n'
            f'<input class="attn-player-slider" type="range" min="0" max="{len(frames) - 1}" step="1" value="0" '
            f'aria-label="选择步骤">\n</div>\n{images}\n<script>{_PLAYER_SCRIPT}</script>\n</div>')


def pipeline_animation(matrices: Mapping[str, object], tokens: Sequence[str], *, dpi: int = 90, colors: int = 64,
                       interval_ms: int = 1800, figsize: tuple[float, float] = (6.4, 8.6)) -> str:
    """The pipeline of :func:`pipeline_figure`, one frame per step, as a self-contained HTML player.

    Parameters
    ----------
    matrices : mapping of str to array_like
        As in :func:`pipeline_figure`.
    tokens : sequence of str, length n
    dpi : int
        Resolution of the frames (they are embedded in the page: keep it modest).
    colors : int
        Palette size of the frames (see :func:`figure_png`).
    interval_ms : int
        Time between frames while playing.
    figsize : (float, float)

    Returns
    -------
    str
        HTML (see :func:`step_player_html`) with ``len(PIPELINE_STEPS)`` frames.
    """
    frames = [figure_png(pipeline_figure(matrices, tokens, step=i, figsize=figsize), dpi=dpi, colors=colors)
              for i in range(len(PIPELINE_STEPS))]
    return step_player_html(frames, PIPELINE_STEPS, interval_ms=interval_ms, label="注意力流水线分步动画")
