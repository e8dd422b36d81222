"""Autograde cost per submission: nbgrader one at a time against ``scripts/grade_class.py`` in parallel.

Target:

* a batch of 50 generated ``ch05-softmax`` submissions (a mix of the kept
  samples: right, partly right, crashing, noisy, cheating, blank) autograded
  by ``grade_class`` with 2 worker processes in at most 2.0 s of wall time per
  submission, on a 2-core machine; and a batch of 20 ``quiz-sdpa``
  submissions (each student's own option order) within the same 2.0 s.

Also reported, for the chapter assignment ``ch05-softmax`` and the quiz
``quiz-sdpa``: seconds per submission of plain ``nbgrader autograde`` (one
process grading one submission after another, what ``make grade`` does)
against ``grade_class`` with 1 and 2 workers on the same few submissions, and
the floor: executing one notebook in a fresh kernel (nbclient), which every
autograde pays.  Both graders must give every submission the same total.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grading.class_grading import db_url, grade_class  # noqa: E402
from grading.course import Course  # noqa: E402
from grading.samples import BROKEN_SUFFIX  # noqa: E402

SAMPLES = REPO / "grading" / "samples"
# samples that run to the end quickly (no endless loop, no unreadable file)
MIX = {"ch05-softmax": ["correct", "partial", "crash", "noisy", "cheat", "blank"],
       "quiz-sdpa": ["all-correct", "mixed-formats", "invalid-answers"]}
FEW, BATCH, TARGET, JOBS = 6, 50, 2.0, 2
QUIZ_BATCH = 20  # each student graded against their own variant (grading/variants.py)


def fill_class(root: pathlib.Path, assignment: str, n: int) -> pathlib.Path:
    """A course directory at ``root`` with ``n`` submissions cycling through the assignment's samples."""
    for i, sample in zip(range(n), itertools.cycle(MIX[assignment]), strict=False):
        src = SAMPLES / assignment / sample
        assert not list(src.glob(f"*{BROKEN_SUFFIX}")), sample
        shutil.copytree(src, root / "submitted" / f"s{i + 1:03d}-{sample}" / assignment)
    return root


def totals(db: pathlib.Path, assignment: str) -> dict:
    """``{student: total score}`` of one assignment in a gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url(db.parent)) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(assignment)}


def serial_seconds(tmp: pathlib.Path, assignment: str, n: int) -> tuple[float, dict]:
    """Wall time of plain ``nbgrader autograde`` on ``n`` submissions, and the totals it gave."""
    course = Course(tmp / f"serial-{assignment}")
    course.add_sources([assignment])
    course.nbgrader("generate_assignment", assignment, "--force")
    fill_class(course.root, assignment, n)
    start = time.perf_counter()
    course.nbgrader("autograde", assignment, "--force")
    return time.perf_counter() - start, totals(course.path("gradebook.db"), assignment)


def parallel_seconds(tmp: pathlib.Path, assignment: str, n: int, jobs: int,
                     sandbox_user: str | None = None) -> tuple[float, float, dict]:
    """Wall time of ``grade_class`` (whole run; and from the first to the last graded submission), and totals."""
    root = fill_class(tmp / f"class-{assignment}-{n}-{jobs}-{sandbox_user}", assignment, n)
    marks = []
    report = grade_class(root, assignment, jobs=jobs, progress=lambda *_: marks.append(time.perf_counter()),
                         sandbox_user=sandbox_user)
    assert not report.ungraded, report.problem_lines()
    return report.wall_seconds, marks[-1] - marks[0], totals(root / "gradebook.db", assignment)


def execute_seconds(path: pathlib.Path) -> float:
    """Wall time to execute one notebook in a fresh kernel."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True).execute()
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="attn-bench-grading-") as tmp:
        tmp = pathlib.Path(tmp)
        for assignment in MIX:
            floor = execute_seconds(SAMPLES / assignment / MIX[assignment][0] / f"{assignment}.ipynb")
            serial, expected = serial_seconds(tmp, assignment, FEW)
            one, one_steady, got1 = parallel_seconds(tmp, assignment, FEW, 1)
            two, two_steady, got2 = parallel_seconds(tmp, assignment, FEW, JOBS)
            assert got1 == expected and got2 == expected, (expected, got1, got2)
            print(f"{assignment}, {FEW} submissions, seconds per submission (whole command / grading proper):")
            print(f"  nbgrader autograde, one at a time     {serial / FEW:5.2f}")
            print(f"  grade_class, 1 worker                 {one / FEW:5.2f} / {one_steady / (FEW - 1):5.2f}")
            print(f"  grade_class, {JOBS} workers                {two / FEW:5.2f} / {two_steady / (FEW - 1):5.2f}")
            if os.geteuid() == 0:  # the sandbox needs root
                boxed, boxed_steady, got3 = parallel_seconds(tmp, assignment, FEW, JOBS, "nobody")
                assert got3 == expected, (expected, got3)
                print(f"  grade_class, {JOBS} workers, sandboxed     {boxed / FEW:5.2f} / "
                      f"{boxed_steady / (FEW - 1):5.2f}")
            print(f"  floor: one notebook in a fresh kernel {floor:5.2f}")
        for assignment, n in (("ch05-softmax", BATCH), ("quiz-sdpa", QUIZ_BATCH)):
            wall, steady, got = parallel_seconds(tmp, assignment, n, JOBS)
            assert len(got) == n
            per = wall / n
            verdict = "ok" if per <= TARGET else "MISSED"
            print(f"batch of {n} {assignment} submissions, grade_class with {JOBS} workers: {wall:.1f} s wall "
                  f"= {per:.2f} s per submission (target <= {TARGET:.1f})  {verdict}")
            print(f"  of which grading proper (first to last submission done): {steady / (n - 1):.2f} s per "
                  "submission; the rest is start-up (generate_assignment, workers), merge and CSV export")


if __name__ == "__main__":
    main()
