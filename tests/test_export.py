"""Grades into a learning platform (``make export``): Canvas's and Moodle's import CSVs and the .xlsx, read back.

One class folder (``grading/synthetic_gradebook.py``: nbgrader's gradebook written directly, late penalties
computed by nbgrader's ``AssignLatePenalties`` with the course's plugin), two assignments and five students:

* 李爱丽 (``alice``): both graded, on time;
* 王, 博 (``bob``, a comma in the name): ``ch05-softmax`` half right, 30 hours late (two started days at 10 %);
* 陈卡洛 (``carol``): on the roster, handed in nothing;
* ``dave`` (not on the roster): a ``ch05-softmax`` that could not be graded, a quiz waiting for a hand mark;
* Zoë "Z" Ng, Jr. (``zoe``): the quiz only.

Each documented command is typed at the repository root as the 教师指南 writes it; every file is read back and each
cell compared with what ``nbgrader export`` writes into ``grades.csv`` for the same class.
"""

from __future__ import annotations

import csv
import pathlib

import pytest
import test_documented_commands as docs

from conftest import load_script
from grading import lms_export, synthetic_gradebook
from grading.nbgrader_export import GRADED, MISSING, PENDING, UNGRADED, CourseCsvExport
from grading.synthetic_gradebook import Hand

pytestmark = [pytest.mark.grading]

CH05, QUIZ = "ch05-softmax", "quiz-sdpa"
POINTS = {CH05: [3.0, 2.0, 3.0, 2.0], QUIZ: [1.0, 1.0, 1.0, 2.0]}
ROSTER = [{"id": "alice", "name": "李爱丽", "email": "alice@example.edu"},
          {"id": "bob", "name": "王, 博", "email": "bob@example.edu"},
          {"id": "carol", "name": "陈卡洛", "email": "carol@example.edu"},
          {"id": "zoe", "name": 'Zoë "Z" Ng, Jr.', "email": "zoe@example.edu"}]
HANDS = [Hand("alice", CH05, 1.0), Hand("alice", QUIZ, 0.6),
         Hand("bob", CH05, 0.5, late_hours=30), Hand("bob", QUIZ, 1.0),
         Hand("dave", CH05, state="ungraded"), Hand("dave", QUIZ, 0.4, state="pending"),
         Hand("zoe", QUIZ, 0.75)]
PERCENT = 10.0
STUDENTS = ["alice", "bob", "carol", "dave", "zoe"]
NAMES = {"alice": "李爱丽", "bob": "王, 博", "carol": "陈卡洛", "dave": "", "zoe": 'Zoë "Z" Ng, Jr.'}


def _command(pattern: str) -> str:
    return docs._guide_command(pattern)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The class, ``grades.csv`` from ``nbgrader export``, and each documented command's output and file."""
    tmp = tmp_path_factory.mktemp("export")
    course = synthetic_gradebook.build(tmp / "课程目录", roster=ROSTER, assignments=POINTS, hands=HANDS,
                                       percent_per_day=PERCENT)
    graded = docs._run(docs._as_written(_command(r"nbgrader export --CourseDirectory\.root=课程目录"),
                                        课程目录=str(course)), env=docs._venv_env())
    assert graded.returncode == 0, graded.stderr[-3000:]
    with open(course / "grades.csv", newline="", encoding="utf-8") as fh:
        grades = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(fh)}
    runs = {}
    for fmt in lms_export.FORMATS:
        command = _command(rf"make export COURSE=课程目录 FORMAT={fmt}")
        runs[fmt] = docs._run(docs._as_written(command, 课程目录=str(course)))
    out = tmp / "成绩.xlsx"
    chosen = _command(r"make export COURSE=课程目录 FORMAT=xlsx OUT=成绩\.xlsx ASSIGNMENT=\S+")
    runs["chosen"] = docs._run(docs._as_written(chosen, 课程目录=str(course), **{"成绩.xlsx": str(out)}))
    runs["chosen"].written = _read_xlsx(out) if out.exists() else None
    return {"course": course, "grades": grades, "runs": runs}


def _read_csv(path: pathlib.Path) -> list[list[str]]:
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf"), "CSV 应当带 UTF-8 的 BOM（Excel 才能正确显示中文）"
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return list(csv.reader(fh))


def _read_xlsx(path: pathlib.Path) -> dict:
    from openpyxl import load_workbook

    book = load_workbook(path)
    return {name: [list(row) for row in book[name].iter_rows(values_only=True)] for name in book.sheetnames}


def _expected(grades: dict, student: str, assignment: str) -> float | None:
    """The score ``grades.csv`` gives (None for an empty cell)."""
    row = grades[student, assignment]
    return float(row["score"]) if row["score"] != "" else None


def _csv_number(text: str) -> float | None:
    return float(text) if text != "" else None


def test_each_documented_command_runs_and_says_what_it_wrote(exported):
    course = exported["course"]
    for fmt, run in exported["runs"].items():
        out = run.stdout + run.stderr
        assert run.returncode == 0, (fmt, out[-3000:])
        assert "已写出" in out and "5 名学生" in out, (fmt, out)
        assert not docs.ENGLISH_FALLBACK.search(out) and "make: ***" not in out, out
    canvas = exported["runs"]["canvas"].stdout
    assert str(course / "grades-canvas.csv") in canvas and "1 份无法评分，3 份未提交" in canvas, canvas
    assert "1 份提交还在等待人工批改" in canvas, canvas
    for name in ("grades-canvas.csv", "grades-moodle.csv", "grades.xlsx"):
        assert (course / name).is_file(), name


def test_the_gradebook_reads_the_same_in_bulk_as_through_nbgrader(exported):
    """The export reads every submission in a few grouped queries; nbgrader's Gradebook, one pair at a time, agrees."""
    from nbgrader.api import Gradebook

    course = exported["course"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=synthetic_gradebook.COURSE_ID) as gb:
        slow = CourseCsvExport(course_root=str(course)).rows(gb)
    table = lms_export.read_class(course)
    for row in slow:
        cell = table.students[STUDENTS.index(row["student_id"])].cells[row["assignment"]]
        assert cell.status == row["status"], row
        assert cell.score == (float(row["score"]) if row["score"] else None), row
        assert cell.penalty == pytest.approx(float(row["late_submission_penalty"] or 0)), row


def test_the_class_is_what_the_fixture_says(exported):
    """The statuses and the late penalty the export starts from are the gradebook's (nbgrader's own export)."""
    grades = exported["grades"]
    assert {k: r["status"] for k, r in grades.items()} == {
        ("alice", CH05): GRADED, ("alice", QUIZ): GRADED, ("bob", CH05): GRADED, ("bob", QUIZ): GRADED,
        ("carol", CH05): MISSING, ("carol", QUIZ): MISSING, ("dave", CH05): UNGRADED, ("dave", QUIZ): PENDING,
        ("zoe", CH05): MISSING, ("zoe", QUIZ): GRADED}
    bob = grades["bob", CH05]
    raw = 0.5 * sum(POINTS[CH05])
    assert float(bob["raw_score"]) == pytest.approx(raw)
    assert float(bob["late_submission_penalty"]) == pytest.approx(raw * PERCENT * 2 / 100)  # two started days
    assert float(bob["score"]) == pytest.approx(raw * 0.8)


def test_canvas_csv_has_canvas_columns_points_possible_and_the_right_numbers(exported):
    rows = _read_csv(exported["course"] / "grades-canvas.csv")
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes", CH05, QUIZ]
    assert rows[1][0].strip() == "Points Possible" and rows[1][5] == "(read only)"
    assert rows[1][6:] == ["10.00", "5.00"]
    body = {r[2]: r for r in rows[2:]}
    assert list(body) == STUDENTS
    for student, row in body.items():
        assert row[0] == NAMES[student] and row[1] == "" and row[3] == student and row[4] == ""
        for column, assignment in ((6, CH05), (7, QUIZ)):
            want = _expected(exported["grades"], student, assignment)
            got = _csv_number(row[column])
            assert got == (None if want is None else pytest.approx(want, abs=0.005)), (student, assignment, row)
            if want is not None:
                assert row[column] == f"{want:.2f}", row
    assert body["bob"][6] == "4.00"  # 5 of 10, minus 20 %
    assert body["carol"][6:] == ["", ""] and body["dave"][6] == ""  # never 0 for what was not graded
    assert body["carol"][5] == f"{CH05}：未提交；{QUIZ}：未提交"
    assert body["dave"][5].startswith(f"{CH05}：无法评分；{QUIZ}：待人工批改"), body["dave"]
    assert "迟交 30.0 小时，扣 1.00 分" in body["bob"][5] and body["alice"][5] == ""


def test_moodle_csv_matches_on_id_number_or_email_with_one_column_per_item(exported):
    rows = _read_csv(exported["course"] / "grades-moodle.csv")
    assert rows[0] == ["ID number", "Email address", "Full name", CH05, QUIZ, "Notes"]
    body = {r[0]: r for r in rows[1:]}
    assert list(body) == STUDENTS
    emails = {p["id"]: p["email"] for p in ROSTER}
    for student, row in body.items():
        assert row[1] == emails.get(student, "") and row[2] == NAMES[student]
        for column, assignment in ((3, CH05), (4, QUIZ)):
            want = _expected(exported["grades"], student, assignment)
            assert row[column] == ("" if want is None else f"{want:.2f}"), (student, assignment, row)
    assert body["dave"][3] == "" and "无法评分" in body["dave"][5]


def test_xlsx_has_chinese_headers_full_precision_and_totals(exported):
    sheets = _read_xlsx(exported["course"] / "grades.xlsx")
    assert list(sheets) == ["成绩", "满分"]
    rows = sheets["成绩"]
    assert rows[0] == ["学号", "姓名", CH05, QUIZ, "总分", "说明"]
    body = {r[0]: r for r in rows[1:]}
    assert list(body) == STUDENTS
    for student, row in body.items():
        assert (row[1] or "") == NAMES[student]
        scores = [_expected(exported["grades"], student, a) for a in (CH05, QUIZ)]
        # full precision (not rounded to two decimals like the CSVs): equal up to the order of a float sum
        assert row[2:4] == [None if s is None else pytest.approx(s, rel=1e-12) for s in scores], (student, row)
        present = [s for s in scores if s is not None]
        assert row[4] == (pytest.approx(sum(present)) if present else None), row
    assert body["carol"][2:5] == [None, None, None]
    assert body["bob"][2] == pytest.approx(4.0) and body["dave"][3] == pytest.approx(0.4 * 3)  # pending: automatic part
    points = sheets["满分"]
    assert points[0] == ["练习", "满分", "截止时间（UTC）"]
    assert [r[:2] for r in points[1:]] == [[CH05, 10.0], [QUIZ, 5.0], ["总分", 15.0]]


def test_out_and_a_choice_of_assignments_as_written(exported):
    run = exported["runs"]["chosen"]
    assert run.written is not None, run.stdout + run.stderr
    assert run.written["成绩"][0] == ["学号", "姓名", CH05, QUIZ, "总分", "说明"]
    assert "2 个练习：ch05-softmax、quiz-sdpa" in run.stdout


export_script = load_script("export")


@pytest.mark.parametrize(("args", "says"), [
    (["--format", "pdf"], "不认识的格式 'pdf'"),
    (["--format", "canvas", "--assignment", "ch99-nothing"], "成绩库里没有这些练习：ch99-nothing"),
])
def test_bad_input_gets_one_chinese_line_and_status_2(exported, capsys, args, says):
    assert export_script.main([str(exported["course"]), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_folder_without_a_gradebook_is_named(tmp_path, capsys):
    assert export_script.main([str(tmp_path), "--format", "canvas"]) == 2
    assert "没有成绩库 gradebook.db" in capsys.readouterr().err
    usage = docs._run("make export FORMAT=canvas")
    assert usage.returncode != 0 and "用法：make export COURSE=课程目录" in usage.stdout, usage.stdout
