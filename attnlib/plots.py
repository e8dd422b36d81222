"""Matplotlib setup and figures shared by the lessons (Chinese labels render as glyphs).

Call :func:`setup` once at the top of a lesson; every helper here calls it too::

    from attnlib import plots
    plots.setup()
    plots.attention_heatmap(weights, ["我", "爱", "北京"], ["我", "爱", "北京"])

Matplotlib keeps a cached list of the fonts it knows.  A cache written before a
CJK font was installed does not list it, so :func:`setup` also asks fontconfig
(``fc-list :lang=zh``) for font files and registers them itself.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
from matplotlib import font_manager

__all__ = ["CJK_FAMILIES", "attention_heatmap", "cjk_font_family", "setup", "weight_bars"]

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
