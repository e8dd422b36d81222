"""The 教师指南's two routes through a class, followed as written, grade alike and export honestly.

One small class of ``ch05-softmax`` (a right answer, a cell ending in
``os._exit(0)``, a blank notebook, a file that is not JSON) is graded by the
manual route (``nbgrader autograde`` with the course's ``nbgrader_config.py``)
and by ``make grade-class``'s script; then the guide's feedback command for a
class directory runs from the repository root exactly as the guide writes it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import subprocess
import sys

import nbformat
import pytest

from conftest import load_script
from grading import fire_drill, samples
from grading.course import REPO, Course
from grading.nbgrader_export import GRADED, MISSING, UNGRADED

pytestmark = [pytest.mark.grading, pytest.mark.slow]

ASSIGNMENT = "ch05-softmax"
RELEASE = REPO / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
GUIDE = REPO / "book" / "instructor-guide.md"
TIMEOUT = 10
grade_class = load_script("grade_class")
grade_samples = load_script("grade_samples")


def _class() -> dict:
    model = samples.model_solutions(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    plans = fire_drill.ch05_plans(model)
    text = nbformat.writes(samples.fill(RELEASE, model))
    return {"right": samples.fill(RELEASE, model), "os_exit": samples.fill(RELEASE, plans["os_exit"]),
            "blank": samples.fill(RELEASE, {}, None), "broken_json": text[: len(text) // 2]}


def _csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def manual(tmp_path_factory):
    """The guide's manual route: generate_assignment, autograde, export, in a course using the course config."""
    course = Course(tmp_path_factory.mktemp("manual"), {"Execute.timeout": TIMEOUT})
    course.add_sources([ASSIGNMENT])
    course.nbgrader("generate_assignment", ASSIGNMENT, "--force")
    for student, nb in _class().items():
        course.submit(ASSIGNMENT, student, nb)
    course.nbgrader("autograde", ASSIGNMENT, "--force", check=False)
    course.nbgrader("export", f"--to={course.path('grades.csv')}")
    return course


@pytest.fixture(scope="module")
def by_class(tmp_path_factory):
    """``make grade-class``'s script on the same class; its exit status, output and the class folder."""
    course = Course(tmp_path_factory.mktemp("class"))
    for student, nb in _class().items():
        course.submit(ASSIGNMENT, student, nb)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = grade_class.main([ASSIGNMENT, "--course", str(course.root), "--jobs", "2",
                                   "--timeout", str(TIMEOUT)])
    return {"course": course, "status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


def _cells(course: Course, student: str) -> dict:
    results = grade_samples.read_gradebook(course.path("gradebook.db"))
    (result,) = [r for r in results if (r.assignment, r.student) == (ASSIGNMENT, student)]
    return result.cells


def test_os_exit_costs_the_same_cells_under_nbgrader_autograde_as_under_grade_class(manual, by_class):
    manual_cells, class_cells = _cells(manual, "os_exit"), _cells(by_class["course"], "os_exit")
    assert manual_cells == class_cells
    earned = sum(score for score, _ in manual_cells.values() if score)
    assert earned > 0, f"os._exit() 之前挣到的分应当保留：{manual_cells}"
    assert any(score == 0 for score, _ in manual_cells.values())  # the cell that called it, and what needs it
    assert _cells(manual, "right") == _cells(by_class["course"], "right")


@pytest.mark.parametrize("route", ["manual", "by_class"])
def test_grades_csv_never_turns_an_unreadable_submission_into_a_number(route, request):
    fixture = request.getfixturevalue(route)
    course = fixture if route == "manual" else fixture["course"]
    rows = _csv(course.path("grades.csv"))
    assert [(r["assignment"], r["student_id"]) for r in rows] == sorted((r["assignment"], r["student_id"])
                                                                         for r in rows)
    mine = {r["student_id"]: r for r in rows if r["assignment"] == ASSIGNMENT}
    assert mine["broken_json"]["status"] == UNGRADED
    assert mine["broken_json"]["score"] == mine["broken_json"]["raw_score"] == ""
    assert mine["blank"]["status"] != UNGRADED and float(mine["blank"]["score"]) == 0.0
    assert mine["right"]["status"] in (GRADED, "待人工批改") and float(mine["right"]["score"]) > 0
    assert MISSING == "未提交"


def test_grade_class_run_with_a_bad_file_reports_it_and_exits_0(by_class):
    assert by_class["status"] == 0
    out = by_class["stdout"]
    assert "broken_json：" in out and "——未评分" in out
    assert "status 为“无法评分”" in out
    assert "--strict" in subprocess.run([sys.executable, str(REPO / "scripts" / "grade_class.py"), "--help"],
                                        capture_output=True, text=True, check=True).stdout


def test_grade_class_columns_follow_the_notebook_and_are_labelled_as_it_labels_them(by_class):
    header = next(line for line in by_class["stdout"].splitlines() if line.startswith("学生 student"))
    order = grade_samples.cell_order(ASSIGNMENT)
    assert order != sorted(order)  # the notebook's order is not the alphabet's here
    labels = grade_class.column_labels(ASSIGNMENT)
    assert [labels[c] for c in order] == ["练习 1", "练习 2", "练习 3", "练习 4"]
    columns = [column.strip() for column in header.split("  ") if column.strip()]
    assert columns == ["学生 student", "得分 score", "满分 max", *[labels[c] for c in order]], header


@pytest.mark.skipif(os.geteuid() != 0, reason="只有以 root 运行时才有这条提醒")
def test_the_root_warning_tells_make_users_what_to_type(by_class):
    assert "SANDBOX=nobody" in by_class["stderr"]


def test_the_guides_feedback_command_for_a_class_works_as_written(by_class):
    """The 教师指南's command, from the repository root with the environment activated, 课程目录 = the class."""
    course = by_class["course"]
    guide = GUIDE.read_text(encoding="utf-8")
    (command,) = re.findall(r"^nbgrader generate_feedback .*--CourseDirectory\.root=课程目录$", guide, re.M)
    env = dict(os.environ, PATH=os.pathsep.join([str(REPO / ".venv" / "bin"), os.environ.get("PATH", "")]))
    run = subprocess.run(command.replace("课程目录", str(course.root)), shell=True, cwd=REPO, env=env,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    pages = sorted(course.path("feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    assert {p.parts[-3] for p in pages} == {"right", "os_exit", "blank"}, pages
    page = pages[0].read_text(encoding="utf-8")
    assert "总分" in page or "得分" in page
    remote = re.compile(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?(https?:)?//""", re.I)
    assert not remote.search(page) and "cdnjs.cloudflare.com" not in page, "反馈页不能引用网上的资源"
    assert "Test cell" not in page and "Your answer" not in page


def test_nbgrader_autograde_keeps_a_mark_whose_answer_did_not_change_and_says_nothing_of_checksums(manual):
    """The manual route with the course config: mark the written answer, re-grade that student, the mark stays.

    The student has also edited a read-only test cell: nbgrader puts it back, and the log says so in Chinese
    (for the untouched test cells, whose hidden tests the student's copy lacks, it says nothing).
    """
    from nbgrader.api import Gradebook

    path = manual.path("submitted", "right", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
    nb = nbformat.read(path, as_version=4)
    (test,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax_stable"]
    test.source += "\nprint('改过的测试')"
    nbformat.write(nb, str(path))

    url = f"sqlite:///{manual.path('gradebook.db')}"
    with Gradebook(url) as gb:
        grade = gb.find_grade("written_shift", ASSIGNMENT, ASSIGNMENT, "right")
        grade.manual_score, grade.needs_manual_grade = 1.5, False
        gb.find_comment("written_shift", ASSIGNMENT, ASSIGNMENT, "right").manual_comment = "说得对。"
        gb.db.commit()
    run = manual.nbgrader("autograde", ASSIGNMENT, "--student", "right", "--force")
    with Gradebook(url) as gb:
        grade = gb.find_grade("written_shift", ASSIGNMENT, ASSIGNMENT, "right")
        comment = gb.find_comment("written_shift", ASSIGNMENT, ASSIGNMENT, "right")
        assert (grade.manual_score, grade.needs_manual_grade, comment.manual_comment) == (1.5, False, "说得对。")
        assert not gb.find_submission(ASSIGNMENT, "right").needs_manual_grade
    assert "has changed" not in run.stderr and "SAWarning" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.count("只读单元") == 1 and "right：只读单元 test_softmax_stable 被改动过" in run.stderr, \
        run.stderr[-3000:]
