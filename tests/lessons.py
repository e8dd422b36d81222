"""Run a lesson page's code cells here, in order, in one namespace, as the book build does.

A chapter's tests then assert the claims its prose makes on the variables the
cells leave behind (the prose's numbers are glued from the same variables).
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
CODE_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)


def code_cells(page: pathlib.Path) -> list[str]:
    """The sources of the ``{code-cell}`` blocks of a MyST lesson page."""
    return CODE_CELL.findall(page.read_text(encoding="utf-8"))


def prose(page: pathlib.Path) -> str:
    """The page without front matter, code cells and display math: what a reader reads as text."""
    text = page.read_text(encoding="utf-8")
    if text.startswith("---"):
        text = text.split("---", 2)[2]
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)


def chinese_characters(page: pathlib.Path) -> int:
    """How many Chinese characters the page's prose has (the measure of a lesson's length)."""
    return len(re.findall(r"[\u4e00-\u9fff]", prose(page)))


def run_lesson(page: pathlib.Path) -> dict:
    """Execute every code cell of ``page`` (figures on the Agg backend, then closed); return the namespace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace: dict = {"__name__": f"__{page.stem.replace('-', '_')}__"}
    for i, cell in enumerate(code_cells(page)):
        exec(compile(cell, f"{page.name}[cell {i}]", "exec"), namespace)  # noqa: S102 - our own lesson
    plt.close("all")
    return namespace
