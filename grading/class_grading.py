"""Autograde every submission of one assignment in a class: in parallel, isolated, then merged.

nbgrader's gradebook is one sqlite file, and ``nbgrader autograde`` grades one
submission after another.  To use every core without two processes writing
the same database, each submission is graded on its own:

1. the class gradebook gets the assignment (``generate_assignment`` against it,
   only if it lacks it); a *template* course in a temporary directory holds a
   copy of that gradebook with every student removed, and the source folder;
2. a pool of long-lived worker processes (nbgrader imported once each) grades
   one student at a time in a fresh worker course: a copy of the template
   gradebook, the source and that one submission, through nbgrader's Python
   API (``Autograde``), with kernels capped by ``kernel_limits``;
3. the main process merges each worker's result into the class gradebook
   (nbgrader's ``Gradebook`` API, one writer), copies the autograded notebooks
   into ``autograded/`` and finally exports ``grades.csv``.

A worker course sees the same submission, source, assignment record and
configuration as a serial ``nbgrader autograde`` would, so the merged
gradebook holds the same rows; re-running replaces each student's automatic
scores with the same ones.  A worker killed by student code is replaced, and
the submissions it had in flight are graded again one at a time, so only the
one that kills its worker again is reported.
"""

from __future__ import annotations

import collections
import concurrent.futures
import copy
import functools
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import pathlib
import shutil
import sqlite3
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

from grading import kernel_limits, manual_marks, sandbox, term
from grading.course import REPO, SOLUTIONS, NbgraderError, class_folder

DEFAULT_MEMORY_GB = kernel_limits.DEFAULT_MEMORY_GB
WORKER_DIED = "评分进程在这份作业上意外退出了两次（学生代码可能终止了评分进程）——未评分"
CELL_ERRORS = {
    "CellTimeoutError": "超时被中断",
    "DeadKernelError": "让内核退出或崩溃（评分时重启了内核，接着评后面的单元）",
    "MemoryError": "申请的内存超过上限",
    "_ArrayMemoryError": "申请的内存超过上限",
}
HUNG_CELL = "超时，而且中断不了（评分时重启了内核，接着评后面的单元）"


@dataclass
class Outcome:
    """What grading one student's submission gave.

    ``graded`` is True when every notebook of the assignment was autograded;
    ``problems`` are Chinese lines for the instructor (why it was not graded,
    or which cells timed out or ran out of memory).
    """

    student: str
    graded: bool
    seconds: float
    problems: list = field(default_factory=list)


@dataclass
class ClassReport:
    """Everything a class-wide autograde produced."""

    assignment: str
    outcomes: list
    wall_seconds: float
    csv_path: pathlib.Path

    @property
    def ungraded(self) -> list[str]:
        """Students whose submission could not be autograded."""
        return sorted(o.student for o in self.outcomes if not o.graded)

    def problem_lines(self) -> list[str]:
        """One Chinese line per problem, ``student：problem``, sorted by student."""
        return [f"{o.student}：{p}" for o in sorted(self.outcomes, key=lambda o: o.student) for p in o.problems]


def submitted_students(course: pathlib.Path, assignment: str) -> list[str]:
    """Students with a folder ``submitted/<student>/<assignment>/`` in the course directory."""
    submitted = pathlib.Path(course) / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())


def db_url(root: pathlib.Path) -> str:
    """The sqlite URL of the gradebook of the course at ``root``."""
    return f"sqlite:///{pathlib.Path(root) / 'gradebook.db'}"


# --------------------------------------------------------------------------- checks


def expected_cells(release: pathlib.Path) -> dict[str, set]:
    """``{notebook name: grade ids of its answer and graded cells}`` of the notebooks in ``release``."""
    import nbformat

    cells = {}
    for path in sorted(release.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        metas = [c.metadata.get("nbgrader", {}) for c in nb.cells]
        cells[path.stem] = {m["grade_id"] for m in metas if m.get("solution") or m.get("grade")}
    return cells


def source_labels(source: pathlib.Path, assignment: str) -> dict[str, str]:
    """``{grade id: 练习 1 / 第 3 题}`` of the assignment's source notebooks, as the student sees them labelled."""
    import nbformat

    from grading.nbgrader_validate import cell_labels

    labels = {}
    for path in sorted((pathlib.Path(source) / assignment).glob("*.ipynb")):
        labels |= cell_labels(nbformat.read(path, as_version=4))
    return labels


def check_submission(folder: pathlib.Path, expected: dict[str, set]) -> list[str]:
    """Chinese lines naming what is wrong with the files of one submission (empty when nothing is)."""
    import nbformat

    problems = []
    present = sorted(p.name for p in folder.glob("*.ipynb"))
    for name, ids in expected.items():
        path = folder / f"{name}.ipynb"
        if not path.exists():
            given = f"（交来的是 {', '.join(present)}）" if present else "（文件夹里没有任何笔记本）"
            problems.append(f"缺少 {name}.ipynb{given}")
            continue
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - any unreadable file is reported the same way
            problems.append(f"{name}.ipynb 不是合法的笔记本文件（JSON 无法解析，文件可能损坏或被截断）")
            continue
        found = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
        if ids and not ids & found:
            problems.append(f"{name}.ipynb 里没有本作业的任何评分单元（可能交错了作业的笔记本）")
    return problems


def restore_locked_cells(folder: pathlib.Path, source: pathlib.Path) -> list[str]:
    """Put back the read-only cells a student deleted, in place, in the notebooks of ``folder``.

    nbgrader leaves a deleted test cell ungraded (flagged for manual grading);
    read-only cells are the instructor's, so the copy being graded gets them
    back from the source notebook, after the nearest earlier cell that is still
    there (nbgrader then restores their exact text from the gradebook, as for
    any read-only cell).  Returns one Chinese line per notebook that needed it.
    """
    import nbformat

    lines = []
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        restored = _restore_cells(nb, nbformat.read(source / path.name, as_version=4))
        if restored:
            nbformat.write(nb, path)
            lines.append(f"{path.stem} 删掉了只读单元 {', '.join(restored)}，评分时已按原样补回")
    return lines


def _restore_cells(nb, source) -> list[str]:
    """Insert into ``nb`` the locked cells of ``source`` it lacks; return their grade ids."""
    def grade_id(cell):
        return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")

    present = {grade_id(c) for c in nb.cells} - {None}
    restored, after = [], None  # after: grade id of the last source cell that nb has
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if grade_id(cell) in present:
            after = grade_id(cell)
        elif meta.get("locked") and not meta.get("solution"):
            position = next((i + 1 for i, c in enumerate(nb.cells) if after and grade_id(c) == after), 0)
            nb.cells.insert(position, cell)
            present.add(grade_id(cell))
            restored.append(grade_id(cell))
            after = grade_id(cell)
    return restored


def cell_problems(autograded: pathlib.Path) -> list[str]:
    """Chinese lines for the cells of autograded notebooks that timed out, killed the kernel or ran out of memory."""
    import nbformat

    lines = []
    for path in sorted(autograded.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                what = CELL_ERRORS.get(out.get("ename", "")) if out.get("output_type") == "error" else None
                what = HUNG_CELL if what and out.get("evalue") == kernel_limits.HUNG else what
                if what:
                    name = cell.metadata.get("nbgrader", {}).get("grade_id", f"第 {index + 1} 个单元")
                    lines.append(f"{path.stem} 的单元 {name} {what}，该单元出错（测试单元记 0 分）")
                    break
    return lines


def variant_problems(autograded: pathlib.Path) -> list[str]:
    """Chinese lines for notebooks that showed another variant than the submitter's (``grading/variants.py``)."""
    from grading import variants

    return [variants.mismatch_problem(notebook, fact["submitter"], fact["shown"])
            for notebook, fact in sorted(variants.read_facts(autograded).items())]


def log_problem(log: str) -> str:
    """A Chinese line for an nbgrader failure that the file checks did not explain."""
    if "DeadKernelError" in log or "Kernel died" in log:
        return "评分时内核崩溃（进程被终止，例如内存耗尽或代码调用了 os._exit）"
    if "UnresponsiveKernel" in log or "could not interrupt" in log:
        return "内核失去响应且无法中断"
    if "failed to validate" in log:
        return "笔记本的 nbgrader 元数据损坏（单元与本作业不符）"
    lines = [line for line in log.splitlines() if line.strip()]
    return f"nbgrader 报错：{lines[-1][:200] if lines else '（无日志）'}"


# --------------------------------------------------------------------------- workers

_WORKER: dict = {}


def nbgrader_config(overrides: dict | None = None, memory_bytes: int = 0, sandbox: tuple | None = None,
                    course: str | None = None):
    """The class's ``nbgrader_config.py`` as a traitlets ``Config``, with overrides and the kernel limits.

    ``course``: the class folder, whose ``nbgrader_config.py`` (which loads the repository's) holds the class's
    own settings, e.g. its late penalty; the repository's when None or when the folder has none.
    ``overrides`` maps ``"Section.option"`` to a value, e.g. ``{"Execute.timeout": 5}``; ``sandbox`` is
    ``Sandbox.worker_config`` (the user the kernels run as, see ``grading/sandbox.py``), or None.
    """
    from traitlets.config.loader import PyFileConfigLoader

    from grading.nbgrader_autograde import autograde_steps, sanitize_steps

    folder = course if course and (pathlib.Path(course) / "nbgrader_config.py").is_file() else REPO
    config = PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()
    for key, value in (overrides or {}).items():
        section, option = key.split(".")
        config[section][option] = value
    config.Autograde.autograde_preprocessors = autograde_steps(kernel_limits.LimitedExecute)
    config.Autograde.sanitize_preprocessors = sanitize_steps()
    config.LimitedKernelManager.memory_limit = int(memory_bytes)
    if sandbox:
        km = config.LimitedKernelManager
        km.sandbox_uid, km.sandbox_gid, km.sandbox_root, km.sandbox_reach, km.sandbox_hide = sandbox
    return config


def _init_worker(overrides: dict | None, memory_bytes: int, log_path: str, sandbox: tuple | None = None,
                 course: str | None = None) -> None:
    """Pool initializer: build the config once (nbgrader is preloaded), send kernel chatter to a log file."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)  # kernels inherit the worker's stderr: keep their warnings off the progress line
    os.close(fd)
    log = logging.getLogger("grade_class.worker")
    log.setLevel(logging.INFO)
    log.propagate = False
    _WORKER.update(config=nbgrader_config(overrides, memory_bytes, sandbox, course), log=log)


def _worker_course(work: pathlib.Path, template: pathlib.Path, submission: pathlib.Path,
                   assignment: str, student: str) -> pathlib.Path:
    """A fresh course at ``work/<student>``: the template gradebook and source, and this one submission."""
    root = work / student
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    root.chmod(0o700)  # a sandboxed kernel starts inside it but must not reach the gradebook copy beside it
    shutil.copy2(template / "gradebook.db", root / "gradebook.db")
    (root / "solutions").symlink_to(template / "solutions", target_is_directory=True)
    shutil.copytree(submission, root / "submitted" / student / assignment, symlinks=False)
    return root


def grade_one(assignment: str, student: str, submission: str, template: str, work: str,
              expected: dict) -> Outcome:
    """Autograde one student's submission in its own worker course (run in a pool worker).

    Parameters
    ----------
    assignment, student : str
    submission : str
        The folder ``submitted/<student>/<assignment>`` of the class.
    template : str
        The template course (the class gradebook without students, the source folder).
    work : str
        Where worker courses are made; the result stays in ``work/<student>`` for the merge.
    expected : dict
        ``expected_cells`` of the assignment's notebooks.

    Returns
    -------
    Outcome
    """
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    start = time.perf_counter()
    problems = check_submission(pathlib.Path(submission), expected)
    root = _worker_course(pathlib.Path(work), pathlib.Path(template), pathlib.Path(submission), assignment, student)
    if not problems:
        problems += restore_locked_cells(root / "submitted" / student / assignment, root / "solutions" / assignment)
    config = copy.deepcopy(_WORKER["config"])
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = db_url(root)
    log = _WORKER["log"]
    coursedir = CourseDirectory(config=config, log=log)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    app = Autograde(coursedir=coursedir, config=config, log=log)
    app.force, app.create_student = True, True
    result = capture_log(app)
    autograded = root / "autograded" / student / assignment
    graded = all((autograded / f"{name}.ipynb").exists() for name in expected)
    if graded:
        problems += cell_problems(autograded) + variant_problems(autograded)
    elif not problems:
        problems.append(log_problem(result.get("error", "") + result.get("log", "")))
    if not graded:
        problems = [f"{p}——未评分" for p in problems]
    return Outcome(student, graded, time.perf_counter() - start, problems)


# --------------------------------------------------------------------------- merge


def _read_submission(url: str, assignment: str, student: str):
    """A worker gradebook's record of one submission, as plain data (None if it has none)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        notebooks = {}
        for nb in sub.notebooks:
            notebooks[nb.name] = {
                "penalty": nb.late_submission_penalty,
                "grades": {g.name: (g.auto_score, g.needs_manual_grade) for g in nb.grades},
                "comments": {c.name: c.auto_comment for c in nb.comments},
                "fingerprints": manual_marks.stored(gb, assignment, student, nb.name),
            }
        return {"timestamp": sub.timestamp, "notebooks": notebooks}


def merge_submission(worker_root: pathlib.Path, main_url: str, assignment: str, student: str,
                     labels: dict | None = None) -> list[str] | None:
    """Copy one student's automatic grades from a worker gradebook into the class gradebook.

    As ``nbgrader autograde`` with the course's config does, automatic scores
    and comments are replaced; manual scores, manual comments and extra credit
    are kept where the answer did not change and re-opened where it did
    (``grading/manual_marks.py``).  Returns one Chinese line per re-opened mark,
    or None when the worker recorded nothing (no notebook was found, so
    ``nbgrader autograde`` would skip it too).
    """
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    record = _read_submission(db_url(worker_root), assignment, student)
    if record is None:
        return None
    lines = []
    with Gradebook(main_url) as gb, warnings.catch_warnings():
        # nbgrader's own add_submission trips SQLAlchemy's autoflush warnings (the CLI prints them too)
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_student(student)
        extra = {"timestamp": record["timestamp"]} if record["timestamp"] else {}
        sub = gb.update_or_create_submission(assignment, student, **extra)
        for nb in sub.notebooks:
            data = record["notebooks"][nb.name]
            nb.late_submission_penalty = data["penalty"]
            for grade in nb.grades:
                auto, needs = data["grades"][grade.name]
                grade.auto_score = auto
                grade.needs_manual_grade = bool(needs or grade.manual_score is not None)
            for comment in nb.comments:
                comment.auto_comment = data["comments"][comment.name]
            gb.db.commit()
            lines += manual_marks.reconcile(gb, assignment, student, nb.name, data["fingerprints"], labels)
        gb.db.commit()
    return lines


def copy_autograded(worker_root: pathlib.Path, course: pathlib.Path, assignment: str, student: str) -> None:
    """Replace ``autograded/<student>/<assignment>`` of the class with the worker's (or remove it)."""
    dest = course / "autograded" / student / assignment
    if dest.exists():
        shutil.rmtree(dest)
    src = worker_root / "autograded" / student / assignment
    if src.exists():
        shutil.copytree(src, dest)


# --------------------------------------------------------------------------- the run


def prepare(course: pathlib.Path, assignment: str, scratch: pathlib.Path, *, overrides: dict | None = None,
            source: pathlib.Path = SOLUTIONS) -> pathlib.Path:
    """Make sure the class gradebook knows the assignment; build the template course the workers copy.

    A class gradebook without the assignment gets it from ``nbgrader
    generate_assignment`` run against it (the release goes to a scratch
    folder).  The template is the class gradebook with every student and
    submission removed, beside a link to the source folder, so the workers
    grade against exactly the assignment the class gradebook holds.

    Returns
    -------
    pathlib.Path
        The template course's root.
    """
    if not _knows(course, assignment):
        generate_assignment(course, assignment, scratch / "register", overrides=overrides, source=source)
    template = scratch / "template"
    (template / "solutions").mkdir(parents=True)
    (template / "solutions" / assignment).symlink_to(pathlib.Path(source).resolve() / assignment)
    shutil.copy2(course / "gradebook.db", template / "gradebook.db")
    con = sqlite3.connect(template / "gradebook.db")
    try:
        with con:
            con.execute(manual_marks.CREATE)
            for table in ("grade", "comment", "submitted_notebook", "submitted_assignment", "student",
                          manual_marks.TABLE):
                con.execute(f"DELETE FROM {table}")  # fixed table names, no input
        con.execute("VACUUM")
    finally:
        con.close()
    return template


def generate_assignment(course: pathlib.Path, assignment: str, scratch: pathlib.Path, *,
                        overrides: dict | None = None, source: pathlib.Path = SOLUTIONS) -> None:
    """``nbgrader generate_assignment`` into the class gradebook, in this process; the release goes to ``scratch``.

    Raises ``NbgraderError`` with nbgrader's log when it fails.
    """
    import nbgrader.api  # noqa: F401 - patched below
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    shutil.copytree(pathlib.Path(source) / assignment, scratch / "solutions" / assignment)
    config = nbgrader_config(overrides)
    config.CourseDirectory.root = str(scratch)
    config.CourseDirectory.db_url = db_url(course)
    log = logging.getLogger("grade_class.generate")
    log.propagate = False
    coursedir = CourseDirectory(config=config, log=log)
    coursedir.assignment_id = assignment
    app = GenerateAssignment(coursedir=coursedir, config=config, log=log)
    app.force = True
    # a new gradebook asks the ``alembic`` console script for the schema version (a second Python that imports
    # nbgrader again: seconds); alembic's own API gives the same head in this process
    api = sys.modules["nbgrader.api"]
    original, api.get_alembic_version = api.get_alembic_version, _alembic_head
    try:
        result = capture_log(app)
    finally:
        api.get_alembic_version = original
    if not result["success"]:
        raise NbgraderError(f"nbgrader generate_assignment {assignment} 失败：\n{result.get('log', '')[-3000:]}"
                            f"\n{result.get('error', '')[-3000:]}")


def _alembic_head() -> str:
    """The schema version nbgrader stamps on a new gradebook (what ``alembic heads`` prints for it)."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


def _knows(course: pathlib.Path, assignment: str) -> bool:
    """Whether the class gradebook exists and holds the assignment with its notebooks."""
    if not (course / "gradebook.db").exists():
        return False
    con = sqlite3.connect(f"file:{course / 'gradebook.db'}?mode=ro", uri=True)
    try:
        found = con.execute("SELECT count(*) FROM notebook n JOIN assignment a ON n.assignment_id = a.id "
                            "WHERE a.name = ?", (assignment,)).fetchone()[0]
    except sqlite3.DatabaseError:
        found = 0
    finally:
        con.close()
    return found > 0


def export_csv(course: pathlib.Path, dest: pathlib.Path, ungraded=()) -> pathlib.Path:
    """``nbgrader export`` of the class gradebook to ``dest`` (CSV, every assignment, with a ``status`` column).

    ``ungraded``: ``"assignment/student"`` pairs this run could not grade; their score cells stay empty
    (``grading/nbgrader_export.py``).
    """
    from nbgrader.api import Gradebook

    from grading.nbgrader_export import CourseCsvExport

    with Gradebook(db_url(course)) as gb:
        CourseCsvExport(to=str(dest), course_root=str(course), ungraded=list(ungraded)).export(gb)
    return dest


def grade_class(course, assignment: str, *, jobs: int = 2, overrides: dict | None = None,
                memory_gb: float = DEFAULT_MEMORY_GB, csv_path=None, progress=None,
                source: pathlib.Path = SOLUTIONS, sandbox_user: str | None = None,
                students: list | None = None) -> ClassReport:
    """Autograde every ``submitted/<student>/<assignment>/`` of the course directory ``course``.

    Parameters
    ----------
    course : path
        An nbgrader course directory (``submitted/``, ``gradebook.db``, ``autograded/``).
    assignment : str
    jobs : int
        Worker processes grading in parallel.
    overrides : dict, optional
        nbgrader config, e.g. ``{"Execute.timeout": 5}``.
    memory_gb : float
        Address-space limit of each notebook's kernel (0: none).
    csv_path : path, optional
        Where the grades go (default ``<course>/grades.csv``).
    progress : callable, optional
        Called as ``progress(done, total, outcome)`` after each submission.
    source : path
        The folder holding the assignment's source notebooks.
    sandbox_user : str, optional
        Run every student kernel as this unprivileged system user (needs root; see ``grading/sandbox.py``).
    students : list of str, optional
        Grade only these students' submissions (a re-grade after resubmissions); the others' rows in the
        gradebook and their autograded notebooks stay as they are.

    Returns
    -------
    ClassReport

    Raises
    ------
    SandboxError
        With ``sandbox_user``: not root, no such user, or the user can reach the course folder.
    """
    course = pathlib.Path(course).resolve()
    class_folder(course, source)
    box = sandbox.sandbox_for(sandbox_user, course, source) if sandbox_user else None
    if box:
        box.check()
    csv_path = pathlib.Path(csv_path) if csv_path else course / "grades.csv"
    students = [s for s in submitted_students(course, assignment) if students is None or s in students]
    roster = term.roster_ids(course)
    start = time.perf_counter()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="attn-grade-class-") as tmp:
        scratch = pathlib.Path(tmp)
        kernels = box.worker_config(sandbox.open_scratch(scratch)) if box else None
        init = (overrides, int(memory_gb * 2**30), str(scratch / "kernels.log"), kernels, str(course))
        _start_fork_server()  # it imports nbgrader while the template is prepared here
        template = prepare(course, assignment, scratch, overrides=overrides, source=source)
        expected = expected_cells(pathlib.Path(source) / assignment)
        pool = _start_pool(jobs, init)
        try:
            work = scratch / "work"
            work.mkdir()
            task = (assignment, str(course / "submitted"), str(template), str(work), expected)
            report = functools.partial(_finish, work=work, course=course, assignment=assignment, outcomes=outcomes,
                                       total=len(students), progress=progress, labels=source_labels(source, assignment))
            pool = _schedule(pool, students, task, jobs, init, report)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    for outcome in outcomes:
        if roster and outcome.student not in roster:
            outcome.problems.append(term.NOT_ON_ROSTER.format(student=outcome.student))
    export_csv(course, csv_path, [f"{assignment}/{o.student}" for o in outcomes if not o.graded])
    return ClassReport(assignment, outcomes, time.perf_counter() - start, csv_path)


PRELOAD = ["grading.class_grading", "grading.kernel_limits", "nbgrader.api", "nbgrader.converters",
           "nbgrader.coursedir", "nbgrader.utils"]


def _start_fork_server() -> None:
    """Start multiprocessing's fork server now, preloading nbgrader, without waiting for it.

    The workers are forked from it: a clean process (no threads, no event loop,
    no open gradebook) that imported nbgrader once, so a worker starts in
    milliseconds instead of importing nbgrader itself, and a replacement pool
    costs nothing.
    """
    multiprocessing.set_forkserver_preload(PRELOAD)
    multiprocessing.forkserver.ensure_running()


def _start_pool(jobs: int, init: tuple) -> concurrent.futures.ProcessPoolExecutor:
    """``jobs`` worker processes forked from the fork server (see ``_start_fork_server``)."""
    _start_fork_server()
    return concurrent.futures.ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("forkserver"),
                                                  initializer=_init_worker, initargs=init)


def _schedule(pool, students: list, task: tuple, jobs: int, init: tuple, report):
    """Grade ``students`` with at most ``jobs`` in flight; survive workers that die.

    When a worker process dies (student code killed it), every submission in
    flight is suspect: they are graded again one at a time in a fresh pool, so
    only the one that kills its worker again is reported, and the others are
    graded as usual.  Returns the pool in use at the end.
    """
    assignment, submitted, template, work, expected = task
    queue, suspects, flight = collections.deque(students), collections.deque(), {}
    while queue or suspects or flight:
        limit = 1 if suspects else max(1, jobs)
        while len(flight) < limit and (suspects or queue):
            student = suspects.popleft() if suspects else queue.popleft()
            args = (assignment, student, f"{submitted}/{student}/{assignment}", template, work, expected)
            flight[pool.submit(grade_one, *args)] = student
        done, _ = concurrent.futures.wait(flight, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            outcome = _collect(future, flight[future])
            if outcome is not None:
                del flight[future]
                report(outcome)
        if any(_broken(f) for f in flight):  # the pool is dead: everything still in flight failed with it
            concurrent.futures.wait(flight)
            lost = [flight[f] for f in flight]
            if len(lost) == 1 and limit == 1:
                report(Outcome(lost[0], False, 0.0, [WORKER_DIED]))
            else:
                suspects.extend(lost)
            flight.clear()
            pool.shutdown(wait=True, cancel_futures=True)
            pool = _start_pool(jobs, init)
    return pool


def _broken(future) -> bool:
    """Whether a finished future failed because its worker process died."""
    return future.done() and isinstance(future.exception(), concurrent.futures.process.BrokenProcessPool)


def _collect(future, student: str) -> Outcome | None:
    """The future's outcome; None when its worker died (to retry); any other failure becomes an ungraded outcome."""
    if _broken(future):
        return None
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - one submission must never stop the class
        return Outcome(student, False, 0.0, [f"评分进程出错（{type(exc).__name__}: {exc}）——未评分"])


def _finish(outcome: Outcome, *, work: pathlib.Path, course: pathlib.Path, assignment: str, outcomes: list,
            total: int, progress, labels: dict) -> None:
    """Merge one outcome into the class, record it and report progress."""
    _merge(work / outcome.student, course, assignment, outcome, labels)
    outcomes.append(outcome)
    if progress:
        progress(len(outcomes), total, outcome)


def _merge(worker_root: pathlib.Path, course: pathlib.Path, assignment: str, outcome: Outcome, labels: dict) -> None:
    """Merge one worker course into the class (serially, in the main process), then drop it.

    A mark re-opened because its answer changed adds a line to the outcome's problems.
    """
    if worker_root.exists():
        outcome.problems += merge_submission(worker_root, db_url(course), assignment, outcome.student, labels) or []
        copy_autograded(worker_root, course, assignment, outcome.student)
        shutil.rmtree(worker_root, ignore_errors=True)
