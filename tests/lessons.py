"""Run a lesson page's code cells here, in order, in one namespace, as the book build does.

A chapter's tests then assert the claims its prose makes on the variables the
cells leave behind (the prose's numbers are glued from the same variables).
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
CODE_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)
#: A code cell's options (MyST-NB cell metadata) before its code: a YAML block between ``---`` lines.
CELL_OPTIONS = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def code_cells(page: pathlib.Path) -> list[str]:
    """The sources of the ``{code-cell}`` blocks of a MyST lesson page (the code only, without cell options)."""
    return [CELL_OPTIONS.sub("", cell, count=1) for cell in CODE_CELL.findall(page.read_text(encoding="utf-8"))]


def cell_options(page: pathlib.Path) -> list[dict]:
    """The options (cell metadata) of each ``{code-cell}`` block of ``page``, ``{}`` where it has none."""
    import yaml

    options = [CELL_OPTIONS.match(cell) for cell in CODE_CELL.findall(page.read_text(encoding="utf-8"))]
    return [(yaml.safe_load(m.group(1)) or {}) if m else {} for m in options]


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


def run_lesson_glued(page: pathlib.Path) -> dict:
    """:func:`run_lesson` with what the cells ``glue`` collected under ``"glued"``.

    A lesson may pin torch to one thread (its first cell says so); the test process gets its setting back.
    """
    import myst_nb
    import torch

    glued, real, threads = {}, myst_nb.glue, torch.get_num_threads()
    myst_nb.glue = lambda name, value, display=True: glued.__setitem__(name, value)
    try:
        namespace = run_lesson(page)
    finally:
        myst_nb.glue = real
        torch.set_num_threads(threads)
    return namespace | {"glued": glued}


def section(text: str, heading: str) -> str:
    """The text of a ``## heading`` section, up to the next ``## ``."""
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 3)
    return text[start:] if end < 0 else text[start:end]


def assert_glued_values_are_plain_numbers(page: pathlib.Path, glued: dict) -> None:
    """Every ``{glue:text}`` name of the prose was glued, and as a plain int, float or str.

    MyST-NB formats a glued value's text/plain repr: ``np.float64(...)`` would fail the build. A str is a
    sentence the cell chose (``attnlib.claims.Sentences``).
    """
    used = set(re.findall(r"\{glue:text\}`([^`:]+)", prose(page)))
    assert used <= set(glued)
    assert all(type(v) in (int, float, str) for v in glued.values()), glued


def assert_code_lines_fit_the_page(page: pathlib.Path, columns: int = 74) -> None:
    """The book's code boxes show about 74 columns at 1280 px (a Chinese character takes two)."""
    from grading.nbgrader_validate import display_width

    wide = [line for cell in code_cells(page) for line in cell.splitlines() if display_width(line) > columns]
    assert not wide, wide


def assert_draws_without_warnings(fig) -> None:
    """Drawing ``fig`` warns of nothing (a missing glyph of a Chinese label would)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    assert not caught, [str(w.message) for w in caught]
