"""The quiz sheet a student fills in: blank answer cells, the format shown once on a sample question, "B." read.

The released quizzes are generated here into a temporary folder from
``solutions/`` (as ``make release`` does), so the check holds for what the
next release gives the students.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from attnlib import quiz
from conftest import ROOT, load_script

release = load_script("release")
QUIZZES = ("quiz-sdpa", "quiz-qkv", "quiz-modern", "quiz-frontier")
LETTERS = re.compile(r'answer\s*=\s*["\'][A-Za-z]')


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    dest = tmp_path_factory.mktemp("release")
    release.generate(dest, list(QUIZZES))
    return {q: nbformat.read(dest / q / f"{q}.ipynb", as_version=4) for q in QUIZZES}


def _answer_cells(nb):
    return [c for c in nb.cells if re.fullmatch(r"q\d\d", c.metadata.get("nbgrader", {}).get("grade_id", ""))]


@pytest.mark.parametrize("name", QUIZZES)
def test_every_answer_cell_is_just_a_blank_answer(released, name):
    cells = _answer_cells(released[name])
    assert len(cells) == 10
    assert [c.source for c in cells] == ['answer = ""'] * 10


@pytest.mark.parametrize("name", QUIZZES)
def test_the_format_is_shown_once_on_a_sample_question_outside_the_quiz(released, name):
    nb = released[name]
    shown = [c for c in nb.cells if LETTERS.search(c.source)]
    assert [c.metadata["nbgrader"]["grade_id"] for c in shown] == ["intro"], "例子只能出现在开头的说明里"
    intro = shown[0].source
    assert "示例" in intro and "不是本测验的题目" in intro
    sample_letters = set(re.findall(r'^answer = "([A-Z]+)"', intro, re.M))
    assert sample_letters == {"C", "AD"}


def test_a_letter_with_a_full_stop_is_read():
    assert quiz.parse_answer("B.") == {"B"}
    assert quiz.parse_answer("Ｂ．") == {"B"}
    assert quiz.parse_answer("A. C.") == {"A", "C"}
    assert quiz.check_format("B.", "ABCD", multi=False) is None
    with pytest.raises(quiz.InvalidAnswer):
        quiz.parse_answer("答案B")


def test_the_solutions_keep_the_key_only_inside_the_solution_region():
    for name in QUIZZES:
        nb = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
        for cell in _answer_cells(nb):
            assert re.fullmatch(r'### BEGIN SOLUTION\nanswer = "[A-D]+"\n### END SOLUTION', cell.source), cell.source
