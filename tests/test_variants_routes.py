"""Every grading route grades each student against their own variant (issue 28, parts 1 and 3).

A small quiz built here (``quiz-mini``: two questions whose options are shuffled
per student, ``quiz.Question``, and one without a variant) is generated in a
throw-away course with the repository's ``nbgrader_config.py``.  The same
notebook, answered in alice's letters, is submitted as alice and as bob and
graded by plain ``nbgrader autograde`` and by ``make grade-class``'s machinery:
alice scores full marks, bob loses the varied questions whose letters differ
and keeps the one without a variant.  A notebook run as alice and handed in as
carol is graded against carol's key and reported by name, in nbgrader's log,
in ``make grade-class``'s problem lines and in ``grades.csv``; an answer cell
that pins another student or sets ``ATTNLIB_STUDENT`` changes nothing.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pathlib
import subprocess

import nbformat
import pytest
from nbformat import v4

from attnlib import quiz, variants
from grading import class_grading, samples
from grading import variants as grading_variants
from grading.course import REPO, Course

pytestmark = [pytest.mark.grading, pytest.mark.slow]

ASSIGNMENT = "quiz-mini"
#: (number, options, canonical key, shuffled): question 3 is written the old way, the same for everyone.
QUESTIONS = [
    (1, ["把分数归一化", "衡量查询与键有多相似", "生成查询向量", "压缩键向量"], "B", True),
    (2, ["减少计算量", "缩小参数规模", "把分数限制在 0 到 1", "防止分数的方差随 d_k 增大"], "D", True),
    (3, ["对", "错"], "A", False),
]
TIMEOUT = 20


def _meta(grade_id: str, *, locked=True, solution=False, grade=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    return {"nbgrader": meta | ({"points": points} if points is not None else {})}


def _explanations(options) -> str:
    letters = variants.LETTERS[: len(options)]
    return "{" + ", ".join(f'"{ch}": "解析 {ch}：{text}"' for ch, text in zip(letters, options, strict=True)) + "}"


def quiz_source() -> nbformat.NotebookNode:
    """The instructor's source of ``quiz-mini``: setup, then per question its text, show, answer and test cells."""
    cells = [v4.new_markdown_cell("# 小测验\n\n按你看到的字母作答。", metadata=_meta("intro")),
             v4.new_code_cell("from attnlib import quiz", metadata=_meta("setup"))]
    for number, options, key, shuffled in QUESTIONS:
        q = f"q{number:02d}"
        cells.append(v4.new_markdown_cell(f"## 第 {number} 题（单选，1 分）\n\n第 {number} 题的题干。",
                                          metadata=_meta(f"{q}_text")))
        if shuffled:
            listed = "".join(f"    {text!r},\n" for text in options)
            cells.append(v4.new_code_cell(
                f"Q{number} = quiz.Question({ASSIGNMENT!r}, {number}, multi=False, points=1, options=[\n{listed}])\n"
                f"Q{number}.show()", metadata=_meta(f"{q}_show")))
            check, call = f"Q{number}.check(_answer)", f"quiz.grade(_answer, question=Q{number}, "
        else:
            letters = variants.LETTERS[: len(options)]
            check, call = f"quiz.check_format(_answer, {letters!r}, multi=False)", "quiz.grade(_answer, "
        cells.append(v4.new_code_cell(f'### BEGIN SOLUTION\nanswer = "{key}"\n### END SOLUTION',
                                      metadata=_meta(q, locked=False, solution=True)))
        cells.append(v4.new_code_cell(
            f"_answer = quiz.take_answer(globals())\n{check}\n### BEGIN HIDDEN TESTS\n"
            f'{call}number={number}, multi=False, points=1, key="{key}", explanations={_explanations(options)})\n'
            "### END HIDDEN TESTS", metadata=_meta(f"{q}_test", grade=True, points=1)))
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    return nb


def shown_key(student: str | None, number: int) -> str:
    """The right letter as ``student`` sees question ``number``."""
    _, options, key, shuffled = QUESTIONS[number - 1]
    if not shuffled:
        return key
    return variants.canonical_to_shown(key, variants.order(student, ASSIGNMENT, number, len(options)))


def differs(a: str, b: str) -> list[int]:
    """The questions whose right letter differs between students ``a`` and ``b``."""
    return [n for n, *_ in QUESTIONS if shown_key(a, n) != shown_key(b, n)]


ALICE = "alice"
#: bob: a student whose right letter differs from alice's on both shuffled questions (SHA-256 is fixed).
BOB = next(name for name in ("bob", "bob1", "bob2", "bob3", "bob4", "bob5", "bob6", "bob7", "bob8")
           if differs(ALICE, name) == [1, 2])
CAROL = next(name for name in ("carol", "carol1", "carol2", "carol3", "carol4", "carol5")
             if differs(ALICE, name) == [1, 2])


def answered(release: pathlib.Path, letters: dict[int, str], prefix: str = "") -> nbformat.NotebookNode:
    """The release with ``answer = "<letter>"`` in each answer cell (``prefix``: code before it)."""
    return samples.fill(release, {f"q{n:02d}": f'{prefix}answer = "{ch}"' for n, ch in letters.items()})


def run_as(nb, student: str, cwd: pathlib.Path) -> nbformat.NotebookNode:
    """``nb`` executed in a kernel of ``student`` (as their JupyterLab runs it: ``JUPYTERHUB_USER``)."""
    from nbclient import NotebookClient

    nb = nbformat.from_dict(nb)
    env = {k: v for k, v in os.environ.items() if k != variants.ENV_STUDENT} | {"JUPYTERHUB_USER": student}
    client = NotebookClient(nb, timeout=TIMEOUT, resources={"metadata": {"path": str(cwd)}})
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    return nb


def alice_letters() -> dict[int, str]:
    return {n: shown_key(ALICE, n) for n, *_ in QUESTIONS}


#: An answer cell's code before ``answer = ...`` that tries to be graded as alice.
SNEAKY = (f'from attnlib import variants\nimport os\nvariants.pin("{ALICE}")\n'
          f'os.environ["{variants.ENV_STUDENT}"] = "{ALICE}"\n')


def submissions(release: pathlib.Path, course_root: pathlib.Path) -> dict[str, nbformat.NotebookNode]:
    """The class: alice's letters as alice and as bob, run as alice but handed in by carol, and a sneaky bob."""
    letters = alice_letters()
    return {ALICE: answered(release, letters), BOB: answered(release, letters),
            CAROL: run_as(answered(release, letters), ALICE, course_root),
            f"{BOB}_sneaky": answered(release, letters, SNEAKY)}


def expected(student: str) -> dict[str, float]:
    """Each test cell's score for the class of :func:`submissions`."""
    who = BOB if student.startswith(BOB) else student
    return {f"q{n:02d}_test": float(shown_key(who, n) == shown_key(ALICE, n)) for n, *_ in QUESTIONS}


def _source_folder(root: pathlib.Path) -> pathlib.Path:
    folder = root / "solutions" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(quiz_source(), folder / f"{ASSIGNMENT}.ipynb")
    return root / "solutions"


def scores_of(db: pathlib.Path, students) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        return {s: {g.name: g.auto_score for g in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, s).grades}
                for s in students}


def _csv(path) -> dict[str, dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {row["student_id"]: row for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """``nbgrader generate_assignment``, ``autograde``, ``export``, ``generate_feedback``, as the guide types them."""
    course = Course(tmp_path_factory.mktemp("plain"), {"Execute.timeout": TIMEOUT})
    _source_folder(course.root)
    course.nbgrader("generate_assignment", ASSIGNMENT, "--force")
    release = course.path("notebooks", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
    subs = submissions(release, course.root)
    for student, nb in subs.items():
        course.submit(ASSIGNMENT, student, nb)
    before = dict(os.environ)
    proc = course.nbgrader("autograde", ASSIGNMENT, "--force")
    assert dict(os.environ) == before
    course.nbgrader("export", f"--to={course.path('grades.csv')}")
    course.nbgrader("generate_feedback", ASSIGNMENT, "--force")
    return {"course": course, "release": release, "log": proc.stdout + proc.stderr,
            "scores": scores_of(course.path("gradebook.db"), subs), "csv": _csv(course.path("grades.csv"))}


@pytest.fixture(scope="module")
def by_class(tmp_path_factory):
    """The same class through ``make grade-class``'s machinery (parallel workers, merge, grades.csv)."""
    root = tmp_path_factory.mktemp("class")
    source = _source_folder(root / "src")
    course = Course(root / "course")
    register = root / "register"
    register.mkdir()
    class_grading.generate_assignment(course.root, ASSIGNMENT, register, source=source)
    release = register / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    subs = submissions(release, course.root)
    for student, nb in subs.items():
        course.submit(ASSIGNMENT, student, nb)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report = class_grading.grade_class(course.root, ASSIGNMENT, jobs=2, source=source,
                                           overrides={"Execute.timeout": TIMEOUT})
    return {"course": course, "report": report, "scores": scores_of(course.path("gradebook.db"), subs),
            "csv": _csv(report.csv_path)}


ROUTES = ["plain", "by_class"]


@pytest.mark.parametrize("route", ROUTES)
def test_the_same_notebook_scores_by_each_students_own_key(route, request):
    got = request.getfixturevalue(route)["scores"]
    assert got[ALICE] == expected(ALICE) == {"q01_test": 1.0, "q02_test": 1.0, "q03_test": 1.0}
    # bob handed in alice's letters: the shuffled questions differ, the one without a variant agrees
    assert got[BOB] == expected(BOB) == {"q01_test": 0.0, "q02_test": 0.0, "q03_test": 1.0}


@pytest.mark.parametrize("route", ROUTES)
def test_an_answer_cell_that_pins_or_sets_another_student_changes_nothing(route, request):
    got = request.getfixturevalue(route)["scores"]
    assert got[f"{BOB}_sneaky"] == got[BOB]


@pytest.mark.parametrize("route", ROUTES)
def test_a_notebook_run_as_another_student_is_graded_by_the_submitters_key_and_named(route, request):
    run = request.getfixturevalue(route)
    assert run["scores"][CAROL] == expected(CAROL) == {"q01_test": 0.0, "q02_test": 0.0, "q03_test": 1.0}
    line = grading_variants.mismatch_line(ASSIGNMENT, CAROL, [ALICE])
    assert line == (f"学生 {CAROL} 的 {ASSIGNMENT}：笔记本里显示的是 {ALICE} 的题目版本，"
                    f"已按 {CAROL} 自己的版本评分（选项字母可能对不上）")
    if route == "plain":
        assert run["log"].count(line) == 1, run["log"][-3000:]
        assert "题目版本" not in run["log"].replace(line, "")  # nobody else is reported
    else:
        problems = run["report"].problem_lines()
        assert problems == [f"{CAROL}：{ASSIGNMENT} 的笔记本里显示的是 {ALICE} 的题目版本，"
                            f"已按 {CAROL} 自己的版本评分（选项字母可能对不上）"]
    status = {s: row["status"] for s, row in run["csv"].items()}
    assert status[CAROL] == f"已评分；题目版本不符：笔记本显示的是 {ALICE} 的版本，已按本人的版本评分"
    assert {status[s] for s in (ALICE, BOB, f"{BOB}_sneaky")} == {"已评分"}
    assert run["csv"][CAROL]["score"] == "1.0"  # a score, never left out silently


def _shown(nb) -> dict[int, str | None]:
    return {out.metadata[grading_variants.RECORD]["question"]: out.metadata[grading_variants.RECORD]["student"]
            for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if grading_variants.RECORD in out.get("metadata", {})}


@pytest.mark.parametrize("route", ROUTES)
def test_the_autograded_notebook_shows_the_submitters_variant_and_hides_the_pin(route, request):
    course = request.getfixturevalue(route)["course"]
    for student in (ALICE, BOB, CAROL):
        nb = nbformat.read(course.path("autograded", student, ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), as_version=4)
        assert _shown(nb) == {1: student, 2: student}
        pins = [c.source for c in nb.cells if grading_variants.PIN.format(student=student) in c.source]
        assert len(pins) == 3  # the first line of each hidden block
        for text in pins:
            lines = text.split("\n")
            assert lines[lines.index("### BEGIN HIDDEN TESTS") + 1] == grading_variants.PIN.format(student=student)


def test_feedback_shows_the_students_letters_and_never_the_pin(plain):
    course = plain["course"]
    for student in (ALICE, BOB):
        page = course.path("feedback", student, ASSIGNMENT, f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
        assert "variants.pin" not in page and "BEGIN HIDDEN" not in page
        for number in (1, 2):
            assert f"正确答案：{shown_key(student, number)}" in page
        question = quiz.Question(ASSIGNMENT, 1, options=QUESTIONS[0][1])
        first = QUESTIONS[0][1][question.variant(student).order[0]]
        assert f"<strong>A.</strong> {first}" in page


def test_the_mismatch_is_kept_beside_the_autograded_notebook(plain, by_class):
    for run in (plain, by_class):
        folder = run["course"].path("autograded", CAROL, ASSIGNMENT)
        facts = json.loads((folder / grading_variants.FACTS).read_text(encoding="utf-8"))
        assert facts == {ASSIGNMENT: {"submitter": CAROL, "shown": [ALICE]}}
        assert not run["course"].path("autograded", BOB, ASSIGNMENT, grading_variants.FACTS).exists()


def test_a_notebook_never_run_is_not_a_mismatch_and_the_canonical_variant_is_one(tmp_path):
    release_like = quiz_source()
    assert grading_variants.shown_students(release_like) == []
    ran = run_as(quiz_source(), ALICE, tmp_path)
    assert grading_variants.shown_students(ran) == [ALICE]
    assert grading_variants.others([ALICE], ALICE) == []
    assert grading_variants.others([None], ALICE) == [None]
    assert "标准顺序" in grading_variants.mismatch_line(ASSIGNMENT, ALICE, [None])


def test_pin_goes_first_in_every_hidden_block_with_its_indent():
    source = "x = 1\n### BEGIN HIDDEN TESTS\ncheck()\n### END HIDDEN TESTS\n    ### BEGIN HIDDEN TESTS\n    y()"
    pinned = grading_variants.pin_hidden_tests(source, "o'neil").split("\n")
    pin = grading_variants.PIN.format(student="o'neil")
    assert pinned[2] == pin and pinned[6] == "    " + pin
    namespace: dict = {}
    exec(pin, namespace)  # noqa: S102 - the line itself, as the kernel runs it
    try:
        assert variants.student_id() == "o'neil"
    finally:
        variants.pin(None)


def test_autograde_steps_pin_before_execute_and_read_outputs_before_clearing():
    from nbgrader.preprocessors import ClearOutput, Execute

    from grading.kernel_limits import LimitedExecute
    from grading.nbgrader_autograde import autograde_steps, sanitize_steps

    steps = autograde_steps(LimitedExecute)
    execute = next(s for s in steps if issubclass(s, Execute))
    assert steps.index(grading_variants.PinStudent) < steps.index(execute)
    assert issubclass(execute, LimitedExecute) and issubclass(execute, grading_variants.StudentKernel)
    sanitize = sanitize_steps()
    assert sanitize.index(grading_variants.RecordShownVariant) < sanitize.index(ClearOutput)
    assert "ATTNLIB_STUDENT" in __import__("grading.kernel_limits").kernel_limits.KEEP_ENV  # sandboxed kernels too


def test_the_class_config_has_the_steps():
    config = class_grading.nbgrader_config()
    assert grading_variants.PinStudent in config.Autograde.autograde_preprocessors
    assert grading_variants.RecordShownVariant in config.Autograde.sanitize_preprocessors


# --------------------------------------------------------------------------- Validate and the lab


def _validated(path: pathlib.Path) -> nbformat.NotebookNode:
    """The notebook as the course's Validate executes it (the class the command line and the lab button build)."""
    from traitlets.config.loader import PyFileConfigLoader

    from grading.nbgrader_validate import ChineseValidator

    executed = []

    class Keeping(ChineseValidator):
        def _preprocess(self, nb):
            executed.append(super()._preprocess(nb))
            return executed[-1]

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    results = Keeping(config=config).validate(str(path))
    assert "failed" not in results, results
    return executed[-1]


@pytest.mark.parametrize("student", [ALICE, None])
def test_validate_shows_the_variant_the_students_kernel_shows(plain, student, monkeypatch, tmp_path):
    """On the hub (JUPYTERHUB_USER) Validate's kernel shows the student's own variant; in make lab the canonical one."""
    monkeypatch.delenv(variants.ENV_STUDENT, raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    if student:
        monkeypatch.setenv("JUPYTERHUB_USER", student)
    path = tmp_path / f"{ASSIGNMENT}.ipynb"
    nbformat.write(answered(plain["release"], {n: shown_key(student, n) for n, *_ in QUESTIONS}), path)
    validated = _validated(path)
    assert _shown(validated) == {1: student, 2: student}
    if student:  # the student's own kernel on the hub shows the same options, in the same letters
        kernel = run_as(nbformat.read(path, as_version=4), student, tmp_path)
        assert _shown_text(kernel) == _shown_text(validated)


def _shown_text(nb) -> list[str]:
    """The Markdown of every question cell's output."""
    return [o["data"]["text/markdown"] for c in nb.cells for o in c.get("outputs", [])
            if grading_variants.RECORD in o.get("metadata", {})]


def test_make_lab_gives_the_kernels_no_student_of_its_own():
    """``make lab``'s environment adds no student: alone, the canonical variant (a class's hub sets JUPYTERHUB_USER)."""
    from conftest import load_script

    lab = load_script("lab")
    env = lab.student_environment({"PATH": "/usr/bin", "HOME": "/home/me"})
    assert variants.ENV_STUDENT not in env and "JUPYTERHUB_USER" not in env


# --------------------------------------------------------------------------- one student's variant for a regrade


def _variant_script(argv) -> tuple[int, str, str]:
    from conftest import load_script

    script = load_script("variant")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = script.main(argv)
    return status, out.getvalue(), err.getvalue()


def test_the_variant_command_prints_the_students_options_and_key_in_their_letters(tmp_path):
    source = _source_folder(tmp_path)
    for student in (ALICE, BOB):
        status, out, _ = _variant_script([ASSIGNMENT, student, "--source", str(source)])
        assert status == 0
        assert f"学生 {student} 的题目版本" in out
        blocks = out.split("## 第 ")[1:]
        assert len(blocks) == len(QUESTIONS)
        for (number, options, key, shuffled), block in zip(QUESTIONS, blocks, strict=True):
            assert f"正确答案：{shown_key(student, number)}" in block
            if shuffled:
                order = variants.order(student, ASSIGNMENT, number, len(options))
                listed = [f"- **{variants.LETTERS[i]}.** {options[c]}" for i, c in enumerate(order)]
                assert [line for line in block.splitlines() if line.startswith("- **")] == listed
                right = variants.LETTERS[order.index(variants.LETTERS.index(key))]
                assert f"    {right}（✓ 正确选项）解析 {key}：{options[variants.LETTERS.index(key)]}" in block
    status, out, _ = _variant_script([ASSIGNMENT, "--source", str(source)])
    assert status == 0 and "标准顺序" in out and "正确答案：B" in out.split("## 第 ")[1]


def test_the_variant_command_refuses_an_unknown_or_a_non_quiz_assignment_in_chinese(tmp_path):
    source = _source_folder(tmp_path)
    status, out, err = _variant_script(["quiz-nosuch", ALICE, "--source", str(source)])
    assert status == 2 and not out and "没有名为 quiz-nosuch 的作业" in err and ASSIGNMENT in err
    chapter = source / "ch-x"
    chapter.mkdir()
    nb = v4.new_notebook(cells=[v4.new_code_cell("assert 1 + 1 == 2", metadata=_meta("t", grade=True, points=1))])
    nbformat.write(nb, chapter / "ch-x.ipynb")
    status, out, err = _variant_script(["ch-x", ALICE, "--source", str(source)])
    assert status == 2 and "ch-x 不是测验" in err


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_make_variant_as_written(user, tmp_path):
    """The 教师指南's regrade command, typed from the root of a copy of the checkout, as root and as nobody."""
    from checkout_copy import as_user, copy_checkout, reachable_tmp
    from test_documented_commands import _guide_command, _plain_env

    from grading.analysis.loading import grade_call

    if user != "root" and os.geteuid() != 0:
        pytest.skip("切换到普通用户 nobody 需要 root")
    command = _guide_command(r"make variant ASSIGNMENT=\S+ STUDENT=\S+")
    assignment, student = (part.split("=")[1] for part in command.split()[2:])
    with reachable_tmp() as tmp:
        copy = copy_checkout(tmp / "repo", owner=None if user == "root" else user)
        argv = ["bash", "-c", command] if user == "root" else as_user(f"cd {copy} && {command}", user=user)
        run = subprocess.run(argv, cwd=copy, env=_plain_env(), capture_output=True, text=True, timeout=300,
                             check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(f"{assignment} · 学生 {student} 的题目版本"), run.stdout[:500]
    source = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    calls = [grade_call(c.source) for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    blocks = run.stdout.split("## 第 ")[1:]
    assert len(blocks) == len(calls) >= 10
    for call, block in zip(calls, blocks, strict=True):
        options = len(call["explanations"])
        key = variants.canonical_to_shown(call["key"], variants.order(student, assignment, call["number"], options))
        assert f"正确答案：{key}" in block, block


def test_the_variant_sheet_shows_the_students_numbers_in_stem_options_and_explanations():
    show = ('Q1 = quiz.Question("quiz-num", 1, stem="$d_k = {d}$ 时方差约为多少？", params={"d": [64, 16, 36]},\n'
            '    derive=lambda v: {"root": int(v["d"] ** 0.5)}, options=["约 {d}", "约 {root}", "约 1"])\n'
            "Q1.show()")
    test = ('_answer = quiz.take_answer(globals())\nQ1.check(_answer)\n### BEGIN HIDDEN TESTS\n'
            'quiz.grade(_answer, question=Q1, number=1, multi=False, points=1, key="A", explanations={\n'
            '    "A": "{d} 个方差为 1 的项相加", "B": "{root} 是标准差", "C": "缩放以后才是 1"})\n### END HIDDEN TESTS')
    nb = v4.new_notebook(cells=[
        v4.new_code_cell("from attnlib import quiz", metadata=_meta("setup")),
        v4.new_markdown_cell("## 第 1 题（单选，1 分）", metadata=_meta("q01_text")),
        v4.new_code_cell(show, metadata=_meta("q01_show")),
        v4.new_code_cell('answer = "A"', metadata=_meta("q01", locked=False, solution=True)),
        v4.new_code_cell(test, metadata=_meta("q01_test", grade=True, points=1))])
    drawn = {s: variants.draw(s, "quiz-num", 1, {"d": [64, 16, 36]})["d"] for s in ("alice", "bob", "carol", "dave")}
    student, d = next((s, d) for s, d in drawn.items() if d != 64)  # not the canonical number
    sheet = grading_variants.student_sheet(nb, "quiz-num", student)
    key = variants.canonical_to_shown("A", variants.order(student, "quiz-num", 1, 3))
    assert f"$d_k = {d}$ 时方差约为多少？" in sheet and f"本题的数：d = {d}" in sheet
    assert f"正确答案：{key}" in sheet and f"{key}（✓ 正确选项）{d} 个方差为 1 的项相加" in sheet
    assert f"约 {int(d ** 0.5)}" in sheet and f"{int(d ** 0.5)} 是标准差" in sheet
    assert variants.pinned() is None  # the sheet leaves no pin behind
