"""The page every instructor-side analysis is written into: one offline Chinese HTML document.

One template for the item analysis (:mod:`grading.analysis.item_page`) and
the similarity report (:mod:`grading.analysis.similarity_page`): the HTML head
with its inline CSS, the Chinese header (title, when and from what the page was
made, that nothing was run again), inline PNG figures as ``data:`` URIs, and the
number formats the tables share.  Nothing in a page links to the network or
runs a script, so it opens from a USB stick or an e-mail attachment.
"""

from __future__ import annotations

import base64
import datetime
import html
import math

from attnlib.grading import points_text

__all__ = ["CSS", "attr", "corr", "document", "figure_note", "num", "pct", "png_uri"]

CSS = """
body { font-family: "Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", sans-serif;
       max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.6; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { white-space: nowrap; word-break: keep-all; background: #fafafa; }
td.label { white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
tr.key td { background: #e8f5e9; font-weight: bold; }
td.warn { color: #b71c1c; }
.note { background: #f5f5f5; border-left: 4px solid #888; padding: 0.5em 1em; }
.bad { background: #fff3e0; border-left: 4px solid #e65100; padding: 0.5em 1em; }
img { max-width: 100%; height: auto; }
.side { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
"""


def document(title: str, source: str, parts: list[str], *, css: str = "") -> str:
    """The whole page: head (charset, title, inline CSS), the Chinese header, then ``parts`` (HTML, in order).

    Parameters
    ----------
    title : str
        Plain text; the ``<title>`` and the ``<h1>``.
    source : str
        Plain text: what the page was read from and that nothing was run again.
    parts : list of str
        The body's HTML fragments.
    css : str, optional
        Extra rules after the shared ones.
    """
    e = html.escape
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="zh-CN"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title><style>{CSS}{css}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f"<p>生成时间：{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}。{e(source)}</p>",
        *parts, "</body></html>"])


def figure_note() -> str:
    """Set up Matplotlib for Chinese figures; a warning paragraph when no CJK font is installed, else ``""``."""
    from attnlib import plots

    try:
        plots.setup()
    except RuntimeError as exc:
        return f'<p class="bad">注意：{html.escape(str(exc))}</p>'
    return ""


def png_uri(fig) -> str:
    """A figure as a ``data:`` URI (inline PNG, base64)."""
    from attnlib import plots

    return "data:image/png;base64," + base64.b64encode(plots.figure_png(fig, dpi=90)).decode("ascii")


def num(x) -> str:
    """A score for display: ``2.0 -> "2"``, ``1.3333 -> "1.33"``; NaN -> ``"—"``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return points_text(x)


def pct(x: float) -> str:
    """A fraction as a percentage with one decimal; NaN -> ``"—"``."""
    return "—" if math.isnan(x) else f"{100 * x:.1f}%"


def corr(x: float) -> str:
    """A correlation with its sign, ``"0.00"`` when it rounds to zero (never ``"-0.00"``)."""
    if math.isnan(x):
        return "—"
    text = f"{x:+.2f}"
    return "0.00" if text in ("+0.00", "-0.00") else text


def attr(x: float) -> str:
    """A number for a ``data-`` attribute (full precision; empty when undefined)."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else repr(float(x))
