"""An assignment generated, submitted and autograded by nbgrader in a throw-away course, as an instructor would.

A chapter's test builds submissions (the source, the blank release, notebooks
with some answer cells replaced: kept wrong solutions, a delegation to attnlib,
right answers that write to stderr) and checks the score nbgrader gives each
graded cell::

    course, release = generated(tmp_path, "ch05-softmax")
    scores = autograde(course, "ch05-softmax", {"blank": nbformat.read(release, as_version=4), ...})
    scores["blank"]["test_softmax_stable"]    # the cell's automatic score
"""

from __future__ import annotations

import pathlib
import re

import nbformat
import pytest
from nbrun import ROOT as ROOT_DIR
from nbrun import grade_id

MARKERS = ("BEGIN SOLUTION", "HIDDEN TESTS")


def generated(tmp_path: pathlib.Path, assignment: str):
    """A course in ``tmp_path`` holding ``assignment``'s source, its student version generated.

    Returns ``(course, release notebook path)``; the release is checked to hold no solution or hidden test.
    """
    from grading.course import Course

    course = Course(tmp_path)
    course.add_sources([assignment])
    course.nbgrader("generate_assignment", assignment, "--force")
    release = course.path("notebooks", assignment, f"{assignment}.ipynb")
    text = release.read_text(encoding="utf-8")
    assert not [m for m in MARKERS if m in text], f"{assignment}: the release leaks {MARKERS}"
    return course, release


def source(course, assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(course.path("solutions", assignment, f"{assignment}.ipynb"), as_version=4)


def with_cells(nb: nbformat.NotebookNode, sources: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose cells with these grade ids have the given sources (as a student filled them)."""
    nb = nbformat.from_dict(nb)
    unknown = set(sources) - {grade_id(c) for c in nb.cells}
    assert not unknown, f"no cells {sorted(unknown)}"
    for cell in nb.cells:
        if grade_id(cell) in sources:
            cell.source = sources[grade_id(cell)]
    return nb


def autograde(course, assignment: str, submissions: dict[str, nbformat.NotebookNode]) -> dict[str, dict]:
    """Submit each notebook under its student's name, autograde, and read the gradebook.

    Returns ``{student: {grade cell id: automatic score, "max_score": notebook max score}}``.
    """
    from nbgrader.api import Gradebook

    for student, nb in submissions.items():
        course.submit(assignment, student, nb)
    course.nbgrader("autograde", assignment, "--force")
    scores = {}
    with Gradebook(f"sqlite:///{course.path('gradebook.db')}") as gb:
        for student in submissions:
            nb = gb.find_submission_notebook(assignment, assignment, student)
            scores[student] = {g.name: g.auto_score for g in nb.grades} | {"max_score": nb.max_score}
    return scores


def grade(tmp_path: pathlib.Path, assignment: str, submissions, expected: dict[str, list], *, tol: float = 1e-6):
    """Generate ``assignment``, autograde its source, its blank release and the chapter's ``submissions``.

    The contract every assignment meets (the chapter's row of ``chapters.CHAPTERS``): the release hides the
    solutions and hidden tests and offers what the exercises ask for; the source gets every point of every
    autograded cell, the blank release none; every notebook's maximum is the autograded points plus the written
    answer's.  ``submissions(source, blank)`` gives the chapter's own ``{student: notebook}``, and ``expected``
    their scores, cell by cell in the table's order.  Returns ``(course, {student: scores})``.
    """
    from chapters import BY_NAME

    chapter = BY_NAME[assignment]
    course, release = generated(tmp_path, assignment)
    released = release.read_text(encoding="utf-8")
    assert not [name for name in chapter.released if name not in released]
    model, blank = source(course, assignment), nbformat.read(release, as_version=4)
    got = autograde(course, assignment, {"source": model, "blank": blank} | submissions(model, blank))
    cells = list(chapter.points)
    expected = {"source": list(chapter.points.values()), "blank": [0] * len(cells)} | expected
    assert set(expected) == set(got), (sorted(expected), sorted(got))
    for student, scores in expected.items():
        assert [got[student][c] for c in cells] == pytest.approx(scores, abs=tol), (student, got[student])
        assert got[student]["max_score"] == chapter.max_score
    return course, got


def wrong_cells(assignment: str, *names: str) -> dict[str, str]:
    """The cells these kept wrong solutions replace (``grading/wrong/<assignment>/<name>.py``), merged in order."""
    from nbrun import ROOT, read_kept

    cells: dict[str, str] = {}
    for name in names:
        cells |= read_kept(ROOT / "grading" / "wrong" / assignment / f"{name}.py").cells
    return cells


def model_cells(assignment: str) -> dict[str, str]:
    """``{solution cell id: source}`` of the assignment's model answer."""
    from nbrun import source_notebook

    return {grade_id(c): c.source for c in source_notebook(assignment).cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def hidden_lines(assignment: str) -> list[str]:
    """The lines of ``assignment``'s hidden tests that a student never sees: inside a ``### BEGIN HIDDEN TESTS``
    block of the source notebook and nowhere in its visible parts (a line also written there, such as an input both
    checks use, gives nothing away).  Lines of 12 characters or fewer are left out (``checks.score()``)."""
    text = (ROOT_DIR / "solutions" / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    hidden, visible = [], []
    for cell in nb.cells:
        blocks = re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S)
        visible.append(re.sub(r"### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS", "", cell.source, flags=re.S))
        hidden += [line.strip() for block in blocks for line in block.splitlines() if len(line.strip()) > 12]
    shown = "\n".join(visible)
    return [line for line in hidden if line not in shown]
