"""The kept wrong-but-plausible solutions (``grading/wrong/<assignment>/*.py``) are caught by the hidden tests.

Each kept file names the mistake and the test cells that must catch it.  With
the hidden tests, every one of those cells must lose points; the solution
notebook itself must score full marks in the same runner (so a loss is the
mistake's doing).  What the visible tests alone give is recorded in the
failure message: a student may well pass them with the mistake.
"""

from __future__ import annotations

import pathlib

import pytest
from nbrun import ROOT, is_test_cell, read_wrong_solution, run, source_notebook

WRONG = ROOT / "grading" / "wrong"
FIXTURES = sorted(WRONG.glob("*/*.py"))
CHAPTER_ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.name.startswith("ch"))

pytestmark = pytest.mark.grading


def _points(nb) -> dict[str, float]:
    return {c.metadata.nbgrader.grade_id: float(c.metadata.nbgrader.points) for c in nb.cells if is_test_cell(c)}


@pytest.mark.parametrize("assignment", CHAPTER_ASSIGNMENTS)
def test_every_chapter_assignment_keeps_at_least_two_wrong_solutions(assignment):
    kept = sorted((WRONG / assignment).glob("*.py"))
    assert len(kept) >= 2, f"{assignment}: keep at least two wrong-but-plausible solutions in grading/wrong/"


@pytest.mark.parametrize("assignment", CHAPTER_ASSIGNMENTS)
def test_the_solution_scores_full_marks_in_this_runner(assignment):
    nb = source_notebook(assignment)
    assert run(nb) == pytest.approx(_points(nb))


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.name}/{p.stem}" for p in FIXTURES])
def test_hidden_tests_catch_the_kept_wrong_solution(path: pathlib.Path):
    what, caught_by, cells = read_wrong_solution(path)
    nb = source_notebook(path.parent.name)
    points = _points(nb)
    assert set(caught_by) <= set(points), f"{path.name}: unknown test cells {set(caught_by) - set(points)}"
    full = run(nb, replace=cells)
    visible = run(nb, replace=cells, hidden=False)
    missed = {cell: full[cell] for cell in caught_by if full[cell] >= points[cell] - 1e-9}
    assert not missed, (f"{path.name} ({what}) is not caught by {sorted(missed)}; "
                        f"with hidden tests {full}, visible tests alone {visible}")
