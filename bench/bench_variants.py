"""What per-student variants cost a student: the quiz's question cells, run as a student's kernel runs them.

Target:

* rendering a student's variant adds at most 0.2 s to opening or validating a
  quiz: the question cells (``qNN_show``: build the ``quiz.Question``, draw the
  student's order and numbers, display them) of each released quiz, run in a
  fresh kernel after the setup cell, take at most 0.2 s together.  Before
  variants the options were plain Markdown and cost nothing to run, so this is
  the whole of what was added; Validate runs the same cells in its own kernel.

Also reported: the same cells for the canonical variant (no student), and the
variant alone (order, numbers and Markdown of all questions, no display) in
this process, per student.  Class grading of a quiz with variants is in
``bench_grading`` (its quiz batch).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from attnlib import variants  # noqa: E402

TARGET = 0.2
STUDENTS = [f"s{i:03d}" for i in range(200)]


def quizzes() -> list[pathlib.Path]:
    """The released quizzes that show their questions through ``quiz.Question`` cells."""
    return [p for p in sorted((REPO / "notebooks").glob("quiz-*/quiz-*.ipynb")) if _show_cells(_read(p))]


def _read(path: pathlib.Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def _show_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and _grade_id(c).endswith("_show")]


def _seconds(cell) -> float:
    """A cell's run time as the kernel reports it (nbclient's ``record_timing``)."""
    timing = cell.metadata["execution"]
    start, end = (datetime.datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def show_seconds(path: pathlib.Path, student: str | None) -> tuple[float, int]:
    """Seconds the setup cell plus every question cell take in a fresh kernel of ``student``; how many cells."""
    nb = _read(path)
    cells = [c for c in nb.cells if _grade_id(c) == "setup"] + _show_cells(nb)
    nb.cells = cells
    env = {k: v for k, v in os.environ.items() if k not in (variants.ENV_STUDENT, "JUPYTERHUB_USER")}
    if student:
        env[variants.ENV_STUDENT] = student
    client = NotebookClient(nb, timeout=60, kernel_name="python3", record_timing=True,
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no TCP warning on stderr
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    shown = cells[1:]
    assert all(o.get("metadata", {}).get("attnlib_variant", {}).get("student") == student
               for c in shown for o in c.outputs if o.output_type == "display_data")
    return sum(_seconds(c) for c in shown), len(shown)


def variant_seconds(path: pathlib.Path) -> float:
    """Seconds per student to draw every question's variant and write its Markdown, in this process."""
    namespace: dict = {}
    nb = _read(path)
    for cell in [c for c in nb.cells if _grade_id(c) == "setup"] + _show_cells(nb):
        source = "\n".join(line for line in cell.source.splitlines() if not line.strip().endswith(".show()"))
        with contextlib.redirect_stdout(io.StringIO()):  # the setup cell's line saying whose order it shows
            exec(source, namespace)  # noqa: S102 - the course's own question cells
    from attnlib import quiz

    questions = [q for q in namespace.values() if isinstance(q, quiz.Question)]
    start = time.perf_counter()
    for student in STUDENTS:
        for q in questions:
            q.markdown(q.variant(student))
    return (time.perf_counter() - start) / len(STUDENTS)


def main() -> None:
    paths = quizzes()
    if not paths:
        print("no quiz shows its questions through quiz.Question cells yet: nothing to measure")
        return
    worst = 0.0
    for path in paths:
        student, n = show_seconds(path, "alice")
        canonical, _ = show_seconds(path, None)
        worst = max(worst, student)
        print(f"{path.stem}: {n} question cells in a fresh kernel: {student:.3f} s for a student, "
              f"{canonical:.3f} s canonical; the variants alone {variant_seconds(path) * 1e3:.2f} ms per student")
    verdict = "ok" if worst <= TARGET else "MISSED"
    print(f"rendering a student's variant adds at most {worst:.3f} s to opening or validating a quiz "
          f"(target <= {TARGET:.1f})  {verdict}")


if __name__ == "__main__":
    main()
