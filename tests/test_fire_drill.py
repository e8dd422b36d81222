"""The fire drill (issue 13): a class that tries everything that can go wrong, graded by ``make grade-class``.

The submissions are kept in ``grading/fire-drill/`` (see ``grading/fire_drill.py``
for what each one does).  The class is graded in parallel with the students'
kernels sandboxed as ``nobody`` (as root; elsewhere the sandbox test is skipped
and the snooping submission is left out, since without a sandbox it would
write into the test's own course), then graded again: the batch must finish,
every submission must get the score stated here, the problem lines must name
what happened, and the gradebook and the course's files must come out intact.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import pathlib
import sqlite3

import nbformat
import pytest
from test_grade_class import gradebook_rows

from conftest import load_script
from grading import class_grading, fire_drill, kernel_limits, sandbox
from grading.course import SOLUTIONS

pytestmark = [pytest.mark.grading, pytest.mark.slow]

grade_class = load_script("grade_class")
CH05, QUIZ = fire_drill.CH05, fire_drill.QUIZ
TIMEOUT, MEMORY_GB = 5, 2
ROOT = os.geteuid() == 0
SANDBOX = "nobody" if ROOT else None
STABLE, TEMPERATURE, MASKED = "test_softmax_stable", "test_softmax_temperature", "test_masked_softmax"

#: (exercise 1, 2, 3) points each graded submission must get; None: not graded at all.
EXPECTED = {
    "right": (3.0, 2.0, 3.0),
    "endless": (3.0, 2.0, 0.0),      # the loop in masked_softmax: that test cell times out
    "stubborn": (3.0, 0.0, 3.0),     # the kernel is restarted; exercise 2's cell never finished
    "hog": (3.0, 2.0, 0.0),          # MemoryError before masked_softmax is defined
    "sys_exit": (3.0, 2.0, 3.0),     # SystemExit is an ordinary error after the function was defined
    "os_exit": (3.0, 0.0, 3.0),      # the kernel dies: restarted, exercise 2's cell counts as failed
    "flood": (3.0, 2.0, 3.0),
    "warnings": (3.0, 2.0, 3.0),     # stderr from the student's code never costs points
    "delegate": (0.0, 0.0, 0.0),     # calling attnlib's reference scores 0
    "snoop": (3.0, 2.0, 3.0),
    "deleted_test": (3.0, 2.0, 3.0),  # the deleted test cell is put back
    "broken_json": None,
    "other_assignment": None,
    "wrong_file": None,
}
UNGRADED_LINES = {
    "broken_json": "不是合法的笔记本文件",
    "other_assignment": "没有本作业的任何评分单元",
    "wrong_file": f"缺少 {CH05}.ipynb（交来的是 {QUIZ}.ipynb）",
}
PROBLEM_LINES = {
    "endless": f"{CH05} 的单元 {MASKED} 超时被中断",
    "stubborn": f"{CH05} 的单元 softmax_temperature {class_grading.HUNG_CELL}",
    "hog": f"{CH05} 的单元 masked_softmax 申请的内存超过上限",
    "os_exit": f"{CH05} 的单元 softmax_temperature {class_grading.CELL_ERRORS['DeadKernelError']}",
    "deleted_test": f"{CH05} 删掉了只读单元 {MASKED}，评分时已按原样补回",
}


def _digest(folder: pathlib.Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A class folder readable by everyone (0755), so only the sandbox keeps the snoop out, with the drill in it."""
    root = tmp_path_factory.mktemp("fire-drill")
    root.chmod(0o755)
    submitted = root / "submitted"
    fire_drill.submit(CH05, submitted, {"{COURSE}": str(root), "{SOURCE}": str(SOLUTIONS)})
    if not SANDBOX:
        import shutil

        shutil.rmtree(submitted / "snoop")
    fire_drill.submit(QUIZ, submitted)
    for path in submitted.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


@pytest.fixture(scope="module")
def first(course):
    """The first run through the command line, with what it printed and the state it left."""
    right = _digest(course / "submitted" / "right")
    argv = [CH05, "--course", str(course), "--jobs", "2", "--timeout", str(TIMEOUT), "--memory-gb", str(MEMORY_GB)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = grade_class.main(argv + (["--sandbox-user", SANDBOX] if SANDBOX else []))
        quiz = class_grading.grade_class(course, QUIZ, jobs=2, overrides={"Execute.timeout": TIMEOUT},
                                         memory_gb=MEMORY_GB, sandbox_user=SANDBOX)
    return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue(), "quiz": quiz,
            "rows": gradebook_rows(course / "gradebook.db"), "right_before": right}


def _scores(rows) -> dict:
    return {(r[0], r[2]): r[3] for r in rows["grade"]}


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_gets_the_stated_score(first, student):
    if student == "snoop" and not SANDBOX:
        pytest.skip("没有 root：不能用沙箱，窥探的提交没有参加评分")
    scores = _scores(first["rows"])
    got = tuple(scores.get((student, c)) for c in (STABLE, TEMPERATURE, MASKED))
    expected = EXPECTED[student] or (None, None, None)
    assert got == expected, f"{student} 的得分是 {got}，应为 {expected}"


def test_the_memory_limit_is_the_kernels_own_and_stops_the_50_gb_cell(course, first):
    nb = nbformat.read(course / "autograded" / "hog" / CH05 / f"{CH05}.ipynb", as_version=4)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert any(f"RLIMIT_AS {MEMORY_GB * 2**30}" in o.get("text", "") for o in outputs)
    assert any(o.get("ename", "").endswith("MemoryError") for o in outputs)


def test_an_edited_test_cell_scores_like_the_untouched_one(first):
    """``edited_test`` has ``partial``'s answers, with the read-only test edited to print 满分; it is restored."""
    scores = _scores(first["rows"])
    assert 0 < scores["partial", MASKED] < 3.0
    for cell in (STABLE, TEMPERATURE, MASKED):
        assert scores["edited_test", cell] == scores["partial", cell], cell


def test_each_problem_gets_its_one_line_and_the_batch_finishes(first):
    lines = [line.strip() for line in first["stdout"].splitlines() if line.strip().count("：") >= 1]
    for student, text in {**UNGRADED_LINES, **PROBLEM_LINES}.items():
        mine = [line for line in lines if line.startswith(f"{student}：")]
        assert len(mine) == 1 and text in mine[0], f"{student} 应有一行说明「{text}」，实际：{mine}"
    ungraded = sorted(line.split("：")[0] for line in lines if line.endswith("——未评分"))
    assert ungraded == sorted(UNGRADED_LINES)
    assert first["status"] == 0  # some submissions could not be graded (named above), every other one was


def test_quiz_answers_in_accepted_formats_score_and_rejected_formats_do_not(first):
    scores = _scores(first["rows"])
    keys = fire_drill.quiz_keys()
    multi = {"q05", "q08", "q10"}
    for i, q in enumerate(sorted(keys)):
        points = 2.0 if q in multi else 1.0
        assert scores["formats_ok", f"{q}_test"] == points, f"formats_ok 的 {q} 用了可接受的写法，应得满分"
        expected = 0.0 if i < len(fire_drill.REJECTED) else points
        assert scores["formats_bad", f"{q}_test"] == expected, f"formats_bad 的 {q}"
    assert first["quiz"].ungraded == []


def test_letters_copied_from_another_student_lose_the_questions_whose_letters_differ(course, first):
    """``copied`` hands in ``formats_ok``'s letters: graded against its own variant, not formats_ok's.

    Its kernel (sandboxed as root) showed its own variant: the question cells of the autograded notebook say so.
    """
    nb = nbformat.read(course / "autograded" / "copied" / QUIZ / f"{QUIZ}.ipynb", as_version=4)
    shown = {o["metadata"]["attnlib_variant"]["student"] for c in nb.cells for o in c.get("outputs", [])
             if "attnlib_variant" in o.get("metadata", {})}
    assert shown == {"copied"}
    scores = _scores(first["rows"])
    ok, own = fire_drill.quiz_keys("formats_ok"), fire_drill.quiz_keys("copied")
    single = [q for q in sorted(ok) if q not in {"q05", "q08", "q10"}]
    assert any(ok[q] != own[q] for q in single)
    for q in single:
        assert scores["copied", f"{q}_test"] == (1.0 if ok[q] == own[q] else 0.0), q
    assert sum(scores["copied", f"{q}_test"] for q in ok) < sum(scores["formats_ok", f"{q}_test"] for q in ok)


def test_a_flood_of_output_is_cut_before_it_reaches_the_gradebook_and_feedback(course, first):
    """10 MB printed in one cell: nbgrader's ``LimitOutput`` keeps the first 1000 lines; the rest is graded."""
    path = course / "autograded" / "flood" / CH05 / f"{CH05}.ipynb"
    nb = nbformat.read(path, as_version=4)
    flood = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_temperature")
    lines = "".join(o.get("text", "") for o in flood.outputs).splitlines()
    assert 900 <= lines.count("x" * 99) <= 1000
    assert path.stat().st_size < 1_000_000


@pytest.mark.skipif(not ROOT, reason="沙箱需要 root（nbgrader 以评分者的身份运行学生代码；非 root 时无法换成别的用户）")
def test_the_sandbox_stops_every_snooping_attempt(course, first):
    nb = nbformat.read(course / "autograded" / "snoop" / CH05 / f"{CH05}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    denied = [line for line in text.splitlines() if line.startswith("SNOOP DENIED")]
    assert "SNOOP OK" not in text, text
    assert len(denied) == 6, text
    # make grade-class writes the class's nbgrader_config.py (grading.course.class_folder); the snoop cannot
    assert "# mine" not in (course / "nbgrader_config.py").read_text(encoding="utf-8")
    assert _digest(course / "submitted" / "right") == first["right_before"]
    con = sqlite3.connect(course / "gradebook.db")
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()


def test_rerunning_the_drill_gives_the_same_gradebook(course, first):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        class_grading.grade_class(course, CH05, jobs=2, overrides={"Execute.timeout": TIMEOUT},
                                  memory_gb=MEMORY_GB, sandbox_user=SANDBOX)
    assert gradebook_rows(course / "gradebook.db") == first["rows"]


def test_the_kept_drill_is_what_the_generator_writes_from_the_current_release(tmp_path):
    fire_drill.write_fixtures(tmp_path)
    assert _digest(tmp_path) == _digest(fire_drill.FIXTURES), "请运行 python -m grading.fire_drill 重新生成演练用的提交"


@pytest.mark.skipif(not ROOT, reason="沙箱需要 root")
def test_a_sandbox_user_must_exist_and_must_not_be_root(tmp_path):
    with pytest.raises(sandbox.SandboxError, match="没有用户"):
        sandbox.sandbox_for("no-such-user-attn", tmp_path, SOLUTIONS)
    with pytest.raises(sandbox.SandboxError, match="root 权限"):
        sandbox.sandbox_for("root", tmp_path, SOLUTIONS)


def test_a_sandboxed_kernel_keeps_none_of_the_graders_secrets(tmp_path):
    env = kernel_limits.sandbox_environment({"PATH": "/bin", "LC_ALL": "C.UTF-8", "GITHUB_TOKEN": "secret",
                                             "JUPYTERHUB_API_TOKEN": "t", "HOME": "/root"}, tmp_path)
    assert env["PATH"] == "/bin" and env["LC_ALL"] == "C.UTF-8" and env["HOME"] == str(tmp_path)
    assert "GITHUB_TOKEN" not in env and "JUPYTERHUB_API_TOKEN" not in env
