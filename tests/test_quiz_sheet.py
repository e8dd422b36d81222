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
QUIZZES = ("quiz-sdpa", "quiz-qkv", "quiz-modern", "quiz-frontier", "quiz-practice")
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


def _grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


@pytest.mark.parametrize("name", QUIZZES)
def test_every_question_shows_its_options_from_a_locked_cell(released, name):
    """Heading and stem in Markdown, then the locked cell that shows the options in the student's order."""
    nb = released[name]
    ids = [_grade_id(c) for c in nb.cells]
    assert ids[:2] == ["intro", "setup"] and f'quiz.announce("{name}")' in nb.cells[1].source
    for n in range(1, 11):
        i = ids.index(f"q{n:02d}_text")
        assert ids[i:i + 4] == [f"q{n:02d}_text", f"q{n:02d}_show", f"q{n:02d}", f"q{n:02d}_test"]
        text, show, test = nb.cells[i], nb.cells[i + 1], nb.cells[i + 3]
        assert text.source.startswith(f"## 第 {n} 题（") and "- **A.**" not in text.source
        meta = show.metadata["nbgrader"]
        assert show.cell_type == "code" and meta["locked"] and not meta["grade"] and not meta["solution"]
        assert show.source.startswith(f'Q{n} = quiz.Question("{name}", {n}, ') and show.source.endswith(f"Q{n}.show()")
        assert f"Q{n}.check(_answer)" in test.source and "quiz.grade" not in test.source


@pytest.mark.parametrize("name", QUIZZES)
def test_the_released_cells_show_each_student_their_own_order(released, name, monkeypatch):
    """Run the setup and show cells of the release as a student would: the options come in that student's order."""
    from attnlib import variants

    cells = [c for c in released[name].cells if _grade_id(c) == "setup" or _grade_id(c).endswith("_show")]
    orders = {}
    for student in ("alice", "bob", "carol"):
        monkeypatch.setenv("JUPYTERHUB_USER", student)
        shown = []
        namespace = {}
        monkeypatch.setattr(quiz.Question, "show", lambda self, shown=shown: shown.append(
            (self.markdown(), self.variant().order)))
        for cell in cells:
            exec(cell.source, namespace)  # the release's own locked cells
        assert len(shown) == 10
        for text, _ in shown:
            assert re.findall(r"^- \*\*([A-D])\.\*\*", text, re.M) == list("ABCD")
        orders[student] = [order for _, order in shown]
        assert variants.student_id() == student
    # every question is shown in more than one order (two students may draw the same one: 1 in 24)
    assert all(len(set(seen)) > 1 for seen in zip(*orders.values(), strict=True))
