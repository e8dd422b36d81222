"""Run the instructor's whole nbgrader chain on the sample submissions in ``grading/samples/``.

``make grade`` runs this.  In a temporary course directory (the repository's
``nbgrader_config.py``, a copy of ``solutions/``, the samples as
``submitted/``) it runs ``generate_assignment``, ``autograde`` (with the
per-cell timeout), ``generate_feedback`` and ``export`` (CSV), then prints one
row per student: total, maximum and the score of every graded cell.

Use ``--keep DIR`` to keep the course directory (feedback HTML, grades.csv,
gradebook) for a look; ``--timeout S`` changes the per-cell limit.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from attnlib.grading import points_text  # noqa: E402
from grading.course import REPO, Course, assignments  # noqa: E402
from grading.samples import BROKEN_SUFFIX  # noqa: E402

SAMPLES = REPO / "grading" / "samples"


@dataclass
class Result:
    """One student's graded submission of one assignment.

    ``cells`` maps each graded cell's ``grade_id`` to ``(score, max_score)``;
    ``score`` is None for a manually graded cell not graded yet.
    """

    assignment: str
    student: str
    score: float
    max_score: float
    cells: dict = field(default_factory=dict)


@dataclass
class Report:
    """Everything a run of the chain produced."""

    root: pathlib.Path
    results: list
    autograde_seconds: dict
    ungraded: dict
    csv_rows: list

    def result(self, assignment: str, student: str) -> Result:
        for r in self.results:
            if (r.assignment, r.student) == (assignment, student):
                return r
        raise KeyError(f"{assignment}/{student} 没有成绩（未被评分）")

    def feedback(self, assignment: str, student: str) -> list[pathlib.Path]:
        return sorted((self.root / "feedback" / student / assignment).glob("*.html"))


def sample_assignments(samples: pathlib.Path = SAMPLES) -> list[str]:
    """Assignments that have sample submissions and a source notebook."""
    sources = set(assignments())
    return sorted(p.name for p in samples.iterdir() if p.is_dir() and p.name in sources)


def submit(course: Course, assignment: str, samples: pathlib.Path = SAMPLES) -> list[str]:
    """Copy ``samples/<assignment>/<student>/`` to the course's ``submitted/<student>/<assignment>/``.

    A file ``X.ipynb.broken`` (a deliberately damaged sample, named so that
    linters skip it) is submitted as ``X.ipynb``.
    """
    students = sorted(p.name for p in (samples / assignment).iterdir() if p.is_dir())
    for student in students:
        dest = course.path("submitted", student, assignment)
        shutil.copytree(samples / assignment / student, dest, dirs_exist_ok=True)
        for broken in dest.glob(f"*.ipynb{BROKEN_SUFFIX}"):
            broken.rename(broken.with_suffix(""))
    return students


def run_chain(root, names=None, *, timeout: int | None = None, samples: pathlib.Path = SAMPLES) -> Report:
    """Generate, autograde, give feedback and export grades in a course directory at ``root``.

    Parameters
    ----------
    root : path
        An empty folder for the course (kept afterwards; the caller owns it).
    names : list of str, optional
        Assignments to grade (default: every assignment with samples).
    timeout : int, optional
        Per-cell timeout in seconds (default: the one in ``nbgrader_config.py``).

    Returns
    -------
    Report
    """
    course = Course(root, {"Execute.timeout": timeout} if timeout else None)
    names = sample_assignments(samples) if names is None else list(names)
    course.add_sources(names)
    seconds, ungraded = {}, {}
    for name in names:
        course.nbgrader("generate_assignment", name, "--force")
        students = submit(course, name, samples)
        start = time.perf_counter()
        # autograde exits 1 when a submission cannot be read (e.g. invalid JSON) after grading the others
        course.nbgrader("autograde", name, "--force", check=False)
        seconds[name] = (time.perf_counter() - start, len(students))
        ungraded[name] = [s for s in students if not any(course.path("autograded", s, name).glob("*.ipynb"))]
        course.nbgrader("generate_feedback", name, "--force")
    course.nbgrader("export", f"--to={course.path('grades.csv')}")
    with open(course.path("grades.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    graded = [r for r in read_gradebook(course.path("gradebook.db")) if r.student not in ungraded.get(r.assignment, ())]
    return Report(course.root, graded, seconds, ungraded, rows)


_CELL_SCORES = """
SELECT a.name, st.id, bc.name, g.auto_score, g.manual_score, g.extra_credit, gc.max_score
FROM grade g
JOIN submitted_notebook sn ON g.notebook_id = sn.id
JOIN submitted_assignment sa ON sn.assignment_id = sa.id
JOIN assignment a ON sa.assignment_id = a.id
JOIN student st ON sa.student_id = st.id
JOIN grade_cells gc ON g.cell_id = gc.id
JOIN base_cell bc ON gc.id = bc.id
ORDER BY a.name, st.id, bc.name
"""


def read_gradebook(db: pathlib.Path) -> list[Result]:
    """Per-cell scores of every submission in an nbgrader sqlite gradebook (read-only)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(_CELL_SCORES).fetchall()
    finally:
        con.close()
    results: dict = {}
    for assignment, student, cell, auto, manual, extra, max_score in rows:
        r = results.setdefault((assignment, student), Result(assignment, student, 0.0, 0.0))
        score = manual if manual is not None else auto
        r.cells[cell] = (score, max_score)
        r.score += (score or 0.0) + (extra or 0.0)
        r.max_score += max_score
    return list(results.values())


def cell_order(assignment: str, source: pathlib.Path = REPO / "solutions") -> list[str]:
    """The grade ids of an assignment's graded cells in the order its notebooks show them."""
    import nbformat

    ids = []
    for path in sorted((source / assignment).glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and meta.get("grade_id"):
                ids.append(meta["grade_id"])
    return ids


def format_table(results: list[Result], ungraded: dict | None = None, labels: dict | None = None) -> str:
    """A plain-text table: one row per submission, one column per graded cell, in the notebook's order.

    ``ungraded`` maps an assignment to students whose submission could not be graded; ``labels`` maps a
    cell's grade id to its column heading (default: the grade id).
    """
    lines = []
    ungraded = ungraded or {}
    for assignment in sorted({r.assignment for r in results} | set(ungraded)):
        rows = [r for r in results if r.assignment == assignment]
        order = {cell: i for i, cell in enumerate(cell_order(assignment))}
        cells = sorted({c for r in rows for c in r.cells}, key=lambda c: (order.get(c, len(order)), c))
        header = ["学生 student", "得分 score", "满分 max", *[(labels or {}).get(c, c) for c in cells]]
        table = [header]
        for r in sorted(rows, key=lambda r: r.student):
            shown = [_cell_text(*r.cells[c]) if c in r.cells else "-" for c in cells]
            table.append([r.student, points_text(r.score), points_text(r.max_score), *shown])
        for student in sorted(ungraded.get(assignment, [])):
            table.append([student, "无法评分", "-", *["-" for _ in cells]])
        widths = [max(_width(row[i]) for row in table) for i in range(len(header))]
        lines.append(f"== {assignment} ==")
        for row in table:
            lines.append("  ".join(text + " " * (w - _width(text)) for text, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def _cell_text(score, max_score) -> str:
    return f"待批改/{points_text(max_score)}" if score is None else f"{points_text(score)}/{points_text(max_score)}"


def _width(text: str) -> int:
    """Display width: CJK characters take two columns."""
    return sum(2 if ord(ch) > 0x2E80 else 1 for ch in text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="默认：grading/samples/ 下的每个作业")
    parser.add_argument("--timeout", type=int, default=None, help="每个单元的时限（秒）")
    parser.add_argument("--keep", type=pathlib.Path, default=None, help="把课程目录保留在这里")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="attn-grade-") as tmp:
        root = args.keep if args.keep else pathlib.Path(tmp)
        report = run_chain(root, args.assignments or None, timeout=args.timeout)
        print(format_table(report.results, report.ungraded))
        for name, (secs, n) in report.autograde_seconds.items():
            print(f"{name}: autograde {secs:.1f} s / {n} 份提交 = {secs / n:.1f} s/份")
        for name, students in report.ungraded.items():
            if students:
                print(f"{name}: 无法评分的提交（文件损坏，例如不是合法的 JSON）：{', '.join(students)}")
        print(f"成绩表 CSV：{report.root / 'grades.csv'}" if args.keep else "（加 --keep DIR 可保留反馈 HTML 和 CSV）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
