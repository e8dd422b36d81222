"""Class-scale autograding (``scripts/grade_class.py``): parallel equals serial, broken submissions, progress.

One class of generated ``ch05-softmax`` submissions (right, wrong, crashing,
noisy, broken in two ways) is graded twice by the parallel command and once by
plain ``nbgrader autograde`` in a second course; the gradebooks are compared
row by row.  What nbgrader alone cannot grade (kernels that die or hang, 50 GB
cells, deleted test cells, snooping code) is in ``tests/test_fire_drill.py``.
"""

from __future__ import annotations

import csv
import pathlib
import re
import sqlite3

import nbformat
import pytest

from conftest import load_script
from grading import class_grading, samples
from grading.course import REPO, Course

pytestmark = [pytest.mark.grading, pytest.mark.slow]

ASSIGNMENT = "ch05-softmax"
RELEASE = REPO / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
TIMEOUT = 5
MEMORY_GB = 2
STABLE, TEMPERATURE, MASKED = "test_softmax_stable", "test_softmax_temperature", "test_masked_softmax"
grade_class = load_script("grade_class")


def _submissions() -> dict[str, str | nbformat.NotebookNode]:
    """Every student's ``ch05-softmax.ipynb``: a notebook, or raw text for a damaged file."""
    model = samples.model_solutions(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    text = nbformat.writes(samples.fill(RELEASE, model))
    return {
        "right": samples.fill(RELEASE, model),
        "noisy": samples.fill(RELEASE, samples.NOISY),
        "wrong": samples.fill(RELEASE, samples.PARTIAL),
        "crash": samples.fill(RELEASE, {**model, **samples.CRASH}),
        "blank": samples.fill(RELEASE, {}, None),
        "broken_json": text[: len(text) // 2],
        "other_quiz": nbformat.read(REPO / "notebooks" / "quiz-sdpa" / "quiz-sdpa.ipynb", as_version=4),
    }


_BY_NAME = """JOIN base_cell bc ON {t}.cell_id = bc.id JOIN submitted_notebook sn ON {t}.notebook_id = sn.id
              JOIN notebook n ON sn.notebook_id = n.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id
              JOIN student st ON sa.student_id = st.id"""
_ROWS = {
    "grade": "SELECT st.id, n.name, bc.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade "
             "FROM grade g " + _BY_NAME.format(t="g"),
    "comment": "SELECT st.id, n.name, bc.name, c.auto_comment, c.manual_comment "
               "FROM comment c " + _BY_NAME.format(t="c"),
}


def gradebook_rows(db: pathlib.Path) -> dict[str, list]:
    """Every submission-related row of a gradebook, keyed by names instead of random ids."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = {name: sorted(con.execute(sql).fetchall(), key=repr) for name, sql in _ROWS.items()}
        rows["submission"] = sorted(con.execute(
            """SELECT st.id, a.name, sa.timestamp, sa.extension, n.name, sn.flagged, sn.late_submission_penalty
               FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id
               JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN assignment a ON sa.assignment_id = a.id
               JOIN student st ON sa.student_id = st.id""").fetchall(), key=repr)
        rows["student"] = sorted(con.execute("SELECT id, first_name, last_name, email FROM student").fetchall())
    finally:
        con.close()
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The class graded in parallel (twice, through the command line) and serially by plain nbgrader."""
    students = _submissions()
    parallel = Course(tmp_path_factory.mktemp("parallel"))
    for student, nb in students.items():
        parallel.submit(ASSIGNMENT, student, nb)
    argv = [ASSIGNMENT, "--course", str(parallel.root), "--jobs", "2", "--timeout", str(TIMEOUT),
            "--memory-gb", str(MEMORY_GB)]
    return {"students": students, "parallel": parallel, "argv": argv}


@pytest.fixture(scope="module")
def first(runs):
    """Output and exit status of the first parallel run, and the gradebook right after it."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = grade_class.main(runs["argv"])
    return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue(),
            "rows": gradebook_rows(runs["parallel"].path("gradebook.db"))}


@pytest.fixture(scope="module")
def serial(runs, tmp_path_factory):
    """Plain ``nbgrader autograde`` on the same class, one submission after another."""
    course = Course(tmp_path_factory.mktemp("serial"), {"Execute.timeout": TIMEOUT})
    course.add_sources([ASSIGNMENT])
    course.nbgrader("generate_assignment", ASSIGNMENT, "--force")
    for student, nb in runs["students"].items():
        course.submit(ASSIGNMENT, student, nb)
    proc = course.nbgrader("autograde", ASSIGNMENT, "--force", check=False)
    assert proc.returncode == 1  # the broken submissions
    return gradebook_rows(course.path("gradebook.db"))


def test_parallel_gives_exactly_the_gradebook_rows_of_serial_nbgrader(first, serial):
    parallel = first["rows"]
    assert {r[0] for r in parallel["grade"]} == {"right", "noisy", "wrong", "crash", "blank", "broken_json",
                                                 "other_quiz"}
    for table in serial:
        assert parallel[table] == serial[table], table


def test_scores_right_wrong_and_broken(first):
    scores = {(r[0], r[2]): r[3] for r in first["rows"]["grade"]}
    assert [scores["right", c] for c in (STABLE, TEMPERATURE, MASKED)] == [3.0, 2.0, 3.0]
    assert [scores["noisy", c] for c in (STABLE, TEMPERATURE, MASKED)] == [3.0, 2.0, 3.0]
    assert scores["wrong", STABLE] == pytest.approx(1.0)  # no max shift: an essential check fails, a third
    assert [scores["blank", c] for c in (STABLE, TEMPERATURE, MASKED)] == [0.0, 0.0, 0.0]
    for broken in ("broken_json", "other_quiz"):
        assert [scores[broken, c] for c in (STABLE, TEMPERATURE, MASKED)] == [None, None, None], broken


def test_rerunning_gives_the_same_gradebook(runs, first):
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        grade_class.main(runs["argv"])
    assert gradebook_rows(runs["parallel"].path("gradebook.db")) == first["rows"]


def test_each_broken_submission_gets_one_chinese_line_and_the_others_are_graded(first):
    problems = [line.strip() for line in first["stdout"].splitlines() if "——未评分" in line]
    by_student = {line.split("：", 1)[0]: line for line in problems}
    assert sorted(by_student) == ["broken_json", "other_quiz"]
    assert len(problems) == 2
    assert "不是合法的笔记本文件" in by_student["broken_json"]
    assert "没有本作业的任何评分单元" in by_student["other_quiz"]
    assert first["status"] == 0  # a run with ungraded submissions went through: they are named, not a crash
    table = first["stdout"].split("需要注意的提交")[0]
    for student in ("right", "noisy", "wrong", "crash", "blank"):
        assert any(line.startswith(f"{student} ") and "无法评分" not in line for line in table.splitlines()), student
    assert sum("无法评分" in line for line in table.splitlines()) == 2


def test_progress_is_one_plain_line_per_submission_when_not_a_terminal(first):
    lines = [line for line in first["stderr"].splitlines() if re.match(r"\[\d+/7\] ", line)]
    assert len(lines) == 7
    assert [line.split("]")[0] for line in lines] == [f"[{i}/7" for i in range(1, 8)]
    assert "\r" not in first["stderr"]


def test_progress_redraws_one_line_on_a_terminal():
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    progress = grade_class.Progress(stream)
    for i in range(1, 4):
        progress(i, 3, class_grading.Outcome(f"s{i}", True, 1.0))
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.count("\n") == 1 and text.endswith("\n")
    assert "3/3" in text and "#" * grade_class.BAR in text


def test_the_csv_has_every_graded_total(runs, first):
    path = runs["parallel"].path("grades.csv")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}
    assert float(rows["right"]["score"]) == 8.0
    assert float(rows["wrong"]["score"]) == pytest.approx(3.142857142857143)
    assert set(rows) == set(runs["students"])
    assert f"成绩表 CSV：{path}" in first["stdout"]


def test_file_checks_name_each_problem(tmp_path):
    expected = class_grading.expected_cells(REPO / "notebooks" / ASSIGNMENT)
    check = class_grading.check_submission
    assert check(tmp_path, expected) == [f"缺少 {ASSIGNMENT}.ipynb（文件夹里没有任何笔记本）"]
    (tmp_path / "quiz-sdpa.ipynb").write_text("{}", encoding="utf-8")
    assert check(tmp_path, expected) == [f"缺少 {ASSIGNMENT}.ipynb（交来的是 quiz-sdpa.ipynb）"]
    nbformat.write(samples.fill(RELEASE, {}), str(tmp_path / f"{ASSIGNMENT}.ipynb"))
    assert check(tmp_path, expected) == []


def test_a_submission_that_kills_its_grading_process_is_named_and_the_others_still_graded(tmp_path):
    model = samples.model_solutions(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    killer = "import os\nimport signal\n\nos.kill(os.getppid(), signal.SIGKILL)  # the kernel's parent: the worker"
    course = Course(tmp_path)
    for student, nb in {"killer": samples.fill(RELEASE, {**model, "softmax_temperature": killer}),
                        "right": samples.fill(RELEASE, model)}.items():
        course.submit(ASSIGNMENT, student, nb)
    report = class_grading.grade_class(course.root, ASSIGNMENT, jobs=2, overrides={"Execute.timeout": TIMEOUT})
    assert report.ungraded == ["killer"]
    assert report.problem_lines() == [f"killer：{class_grading.WORKER_DIED}"]
    scores = {(r[0], r[2]): r[3] for r in gradebook_rows(course.path("gradebook.db"))["grade"]}
    assert [scores["right", c] for c in (STABLE, TEMPERATURE, MASKED)] == [3.0, 2.0, 3.0]
