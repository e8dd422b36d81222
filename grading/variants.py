"""Grading each submission against its own student's variant (``attnlib.variants``), by every route.

nbgrader knows which student it grades (``resources["nbgrader"]["student"]``);
the kernel it starts does not.  The steps below, put into the course's autograde
chain by :func:`grading.nbgrader_autograde.autograde_steps` (so ``nbgrader
autograde`` with ``nbgrader_config.py``, ``make grade-class``, the JupyterHub
exchange and the fire drill all get them), tell it:

* :class:`PinStudent` (before execution) writes :data:`PIN` as the first line
  of every ``### BEGIN HIDDEN TESTS`` block, so the key a hidden test grades
  against is the submitter's whatever an answer cell did before it
  (``variants.pin("other")``, ``os.environ["ATTNLIB_STUDENT"] = ...``);
* :func:`student_kernel` makes the ``Execute`` step start each kernel with
  ``ATTNLIB_STUDENT`` set to the submitter (passed to the kernel's launch only:
  the grader's own environment never changes), so the question cells of the
  autograded notebook, and its feedback, show that student's variant;
* :class:`RecordShownVariant` (first of the sanitizing steps, before the
  outputs are cleared) reads whose variant the submitted notebook showed (the
  ``attnlib_variant`` metadata of its question cells' outputs).  When that is
  another student, or the canonical variant, the notebook is still graded
  against the submitter's key; :class:`PinStudent` then logs one Chinese line
  (:func:`mismatch_line`) and leaves :data:`FACTS` beside the autograded
  notebook, which ``make grade-class`` reports and ``grades.csv``'s ``status``
  column names (``grading/nbgrader_export.py``).  A notebook never run records
  nothing and is not a mismatch.

Hidden test blocks are removed from feedback (``ClearHiddenTests``), so the
pinned line never reaches a student.

:func:`student_sheet` prints one student's variant of a quiz with its key, in
their letters, for a regrade request (``make variant``, ``scripts/variant.py``).
"""

from __future__ import annotations

import json
import os
import pathlib

from nbgrader.preprocessors import NbGraderPreprocessor

from attnlib.variants import ENV_STUDENT

#: The line written first into every hidden test block, ``{student!r}`` the submitter.
PIN = "from attnlib import variants; variants.pin({student!r})"
#: Where hidden tests begin (nbgrader's ``ClearHiddenTests.begin_test_delimiter``).
BEGIN_HIDDEN = "BEGIN HIDDEN TESTS"
#: The key of a question cell's output metadata recording the variant shown (``quiz.Variant.record``).
RECORD = "attnlib_variant"
#: Notebook metadata carrying what the sanitizing step read from the outputs to the grading step.
CARRIED = "attnlib_shown_students"
#: The file beside an autograded notebook that records a mismatch: ``{notebook: {"submitter", "shown"}}``.
FACTS = "variant-mismatch.json"
CANONICAL = "标准顺序（没有设定学生时）"


def pin_hidden_tests(source: str, student: str) -> str:
    """``source`` with :data:`PIN` for ``student`` as the first line of each hidden test block (same indent)."""
    lines = []
    for line in source.split("\n"):
        lines.append(line)
        if BEGIN_HIDDEN in line:
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(indent + PIN.format(student=student))
    return "\n".join(lines)


def shown_students(nb) -> list:
    """Students whose variant the notebook's outputs show, in order, each once (None: the canonical variant)."""
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            record = (output.get("metadata") or {}).get(RECORD)
            if isinstance(record, dict) and record.get("student") not in found:
                found.append(record.get("student"))
    return found


def others(shown: list, submitter: str) -> list:
    """The entries of ``shown`` that are not ``submitter`` (a mismatch when not empty)."""
    return [s for s in shown if s != submitter]


def _who(students: list) -> str:
    return "、".join(CANONICAL if s is None else str(s) for s in students)


def _mismatch(submitter: str, shown: list) -> str:
    return f"笔记本里显示的是 {_who(shown)} 的题目版本，已按 {submitter} 自己的版本评分（选项字母可能对不上）"


def mismatch_problem(notebook: str, submitter: str, shown: list) -> str:
    """The problem, as ``make grade-class`` lists it after ``student：``."""
    return f"{notebook} 的{_mismatch(submitter, shown)}"


def mismatch_line(assignment: str, submitter: str, shown: list) -> str:
    """The one Chinese line of nbgrader's log for a notebook showing another variant than the submitter's."""
    return f"学生 {submitter} 的 {assignment}：{_mismatch(submitter, shown)}"


def status_note(facts: dict) -> str:
    """What ``grades.csv``'s ``status`` adds for a submission with a mismatch (``facts``: :func:`read_facts`)."""
    shown = [s for entry in facts.values() for s in entry.get("shown", [])]
    return f"题目版本不符：笔记本显示的是 {_who(list(dict.fromkeys(shown)))} 的版本，已按本人的版本评分"


def read_facts(folder) -> dict:
    """The mismatches recorded in an autograded assignment folder (``{}`` when none)."""
    path = pathlib.Path(folder) / FACTS
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_facts(folder, notebook: str, submitter: str, shown: list) -> None:
    """Add one notebook's mismatch to :data:`FACTS` in ``folder``."""
    folder = pathlib.Path(folder)
    facts = read_facts(folder)
    facts[notebook] = {"submitter": submitter, "shown": shown}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FACTS).write_text(json.dumps(facts, ensure_ascii=False, indent=1), encoding="utf-8")


def _student(resources) -> str | None:
    return ((resources or {}).get("nbgrader") or {}).get("student") or None


class RecordShownVariant(NbGraderPreprocessor):
    """Sanitizing step (before ``ClearOutput``): carry the students the submitted outputs show to grading."""

    def preprocess(self, nb, resources):
        nb.metadata[CARRIED] = shown_students(nb)
        return nb, resources


class PinStudent(NbGraderPreprocessor):
    """Grading step (before ``Execute``): pin the submitter in every hidden test; report a shown mismatch."""

    def preprocess(self, nb, resources):
        student = _student(resources)
        shown = nb.metadata.pop(CARRIED, [])
        if student is None:
            return nb, resources
        for cell in nb.cells:
            if cell.cell_type == "code" and BEGIN_HIDDEN in cell.source:
                cell.source = pin_hidden_tests(cell.source, student)
        wrong = others(shown, student)
        if wrong:
            assignment, notebook = resources["nbgrader"]["assignment"], resources["nbgrader"]["notebook"]
            self.log.warning(mismatch_line(assignment, student, wrong))
            folder = (resources.get("metadata") or {}).get("path")  # the autograded folder being graded
            if folder:
                write_facts(folder, notebook, student, wrong)
        return nb, resources


class StudentKernel:
    """Mixin for an ``Execute`` preprocessor: its kernel starts with ``ATTNLIB_STUDENT`` = the student graded.

    The variable goes into the kernel's launch environment only (a restarted kernel keeps it); the
    grader's ``os.environ`` is left as it was.
    """

    def preprocess(self, nb, resources=None, km=None):
        self._attnlib_student = _student(resources)
        return super().preprocess(nb, resources, km)

    def setup_kernel(self, **kwargs):
        student = getattr(self, "_attnlib_student", None)
        if student and "env" not in kwargs:
            kwargs["env"] = {**os.environ, ENV_STUDENT: student}
        return super().setup_kernel(**kwargs)


def student_kernel(execute: type) -> type:
    """``execute`` (an ``Execute`` class) whose kernels show the graded student's variant; same name for config."""
    return type(execute.__name__, (StudentKernel, execute), {"__doc__": execute.__doc__,
                                                             "__module__": execute.__module__})


# --------------------------------------------------------------------------- one student's variant, for a regrade


class NotAQuiz(ValueError):
    """The assignment has no ``quiz.grade`` test cell (message in Chinese)."""


def _is_question_code(cell) -> bool:
    """A locked code cell that is neither an answer nor a test: the setup cell and each question's show cell."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("locked") and not meta.get("solution") and not meta.get("grade")


def _quietly(run) -> str:
    """Run ``run()`` with its stdout captured; return what it printed."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run()
    return out.getvalue()


def _questions(nb) -> list[tuple]:
    """``(heading text, test cell's grade call)`` of each quiz question of the instructor's ``nb``, in order."""
    from grading.analysis.loading import grade_call

    found, heading = [], ""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("## 第"):
            heading = cell.source.strip()
        meta = cell.get("metadata", {}).get("nbgrader", {})
        call = grade_call(cell.source) if cell.cell_type == "code" and meta.get("grade") else None
        if call and "key" in call and "explanations" in call:
            found.append((heading, call))
    return found


def student_sheet(nb, assignment: str, student: str | None) -> str:
    """Every question of the quiz ``nb`` (the instructor's source) as ``student`` saw it, and their key.

    The question cells are run here (quietly) to build each ``quiz.Question``; the key and
    explanations are the literals of the hidden ``quiz.grade(...)`` calls, shown through the same
    code that writes the student's feedback, so the letters are the ones the student was graded in.
    ``student`` None is the canonical variant.  Raises :class:`NotAQuiz`.
    """
    from attnlib import quiz
    from attnlib import variants as core

    questions = _questions(nb)
    if not questions:
        raise NotAQuiz(f"{assignment} 不是测验：它的评分单元里没有 quiz.grade(...)，没有因人而异的选项和答案可打印")
    namespace: dict = {}
    for cell in nb.cells:
        if _is_question_code(cell):
            _quietly(lambda source=cell.source: exec(source, namespace))  # noqa: S102 - the instructor's own cells
    who = f"学生 {student}" if student else "标准顺序（没有设定学生）"
    lines = [f"{assignment} · {who} 的题目版本（与 JupyterLab、Validate、评分和反馈里看到的相同）", ""]
    before = core.pinned()
    core.pin(student)
    try:
        for heading, call in questions:
            lines += _one_question(quiz, namespace, heading, call)
    finally:
        core.pin(before)
    return "\n".join(lines).rstrip() + "\n"


def _one_question(quiz, namespace: dict, heading: str, call: dict) -> list[str]:
    """The lines of one question: its heading and stem, options in the student's letters, key and explanations."""
    question = namespace.get(call.get("question", ""))
    arguments = {k: v for k, v in call.items() if k != "question"}
    lines = [heading]
    if isinstance(question, quiz.Question):
        variant = question.variant()
        drawn_names = [name for lists in question.params_from.values() for name in lists] + list(question.params)
        drawn = {name: variant.values[name] for name in drawn_names}  # an earlier question's numbers first
        lines += ["", question.markdown(variant)]
        if drawn:
            lines += ["", "本题的数：" + "，".join(f"{name} = {value}" for name, value in drawn.items())]
        key = variant.shown(call["key"])
        arguments["question"] = question
    else:
        key = call["key"]  # a question without variants: the same letters for everyone
    feedback = _quietly(lambda: quiz.grade(key, **arguments))
    kept = feedback.rstrip("\n").split("\n")
    start = next((i for i, line in enumerate(kept) if line.startswith("  正确答案：")), len(kept))
    return [*lines, "", *kept[start:], ""]
