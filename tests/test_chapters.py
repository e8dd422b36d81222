"""What every chapter of the course meets, checked once for all of them (the chapters are in ``chapters.CHAPTERS``).

A page has the usual shape (front matter, length, pitfalls, summary, exercises,
self-check, in that order) and leads into the next chapter of the toc; every
number of its prose is glued by its cells under the chapter's prefix, as a
plain number; its code fits the page; its self-check is small; its assignment
has the points the table says and releases what its exercises ask for.  The
chapter's own claims, and its assignment's grading by nbgrader
(``assignments.grade``, which checks this contract again on the scores), are in
``tests/test_chNN.py``.
"""

from __future__ import annotations

import re

import nbformat
import pytest
import yaml
from assignments import MARKERS
from chapters import CHAPTERS, NOT_LESSONS, letters, questions, toc_chapters
from lessons import (
    ROOT,
    assert_code_lines_fit_the_page,
    assert_glued_values_are_plain_numbers,
    chinese_characters,
    code_cells,
    prose,
    section,
)
from nbrun import grade_id, is_test_cell, source_notebook

EACH = pytest.mark.parametrize("chapter", CHAPTERS, ids=str)


def test_every_chapter_of_the_toc_is_in_the_table():
    """A new chapter in ``_toc.yml`` is held to this contract: the table must say what its assignment gives."""
    toc = toc_chapters()
    assert [name for name in toc if name not in NOT_LESSONS] == [c.name for c in CHAPTERS]
    assert set(NOT_LESSONS) <= set(toc)


CHINESE_NUMERALS = "零一二三四五六七八九十"


def test_the_preface_counts_the_parts_and_chapters_of_the_toc():
    """The 前言's 课程路线 says how many parts and chapters the book has, and lists each part: as the toc has them."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    parts = [part["caption"] for part in toc["parts"] if part["caption"] != "附录"]
    text = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    said = re.search(r"全书分为(.)个部分和附录，共 (\d+) 章", text)
    assert said, "前言里找不到“全书分为……个部分和附录，共 …… 章”"
    assert (CHINESE_NUMERALS.index(said[1]), int(said[2])) == (len(parts), len(toc_chapters()))
    listed = re.findall(r"^- \*\*(第.部分 \S+)\*\*：", text, re.M)
    assert listed == parts, (listed, parts)


# --------------------------------------------------------------------------- the page

@EACH
def test_page_has_the_usual_shape_and_length(chapter):
    text = chapter.page.read_text(encoding="utf-8")
    model = (ROOT / "book" / "ch05-softmax.md").read_text(encoding="utf-8")
    assert text.split("---", 2)[1] == model.split("---", 2)[1]  # the same front matter as the model chapter
    assert 1500 <= chinese_characters(chapter.page) <= 3500, chinese_characters(chapter.page)
    order = ["## 小结", "## 练习", f"```{{exercises}} {chapter.name}", "## 自测",
             f"```{{selfcheck}} selfchecks/{chapter.name}.yml"]
    if chapter.pitfalls:
        order.insert(0, f"## {chapter.pitfalls}")
    places = [text.find(part) for part in order]
    assert -1 not in places and places == sorted(places), dict(zip(order, places, strict=True))
    assert chapter.selfcheck.is_file()


@EACH
def test_terms_are_glossed_where_they_first_appear(chapter):
    body = prose(chapter.page)
    for term in chapter.terms:
        assert term in body, term
    if "词元（token）" in chapter.terms:
        assert body.index("词元（token）") <= body.index("词元")  # glossed where it first appears


@EACH
def test_the_summary_leads_into_the_next_chapter_of_the_toc(chapter):
    """A {doc} link to a page missing from _toc.yml breaks the -W build; the next chapter of the toc is linked."""
    toc = toc_chapters()
    after = toc[toc.index(chapter.name) + 1:]
    if not after:
        pytest.skip(f"{chapter.name} is the last chapter of the toc")
    assert f"{{doc}}`{after[0]}`" in section(prose(chapter.page), "小结")


# --------------------------------------------------------------------------- glued numbers and code

def _glued_names(chapter) -> list[re.Pattern]:
    """The names the cells glue; a name built by an f-string stands for the names its placeholders can make."""
    names = []
    for is_f, name in re.findall(r'glue\(\s*(f?)"([^"]+)"', "\n".join(code_cells(chapter.page))):
        parts = re.split(r"\{(\w+)\}", name) if is_f else [name]
        pattern = "".join(re.escape(p) if i % 2 == 0 else
                          ("(?:" + "|".join(map(re.escape, chapter.glue_fills[p])) + ")"
                           if p in chapter.glue_fills else r"\w+")
                          for i, p in enumerate(parts))
        names.append(re.compile(pattern))
    return names


@EACH
def test_every_glued_number_is_glued_by_a_cell_and_named_for_the_chapter(chapter):
    glued = _glued_names(chapter)
    used = set(re.findall(r"\{glue:text\}`([^`:]+)", prose(chapter.page)))
    assert used, "the prose glues no number"
    assert not [u for u in used if not any(g.fullmatch(u) for g in glued)]
    assert all(g.pattern.startswith(re.escape(chapter.prefix)) for g in glued), [g.pattern for g in glued]


@pytest.mark.cjk_font
@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.executed], ids=str)
def test_glued_values_are_plain_numbers(chapter):
    """MyST-NB prints a glued value's repr: the cells glue plain numbers (the lesson's run is the chapter tests')."""
    from chapters import glued

    assert_glued_values_are_plain_numbers(chapter.page, glued(chapter.name))


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.columns], ids=str)
def test_code_lines_fit_the_page(chapter):
    assert_code_lines_fit_the_page(chapter.page, chapter.columns)


# --------------------------------------------------------------------------- the self-check

@EACH
def test_selfcheck_is_small_and_its_answers_are_the_table_s(chapter):
    asked = questions(chapter.name)
    assert 3 <= len(asked) <= 4
    if chapter.answers is not None:
        assert tuple(letters(q) for q in asked) == chapter.answers


# --------------------------------------------------------------------------- the assignment

@EACH
def test_assignment_has_the_table_s_points_hidden_tests_and_a_written_answer(chapter):
    nb = source_notebook(chapter.name)
    tests = {grade_id(c): c.metadata.nbgrader["points"] for c in nb.cells if is_test_cell(c)}
    assert list(tests.items()) == list(chapter.points.items())
    by_hand = [c.metadata.nbgrader["points"] for c in nb.cells
               if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")]
    assert by_hand == [chapter.written]
    assert "### BEGIN HIDDEN TESTS" in "".join(c.source for c in nb.cells)


@EACH
def test_the_committed_release_offers_the_exercises_and_hides_the_answers(chapter):
    text = (ROOT / "notebooks" / chapter.name / f"{chapter.name}.ipynb").read_text(encoding="utf-8")
    assert not [m for m in MARKERS if m in text]
    for name in chapter.released:
        assert name in text, name
    assert nbformat.reads(text, as_version=4).cells


# --------------------------------------------------------------------------- figures

@EACH
def test_every_chapter_draws_a_figure_and_cites_it(chapter):
    """README rule 11 asks every chapter for figures: at least one executed figure with a name ``fig-chNN-…``,
    a Chinese caption and Chinese alt text, cited by ``{numref}`` in the prose (tests/test_one_book.py checks
    every figure that is there; this one that there is one)."""
    from lessons import cell_options

    chinese = re.compile(r"[\u4e00-\u9fff]")
    figures = [o["mystnb"] for o in cell_options(chapter.page) if "figure" in o.get("mystnb", {})]
    cited = set(re.findall(r"\{numref\}`(?:[^`<]*<)?([^`>]+)>?`", prose(chapter.page)))
    shown = [f["figure"]["name"] for f in figures
             if f["figure"].get("name", "").startswith(f"fig-{chapter.prefix[:-1]}-")
             and chinese.search(f["figure"].get("caption", "")) and chinese.search(f.get("image", {}).get("alt", ""))
             and f["figure"]["name"] in cited]
    assert shown, f"{chapter.name} 没有一幅带名字、中文题注和中文替代文字、并在正文里用 {{numref}} 引用的图"
