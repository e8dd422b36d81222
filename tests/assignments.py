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

import nbformat
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
        dest = course.path("submitted", student, assignment)
        dest.mkdir(parents=True)
        nbformat.write(nb, str(dest / f"{assignment}.ipynb"))
    course.nbgrader("autograde", assignment, "--force")
    scores = {}
    with Gradebook(f"sqlite:///{course.path('gradebook.db')}") as gb:
        for student in submissions:
            nb = gb.find_submission_notebook(assignment, assignment, student)
            scores[student] = {g.name: g.auto_score for g in nb.grades} | {"max_score": nb.max_score}
    return scores
