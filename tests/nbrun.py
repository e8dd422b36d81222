"""The course's in-process notebook runner, for the tests (it lives in ``grading/runner.py``).

Used by the tests that hold the kept wrong solutions (``grading/wrong/``) against
an assignment's tests: solution cells can be replaced, the hidden tests kept or
cut out (what a student sees before grading), and every graded test cell is
scored as nbgrader scores it (an error or any stderr output: 0; else the cell's
last value, ``checks.score()``).  ``make audit`` runs the same code, so it lives
under ``grading/``; this module keeps the tests' imports (``from nbrun import ...``).
"""

from __future__ import annotations

from grading.runner import (  # noqa: F401 - re-exported for the tests
    HIDDEN,
    ROOT,
    SEVERITIES,
    CellRun,
    CellTimeout,
    Kept,
    execute,
    grade,
    grade_id,
    is_answer_cell,
    is_test_cell,
    read_kept,
    read_wrong_solution,
    run,
    sheet,
    source_notebook,
)


def nbgrader_cell(source: str, cell_id: str, *, solution: bool = False, points: float | None = None):
    """A code cell with nbgrader's metadata, for the tests' small synthetic notebooks: an answer cell
    (``solution=True``), a graded test cell (``points`` given), or a locked cell of neither kind."""
    import nbformat

    meta = {"grade_id": cell_id, "solution": solution, "grade": points is not None, "locked": not solution,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})
