"""The book reads as one: the roadmap links every page, each chapter leads into the next, no page is unfinished."""

from __future__ import annotations

import re

import pytest
import yaml
from lessons import ROOT, cell_options, code_cells, prose

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
PAGES = [entry["file"].removeprefix("book/") for part in TOC["parts"] for entry in part["chapters"]]
CHAPTERS = [page for page in PAGES if re.fullmatch(r"ch\d\d-[a-z0-9-]+", page)]


def _text(page: str) -> str:
    return (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")


def test_the_chapters_are_in_the_toc_in_order():
    assert [int(page[2:4]) for page in CHAPTERS] == list(range(1, len(CHAPTERS) + 1)) and len(CHAPTERS) >= 16


def test_the_roadmap_links_every_page_of_the_toc():
    roadmap = _text("intro").split("## 课程路线", 1)[1]
    for page in PAGES:
        assert f"{{doc}}`{page}`" in roadmap, f"前言的课程路线没有链接 {page}"


@pytest.mark.parametrize(("page", "following"), list(zip(CHAPTERS[:-1], CHAPTERS[1:], strict=True)), ids=CHAPTERS[:-1])
def test_each_chapter_leads_into_the_next(page, following):
    before_exercises = _text(page).split("## 练习", 1)[0]
    ending = before_exercises[before_exercises.rindex("\n## "):]  # the last section before the exercises
    assert f"{{doc}}`{following}`" in ending, f"{page} 的最后一节应当链接下一章 {following}"


def test_no_page_says_it_is_unfinished():
    for path in sorted((ROOT / "book").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for phrase in ("还在编写", "尚未写", "敬请期待", "TODO", "待补"):
            assert phrase not in text, (path.name, phrase)


# ---------------------------------------------------------------- figures: described, captioned, referred to by number

#: A code cell that draws: its output is a figure (the first cell's ``plots.setup()`` only configures matplotlib).
DRAWS = re.compile(r"plt\.show\(\)|plt\.subplots\(|\bplots\.(?!setup\b)\w+\(")
#: Words by which a sentence points at a figure ("the figure above", "the left panel" ...).
POINTS_AT_A_FIGURE = re.compile(r"上图|下图|左图|右图|中图|图中|这张图|图里")
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def _figures(page: str, *, with_code: bool = False) -> list:
    """The MyST-NB options (``mystnb:``) of each code cell of ``page`` that draws a figure (with its code)."""
    path = ROOT / "book" / f"{page}.md"
    cells = [(code, options.get("mystnb", {}))
             for code, options in zip(code_cells(path), cell_options(path), strict=True) if DRAWS.search(code)]
    return cells if with_code else [options for _, options in cells]


@pytest.mark.parametrize("page", CHAPTERS)
def test_every_figure_is_described_captioned_and_named(page):
    """Alt text (what the figure shows, for a screen reader), a Chinese caption, and a name for {numref}.

    The step player of chapter 1 is HTML: its frames carry their own descriptions, it needs only the caption.
    """
    for code, options in _figures(page, with_code=True):
        figure, image = options.get("figure", {}), options.get("image", {})
        name = figure.get("name", "")
        assert re.fullmatch(rf"fig-{page[:4]}-[a-z0-9-]+", name), f"{page}: 图的名字应为 fig-{page[:4]}-…：{options}"
        assert CHINESE.search(figure.get("caption", "")), f"{page} {name}: 缺少中文题注"
        if "pipeline_animation" not in code:
            alt = image.get("alt", "")
            assert len(CHINESE.findall(alt)) >= 30, f"{page} {name}: 替代文字应当用中文描述图中画了什么：{alt!r}"


def test_figure_names_are_unique_in_the_book():
    names = [f["figure"]["name"] for page in CHAPTERS for f in _figures(page) if "figure" in f]
    assert len(names) == len(set(names)) >= 36, names


@pytest.mark.parametrize("page", CHAPTERS)
def test_the_prose_refers_to_each_figure_by_its_number(page):
    """Each figure is cited as {numref} in its page, and a paragraph that points at a figure cites it."""
    names = {f["figure"]["name"] for f in _figures(page) if "figure" in f}
    text = prose(ROOT / "book" / f"{page}.md")
    cited = set(re.findall(r"\{numref\}`(?:[^`<]*<)?([^`>]+)>?`", text))
    assert names <= cited, f"{page}: 正文没有引用 {sorted(names - cited)}"
    assert cited <= names, f"{page}: 引用了本章没有的图 {sorted(cited - names)}"
    for paragraph in text.split("\n\n"):
        if POINTS_AT_A_FIGURE.search(paragraph):
            assert "{numref}" in paragraph, f"{page}: 这一段说到图，却没有用编号引用：{paragraph[:80]}"
