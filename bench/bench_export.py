"""The grade export for a learning platform (``make export``) on a class of 300 over every assignment of the course.

Target: each of the three formats (Canvas's CSV, Moodle's CSV, the .xlsx) written in at most 5 s of wall time on a
2-core machine, for the whole command as an instructor types it (``scripts/export.py``, a fresh process: the
imports count) and for the export alone, in one process.

The class (``grading/synthetic_gradebook.py``): 300 students on the roster by every assignment in ``solutions/``,
each assignment with the points of its source notebook's graded cells; most submissions graded, some waiting for
a hand mark, some that could not be graded, some never handed in, a few late (their penalty computed by nbgrader's
``AssignLatePenalties`` with the course's plugin).  Printed: the seconds of each, and the size of the table.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile
import time

import nbformat

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grading import lms_export, synthetic_gradebook  # noqa: E402
from grading.course import SOLUTIONS, assignments  # noqa: E402

STUDENTS, TARGET = 300, 5.0


def course_points() -> dict[str, list[float]]:
    """Every assignment of the course -> the points of its graded cells (from its source notebook)."""
    points = {}
    for name in assignments():
        nb = nbformat.read(SOLUTIONS / name / f"{name}.ipynb", as_version=4)
        cells = [c.metadata["nbgrader"].get("points", 0) for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("grade")]
        points[name] = [float(p) for p in cells] or [1.0]
    return points


def make_class(root: pathlib.Path, n: int = STUDENTS) -> pathlib.Path:
    points = course_points()
    roster = [{"id": f"2026{i:04d}", "name": f"学生{i}，{'甲乙丙丁'[i % 4]}", "email": f"s{i}@example.edu"}
              for i in range(n)]
    hands = []
    for i, person in enumerate(roster):
        for j, name in enumerate(points):
            if (i + j) % 17 == 0:
                continue  # never handed in
            state = "ungraded" if (7 * i + j) % 97 == 0 else "pending" if (i + 3 * j) % 89 == 0 else "graded"
            late = 30.0 if (i * j) % 701 == 1 else 0.0
            hands.append(synthetic_gradebook.Hand(person["id"], name, fraction=((31 * i + 7 * j) % 101) / 100,
                                                  late_hours=late, state=state))
    return synthetic_gradebook.build(root / "课程目录", roster=roster, assignments=points, hands=hands)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        course = make_class(pathlib.Path(tmp))
        print(f"synthetic class built in {time.perf_counter() - start:.1f} s")
        missed = False
        for fmt in lms_export.FORMATS:
            start = time.perf_counter()
            path, table = lms_export.export(course, fmt)
            alone = time.perf_counter() - start
            start = time.perf_counter()
            run = subprocess.run([sys.executable, str(REPO / "scripts" / "export.py"), str(course), "--format", fmt,
                                  "-o", str(path.with_name("typed-" + path.name))],
                                 capture_output=True, text=True, check=False)
            typed = time.perf_counter() - start
            assert run.returncode == 0, run.stderr[-2000:]
            ok = max(alone, typed) <= TARGET
            missed |= not ok
            print(f"{fmt:7s} {len(table.students)} students x {len(table.assignments)} assignments: "
                  f"export {alone:.2f} s, the command {typed:.2f} s (target <= {TARGET:.0f} s)  "
                  f"{'ok' if ok else 'MISSED'}")
        print("export: " + ("MISSED" if missed else "ok"))


if __name__ == "__main__":
    main()
