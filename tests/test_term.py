"""An instructor's short term on a class folder, every command typed as the 教师指南 writes it.

One class folder outside the checkout (``课程目录``) for ``ch05-softmax``:
roster import (alice, bob), a due date and a late penalty, three submissions
(alice on time, bob late, dave not on the roster), ``make grade-class``, the
written answers marked in the Formgrader (``make formgrader``, through its
HTTP API as its panel does), feedback, bob's resubmission with a changed
written answer, a re-grade of bob alone, feedback again and the export.  The
module fixture runs the term once; each test asserts one thing the guide
promises.  The checkout must not gain any of nbgrader's per-class files.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import html
import json
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request

import nbformat
import pytest
import test_documented_commands as docs

from grading import manual_marks, samples, term
from grading.course import REPO
from grading.nbgrader_autograde import released_source
from grading.nbgrader_export import GRADED, MISSING, PENDING
from grading.nbgrader_feedback import WITHHELD

pytestmark = [pytest.mark.grading, pytest.mark.slow]

ASSIGNMENT = "ch05-softmax"
RELEASE = REPO / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
WRITTEN = "written_shift"
DUE = datetime.datetime(2026, 3, 15, 23, 59, tzinfo=datetime.timezone(datetime.timedelta(hours=8)))
PERCENT_PER_DAY = 10
MARKS = {"alice": (2.0, "讲清楚了饱和与溢出的区别。"), "bob": (0.5, "只说了溢出，没有说饱和。")}
#: nbgrader's per-class files: none may appear in the checkout during the term.
LEFTOVERS = ("gradebook.db", "submitted", "autograded", "feedback", ".nbgrader.log", "grades.csv", "reports")


def _timestamp(folder: pathlib.Path, when: datetime.datetime) -> None:
    (folder / "timestamp.txt").write_text(when.isoformat(sep=" "), encoding="utf-8")  # 2026-03-16 08:30:00+08:00


def _submit(course: pathlib.Path, student: str, nb, when: datetime.datetime) -> None:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / f"{ASSIGNMENT}.ipynb"))
    _timestamp(folder, when)


def _typed(command: str, course: pathlib.Path, *, venv: bool, **extra) -> subprocess.CompletedProcess:
    """Type ``command`` at the repository root (after ``source .venv/bin/activate`` when ``venv``)."""
    run = docs._run(docs._as_written(command, 课程目录=str(course), **extra),
                    env=docs._venv_env() if venv else docs._plain_env(), timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"{command}:\n{out[-3000:]}"
    assert not docs.ENGLISH_FALLBACK.search(out), out[-3000:]
    return run


def _grades(course: pathlib.Path) -> dict[str, dict]:
    with open(course / "grades.csv", newline="", encoding="utf-8") as fh:
        return {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}


def _rows(course: pathlib.Path, student: str) -> list:
    """Every grade and comment row of one student, by cell name."""
    con = sqlite3.connect(f"file:{course / 'gradebook.db'}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute(
            "SELECT bc.name, g.auto_score, g.manual_score, g.needs_manual_grade, sn.late_submission_penalty "
            "FROM grade g JOIN base_cell bc ON g.cell_id = bc.id JOIN submitted_notebook sn ON g.notebook_id = sn.id "
            "JOIN submitted_assignment sa ON sn.assignment_id = sa.id WHERE sa.student_id = ? ORDER BY bc.name",
            (student,))] + [tuple(r) for r in con.execute(
            "SELECT bc.name, c.auto_comment, c.manual_comment FROM comment c JOIN base_cell bc ON c.cell_id = bc.id "
            "JOIN submitted_notebook sn ON c.notebook_id = sn.id JOIN submitted_assignment sa "
            "ON sn.assignment_id = sa.id WHERE sa.student_id = ? ORDER BY bc.name", (student,))]
    finally:
        con.close()


def _written(course: pathlib.Path, student: str):
    """(manual score, needs manual grade, manual comment) of the student's written answer."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, student)
        comment = gb.find_comment(WRITTEN, ASSIGNMENT, ASSIGNMENT, student)
        return grade.manual_score, bool(grade.needs_manual_grade), comment.manual_comment


def _feedback(course: pathlib.Path, student: str) -> str:
    return (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the Formgrader


def _api(base: str, token: str, method: str, path: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}/{path}", data=data, method=method, headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read().decode("utf-8"))


@contextlib.contextmanager
def formgrader(course: pathlib.Path, tmp: pathlib.Path):
    """``make formgrader COURSE=课程目录`` typed at the repository root; yields (base url, token); then SIGTERM."""
    command = docs._guide_command(r"make formgrader COURSE=课程目录")
    runtime, log = tmp / "runtime", tmp / "formgrader.log"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = dict(docs._plain_env(), HOME=str(tmp), BROWSER="true", JUPYTER_RUNTIME_DIR=str(runtime),
               NBGRADER_EXCHANGE=str(tmp / "no-exchange"))
    with log.open("w") as fh:
        process = subprocess.Popen(["bash", "-c", docs._as_written(command, 课程目录=str(course))], cwd=REPO,
                                   env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            found = sorted(runtime.glob("jpserver-*.json"))
            if found:
                info = json.loads(found[0].read_text())
                base, token = info["url"].rstrip("/"), info["token"]
                try:
                    _api(base, token, "GET", "api/status")
                    break
                except (OSError, ValueError):
                    pass
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        yield base, token
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]


def mark_in_the_formgrader(base: str, token: str) -> dict:
    """Give each student's written answer its mark and comment through the Formgrader's API; return what it lists."""
    listed = {s["student"]: s["id"] for s in
              _api(base, token, "GET", f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}")}
    for student, (score, comment) in MARKS.items():
        (grade,) = [g for g in _api(base, token, "GET", f"formgrader/api/grades?submission_id={listed[student]}")
                    if g["name"] == WRITTEN]
        _api(base, token, "PUT", f"formgrader/api/grade/{grade['id']}", {"manual_score": score})
        (note,) = [c for c in _api(base, token, "GET", f"formgrader/api/comments?submission_id={listed[student]}")
                   if c["name"] == WRITTEN]
        _api(base, token, "PUT", f"formgrader/api/comment/{note['id']}", {"manual_comment": comment})
    return listed


# --------------------------------------------------------------------------- the term


@pytest.fixture(scope="module")
def the_term(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("term")
    course = tmp / "课程目录"
    before = {name: (REPO / name).exists() for name in LEFTOVERS}
    took = {}
    model = samples.model_solutions(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")

    start = time.perf_counter()
    roster = tmp / "名单.csv"
    roster.write_text("学号,姓名,邮箱\nalice,李爱丽,alice@example.edu\nbob,王博,bob@example.edu\n"
                      "carol,陈卡洛,carol@example.edu\n", encoding="utf-8")
    course.mkdir()
    _typed(docs._guide_command(r"make roster COURSE=课程目录 ROSTER=名单\.csv"), course, venv=False,
           **{"名单.csv": str(roster)})
    due = docs._guide_command(r"nbgrader db assignment add ch05-softmax --duedate=.* --CourseDirectory\.root=课程目录")
    assert f'--duedate="{DUE.isoformat(sep=" ")}"' in due, due
    _typed(due, course, venv=True)
    config = course / "nbgrader_config.py"
    assert config.is_file(), "make roster 应当在班级文件夹里写好 nbgrader_config.py"
    config.write_text(config.read_text(encoding="utf-8")  # the guide: one line at the end of the class's config
                      + f"c.CourseLatePenalty.percent_per_day = {PERCENT_PER_DAY}\n", encoding="utf-8")
    _submit(course, "alice", samples.fill(RELEASE, model, "平移不改变分数之间的差距，所以不能防止饱和。"),
            DUE - datetime.timedelta(hours=3))
    _submit(course, "bob", samples.fill(RELEASE, samples.PARTIAL, "减去最大值防止溢出。"),
            DUE + datetime.timedelta(hours=30))  # a day and a quarter late: two started days
    _submit(course, "dave", samples.fill(RELEASE, {}, None), DUE)
    grade = docs._guide_command(r"make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录")
    first = _typed(grade, course, venv=False)
    took["roster, due date, penalty, grade"] = time.perf_counter() - start

    start = time.perf_counter()
    with formgrader(course, tmp) as (base, token):
        listed = mark_in_the_formgrader(base, token)
    took["make formgrader, mark"] = time.perf_counter() - start
    marked = {s: _written(course, s) for s in MARKS}

    start = time.perf_counter()
    feedback = docs._guide_command(r"nbgrader generate_feedback ch05-softmax --CourseDirectory\.root=课程目录")
    _typed(feedback, course, venv=True)
    pages = {s: _feedback(course, s) for s in ("alice", "bob")}
    took["feedback"] = time.perf_counter() - start

    start = time.perf_counter()
    alice_rows, alice_nb = _rows(course, "alice"), (course / "autograded" / "alice" / ASSIGNMENT).stat().st_mtime_ns
    shutil.rmtree(course / "submitted" / "bob")
    _submit(course, "bob", samples.fill(RELEASE, samples.PARTIAL, "减去最大值防止溢出；它不能防止饱和。"),
            DUE + datetime.timedelta(hours=30))
    regrade = _typed(docs._guide_command(r"make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 STUDENT=bob"),
                     course, venv=False)
    took["re-grade bob"] = time.perf_counter() - start
    after = {s: _written(course, s) for s in MARKS}
    alice_after = (_rows(course, "alice"), (course / "autograded" / "alice" / ASSIGNMENT).stat().st_mtime_ns)

    start = time.perf_counter()
    feedback_again = _typed(feedback, course, venv=True)
    pages_again = {s: _feedback(course, s) for s in ("alice", "bob", "dave")}
    export = docs._guide_command(r"nbgrader export --CourseDirectory\.root=课程目录")
    (course / "grades.csv").unlink()
    _typed(export, course, venv=True)
    exported = _grades(course)
    inside = subprocess.run(["nbgrader", "export", "--to=inside.csv"], cwd=course, env=docs._venv_env(),
                            capture_output=True, text=True, check=False)
    full = _typed(feedback + " --student=bob --HiddenCheckDetails.shown=True", course, venv=True)
    took["feedback again, export, full detail"] = time.perf_counter() - start
    print("term steps (s):", {k: round(v, 1) for k, v in took.items()})
    return {"course": course, "first": first, "listed": listed, "marked": marked,
            "pages": pages, "regrade": regrade, "after": after, "alice_before": (alice_rows, alice_nb),
            "alice_after": alice_after, "pages_again": pages_again, "exported": exported, "inside": inside,
            "full_page": _feedback(course, "bob"), "full": full, "before": before,
            "feedback_again": feedback_again}


def test_the_roster_names_the_students_and_the_one_not_on_it(the_term):
    rows = the_term["exported"]
    assert (rows["alice"]["last_name"], rows["alice"]["email"]) == ("李爱丽", "alice@example.edu")
    assert rows["bob"]["last_name"] == "王博"
    assert rows["carol"]["status"] == MISSING and rows["carol"]["score"] == ""  # on the roster, nothing handed in
    out = the_term["first"].stdout
    lines = [line for line in out.splitlines() if "不在导入的名单里" in line]
    assert len(lines) == 1 and "dave" in lines[0], out[-3000:]
    assert term.NOT_ON_ROSTER.format(student="dave") in lines[0]


def test_the_late_submission_loses_the_classs_penalty(the_term):
    rows = the_term["exported"]
    bob, alice = rows["bob"], rows["alice"]
    assert float(bob["total_seconds_late"]) == pytest.approx(30 * 3600)
    assert float(alice["total_seconds_late"]) == 0 and float(alice["late_submission_penalty"]) == 0
    raw, penalty = float(bob["raw_score"]), float(bob["late_submission_penalty"])
    assert penalty == pytest.approx(raw * PERCENT_PER_DAY * 2 / 100)  # two started days
    assert float(bob["score"]) == pytest.approx(raw - penalty)
    assert bob["duedate"].startswith("2026-03-15 15:59:00")  # nbgrader stores the due date in UTC
    assert bob["timestamp"]


def test_marks_given_in_the_formgrader_on_the_class_folder(the_term):
    assert set(the_term["listed"]) == {"alice", "bob", "dave"}
    for student, (score, comment) in MARKS.items():
        assert the_term["marked"][student] == (score, False, comment)


def test_a_regrade_keeps_unchanged_marks_and_reopens_the_changed_answer(the_term):
    score, comment = MARKS["alice"]
    assert the_term["after"]["alice"] == (score, False, comment)
    assert the_term["exported"]["alice"]["status"] == GRADED
    old_score, old_comment = MARKS["bob"]
    manual, pending, note = the_term["after"]["bob"]
    assert manual is None and pending, the_term["after"]["bob"]  # the old mark does not count for the new text
    assert "0.5 / 2" in note and old_comment in note and note.startswith(manual_marks.PREVIOUS[:8]), note
    assert the_term["exported"]["bob"]["status"] == PENDING
    out = the_term["regrade"].stdout
    assert "bob：练习 4（written_shift）的回答改过了：上次人工给的 0.5 / 2 分不再计入" in out, out[-3000:]


def test_regrading_one_student_leaves_the_others_rows_untouched(the_term):
    assert the_term["alice_after"] == the_term["alice_before"]
    out = the_term["regrade"].stdout
    table = out.split("需要注意的提交")[0]
    assert "1 份提交" in out and not any(line.startswith(("alice ", "dave ")) for line in table.splitlines()), out


def test_feedback_after_marking_shows_the_marks_without_force(the_term):
    alice, bob = the_term["pages"]["alice"], the_term["pages"]["bob"]
    assert MARKS["alice"][1] in alice and "待人工批改" not in alice
    assert MARKS["bob"][1] in bob
    again = the_term["pages_again"]["bob"]
    assert "待人工批改" in again and "上次的得分" in again  # regenerated after the re-grade, as typed
    log = the_term["feedback_again"].stdout + the_term["feedback_again"].stderr
    assert "Removing existing" not in log, log[-2000:]  # rewriting the pages is the configuration's, not trouble


def _failed_checks(page: str) -> dict[str, bool]:
    """``{what a failed check checks: whether its 期望：/实际： lines follow}`` in a feedback page."""
    lines = html.unescape(re.sub(r"<[^>]+>", "", page)).splitlines()
    found = {}
    for i, line in enumerate(lines):
        failed = re.match(r"^✗ (?:【要点】)?(.*)：未通过$", line.strip())
        if failed:
            found[failed[1]] = i + 1 < len(lines) and lines[i + 1].strip().startswith("期望：")
    return found


def test_feedback_hides_the_hidden_checks_values_unless_asked(the_term):
    """bob fails visible and hidden checks: by default only the visible ones (whose inputs the student has) show
    their values; with ``--HiddenCheckDetails.shown=True`` every one does."""
    visible = "\n".join(released_source(c.source) for c in nbformat.read(
        REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4).cells)
    default, full = _failed_checks(the_term["pages_again"]["bob"]), _failed_checks(the_term["full_page"])
    hidden = [what for what in full if what not in visible]
    assert hidden and set(default) == set(full), (default, full)
    assert any(full[what] for what in hidden) and not any(default[what] for what in hidden), (default, full)
    assert all(default[what] == full[what] for what in full if what in visible)
    assert WITHHELD in the_term["pages_again"]["bob"] and WITHHELD not in the_term["full_page"]


def test_the_export_writes_into_the_class_folder_with_status_from_anywhere(the_term):
    assert set(the_term["exported"]) == {"alice", "bob", "carol", "dave"}
    inside = the_term["inside"]
    assert inside.returncode == 0, inside.stderr[-3000:]
    header = (the_term["course"] / "inside.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",")[-1] == "status", header


def test_nothing_lands_in_the_checkout(the_term):
    created = [name for name, was in the_term["before"].items() if not was and (REPO / name).exists()]
    assert not created, f"学期的命令往检出目录里写了 {created}"


def test_grade_class_output_is_quiet_and_chinese(the_term):
    for run in (the_term["first"], the_term["regrade"]):
        out = run.stdout + run.stderr
        assert "has changed" not in out and "SAWarning" not in out, out[-3000:]
        assert "每份作业评分平均用时" in out
    assert "not recognized" not in the_term["full"].stderr, the_term["full"].stderr[-3000:]


def test_feedback_errors_and_prompts_are_short_and_not_english(the_term):
    blank = the_term["pages_again"]["dave"]  # every answer cell still raises NotImplementedError
    assert "NotImplementedError" in blank and "most recent call last" not in blank and "ipython-input" not in blank
    for page in the_term["pages_again"].values():
        assert "In&nbsp;[" not in page and "Out[" not in page
