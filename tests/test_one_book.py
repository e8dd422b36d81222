"""The book reads as one: the roadmap links every page, each chapter leads into the next, no page is unfinished."""

from __future__ import annotations

import re

import pytest
import yaml
from lessons import ROOT

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
PAGES = [entry["file"].removeprefix("book/") for part in TOC["parts"] for entry in part["chapters"]]
CHAPTERS = [page for page in PAGES if re.fullmatch(r"ch\d\d-[a-z0-9-]+", page)]


def _text(page: str) -> str:
    return (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")


def test_all_fourteen_chapters_are_in_the_toc_in_order():
    assert [int(page[2:4]) for page in CHAPTERS] == list(range(1, 15))


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
