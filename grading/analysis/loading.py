"""Reading one graded assignment of a class, the data every instructor-side analysis starts from.

Everything is read from what nbgrader has already written in a course
directory; nothing is executed again:

* the gradebook (``gradebook.db``, through nbgrader's :class:`~nbgrader.api.Gradebook`):
  every graded cell's score, the totals, and the source of the instructor's
  test cells (which, for a quiz, hold the key in the hidden ``quiz.grade(...)`` call);
* the autograded notebooks (``autograded/<student>/<assignment>/*.ipynb``):
  the ``answer = ...`` line of every quiz answer cell, read with
  :func:`ast.literal_eval` and parsed by the course's own
  :func:`attnlib.quiz.parse_answer`.

A quiz whose questions have per-student variants (the hidden call passes
``question=Q1``) shows each student the options in their own order: the
letters read from a student's notebook are mapped back to canonical letters
with that student's order (:func:`attnlib.variants.order` of the submitting
student's id) before anything counts them, so a letter in every statistic
means one option whatever letter each student saw.

A submission whose autograded notebook is missing or cannot be read (for
example a submitted file that was not valid JSON) is left out of every
statistic and listed by the page.
"""

from __future__ import annotations

import ast
import math
import pathlib
import re
from collections import Counter
from dataclasses import dataclass, field, replace

import nbformat

from attnlib import quiz, variants

__all__ = [
    "BLANK", "ERROR", "ERROR_CAUSES", "INVALID", "UNREADABLE", "VALID", "AssignmentData", "Choice", "QuizItem",
    "Submission", "answer_value", "canonical_choice", "cell_error", "exercise_labels", "grade_call", "graded_cells",
    "graded_choice", "load_assignment", "quiz_items", "read_autograded", "read_choice", "students_on_disk",
]

BLANK = "blank"
#: Status of an answer that is not a set of valid letters (``"Z"``, ``1``, ``"AA"`` ...).
INVALID = "invalid"
#: Status of an answer read as a set of option letters.
VALID = "valid"
#: Status of an answer whose cell failed when it was graded (timed out, crashed the kernel ...) in a way that
#: left the kernel with something else than what the cell's text says; what the text says is not what was graded.
ERROR = "error"

#: Chinese cause of a cell error, by the ``ename`` of the error output nbgrader stored in the autograded notebook.
ERROR_CAUSES = {
    "CellTimeoutError": "运行超时被中断",
    "KeyboardInterrupt": "运行超时被中断",
    "DeadKernelError": "让内核退出或崩溃",
    "MemoryError": "申请的内存超过上限",
    "_ArrayMemoryError": "申请的内存超过上限",
}

_EXERCISE_HEADING = re.compile(r"^#+\s*(?P<label>练习\s*\d+|第\s*\d+\s*题)(?:\s*[：:]\s*(?P<title>[^（(\n]*))?", re.M)

_QUIZ_TEST = re.compile(r"(?P<answer>q\d\d)_test")


class _Unreadable:
    """Marker for an ``answer = <expression>`` whose value is not a literal (it would need running)."""

    def __repr__(self):
        return "UNREADABLE"


UNREADABLE = _Unreadable()


@dataclass(frozen=True)
class QuizItem:
    """One multiple-choice question of a quiz, as its hidden test cell grades it.

    Attributes
    ----------
    answer_cell, test_cell : str
        Grade ids of the answer cell (``"q01"``) and of its graded test cell (``"q01_test"``).
    number : int
        The question's number shown to students.
    key : frozenset of str
        The right letters.
    options : str
        The valid letters in order, e.g. ``"ABCD"``.
    multi : bool
        Multi-select (partial credit) or single choice.
    points : float
        Maximum score of the question.
    variants : str
        The assignment whose per-student option orders the question shows (its hidden call passes
        ``question=``); ``""`` when every student sees the canonical order.
    """

    answer_cell: str
    test_cell: str
    number: int
    key: frozenset
    options: str
    multi: bool
    points: float
    variants: str = ""


@dataclass(frozen=True)
class Choice:
    """A student's answer to one quiz question, as read from the autograded notebook.

    ``status`` is ``"valid"``, :data:`BLANK`, :data:`INVALID` or :data:`ERROR`; ``letters`` is
    empty unless the answer is valid; ``error`` is the ``ename`` of the cell's error when the status is
    :data:`ERROR`.
    """

    status: str
    letters: frozenset = frozenset()
    error: str = ""


@dataclass
class Submission:
    """One readable submission: scores from the gradebook, quiz choices from the autograded notebook.

    Attributes
    ----------
    student : str
    total : float
        The gradebook's total (pending manual grades count 0, as in nbgrader).
    scores : dict
        Graded cell name -> score, or None for a manually graded cell not graded yet.
    choices : dict
        Quiz answer cell id -> :class:`Choice`.
    """

    student: str
    total: float
    scores: dict = field(default_factory=dict)
    choices: dict = field(default_factory=dict)


@dataclass
class AssignmentData:
    """What :func:`load_assignment` read for one assignment.

    Attributes
    ----------
    assignment : str
    max_score : float
    cells : list of (str, float)
        Graded cells in notebook order, with their maximum score.
    items : list of QuizItem
        The quiz questions (empty for a chapter assignment).
    submissions : list of Submission
        The readable submissions.
    unreadable : dict
        Student -> reason (Chinese), for submissions left out.
    labels : dict
        Graded cell name -> what the students see it as (``"练习 1：数值稳定的 softmax"``, ``"第 3 题"``),
        read from the exercise headings of the notebook; a cell without one is shown by its name.
    """

    assignment: str
    max_score: float
    cells: list
    items: list
    submissions: list
    unreadable: dict
    labels: dict = field(default_factory=dict)

    def label(self, cell: str) -> str:
        """The name a reader of the page knows a graded cell by."""
        return self.labels.get(cell, cell)


def grade_call(source: str) -> dict | None:
    """The keyword arguments of the ``quiz.grade(...)`` call in a test cell's source.

    Parameters
    ----------
    source : str
        The instructor's test cell (with its hidden tests), as stored in the gradebook.

    Returns
    -------
    dict or None
        ``{"key": "B", "multi": False, "points": 1, "number": 1, "explanations": {...}}``; a question with
        variants adds ``"question": "Q1"`` (the name its call passes, as written: it is an object, not a literal).
        None when the cell holds no such call or another keyword is not a literal.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("quiz.grade", "grade"):
            try:
                return {k.arg: ast.unparse(k.value) if k.arg == "question" else ast.literal_eval(k.value)
                        for k in node.keywords if k.arg}
            except ValueError:
                return None
    return None


def quiz_items(gb, assignment: str, notebook: str) -> list[QuizItem]:
    """The quiz questions of one notebook, keys read from the gradebook's copy of the test cells.

    Parameters
    ----------
    gb : nbgrader.api.Gradebook
    assignment, notebook : str

    Returns
    -------
    list of QuizItem
        Sorted by question; empty when the notebook is not a quiz.
    """
    items = []
    for cell in gb.find_notebook(notebook, assignment).grade_cells:
        match = _QUIZ_TEST.fullmatch(cell.name)
        if not match:
            continue
        call = grade_call(gb.find_source_cell(cell.name, notebook, assignment).source)
        if not call or "key" not in call or "explanations" not in call:
            continue
        options = "".join(call["explanations"])
        items.append(QuizItem(
            answer_cell=match["answer"], test_cell=cell.name, number=int(call.get("number", match["answer"][1:])),
            key=quiz.parse_answer(call["key"], options), options=options, multi=bool(call.get("multi", False)),
            points=float(cell.max_score), variants=assignment if "question" in call else ""))
    return sorted(items, key=lambda item: item.answer_cell)


def answer_value(source: str):
    """The value a quiz answer cell assigns to ``answer``, read without running the cell.

    The last top-level ``answer = <literal>`` before any top-level ``raise``
    (a stub left in place stops the cell before later lines run).

    Returns
    -------
    object
        The literal value; :data:`attnlib.quiz.MISSING` when no assignment runs;
        :data:`UNREADABLE` when the value is an expression that would need executing.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return quiz.MISSING  # the cell fails to run: ``answer`` is never defined
    value = quiz.MISSING
    for stmt in tree.body:
        if isinstance(stmt, ast.Raise):
            break
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "answer" for t in targets):
            try:
                value = ast.literal_eval(stmt.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = UNREADABLE
    return value


def read_choice(value, item: QuizItem) -> Choice:
    """Classify an answer value with the course's parser (:func:`attnlib.quiz.parse_answer`).

    Parameters
    ----------
    value : object
        From :func:`answer_value`.
    item : QuizItem

    Returns
    -------
    Choice
        Valid (with its letters), blank (no letter given) or invalid.
    """
    if value is UNREADABLE:
        return Choice(INVALID)
    try:
        return Choice(VALID, quiz.parse_answer(value, item.options))
    except quiz.InvalidAnswer:
        empty = value is quiz.MISSING or (isinstance(value, str) and not quiz.SEPARATORS.sub("", value)) or (
            isinstance(value, (list, tuple, set, frozenset)) and not value)
        return Choice(BLANK if empty else INVALID)


def _answer_sources(path: pathlib.Path) -> dict[str, str]:
    """Grade id -> source of every cell of a notebook that has one (raises if the file cannot be read)."""
    return {g: c.source for g, c in graded_cells(path).items()}


def graded_cells(path: pathlib.Path) -> dict:
    """Grade id -> cell (in notebook order) of every cell of a notebook that has one (raises if unreadable)."""
    nb = nbformat.read(str(path), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c
            for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")}


def cell_error(cell) -> str:
    """The ``ename`` of the first error a cell raised when it was graded ("" when it ran without one)."""
    for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
        if out.get("output_type") == "error":
            return str(out.get("ename") or "Error")
    return ""


def exercise_labels(cells: dict) -> dict[str, str]:
    """Graded cell id -> the exercise it belongs to, as the notebook's headings name it.

    ``cells`` maps grade ids to cells in notebook order (every cell with an id, graded or not).  A graded
    cell takes the last heading ``## 练习 N：标题（…分）`` (or ``第 N 题``) above it, or the first line of
    its own source when that is such a heading (``# 练习 1 的测试（3 分）``); when several graded cells
    share one exercise they are numbered.
    """
    current, labels = None, {}
    for grade_id, cell in cells.items():
        heading = None
        for match in _EXERCISE_HEADING.finditer(cell.get("source", "")):
            heading = match
        if cell.get("cell_type") == "markdown" and heading and not cell.get("metadata", {}).get(
                "nbgrader", {}).get("grade"):
            title = (heading["title"] or "").strip()
            current = re.sub(r"\s+", " ", heading["label"]) + (f"：{title}" if title else "")
            continue
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
            own = re.match(r"#\s*(练习|第)\s*(\d+)", cell.get("source", ""))
            if own and cell.get("cell_type") == "code":
                own = f"{own[1]} {own[2]}" + (" 题" if own[1] == "第" else "")
            else:
                own = None
            labels[grade_id] = current or own or grade_id
    counts = Counter(labels.values())
    seen = Counter()
    for grade_id, label in labels.items():
        if counts[label] > 1 and label != grade_id:
            seen[label] += 1
            labels[grade_id] = f"{label}（{seen[label]}）"
    return labels


def load_assignment(course_dir, assignment: str, db_url: str | None = None) -> AssignmentData:
    """Read one assignment's grades and answers from a course directory.

    Parameters
    ----------
    course_dir : path
        The nbgrader course root (holds ``autograded/`` and, by default, ``gradebook.db``).
    assignment : str
    db_url : str, optional
        Gradebook URL; default ``sqlite:///<course_dir>/gradebook.db``.

    Returns
    -------
    AssignmentData

    Raises
    ------
    FileNotFoundError
        No gradebook at the default place.
    KeyError
        The gradebook does not know ``assignment``.
    """
    from nbgrader.api import Gradebook, MissingEntry

    course_dir = pathlib.Path(course_dir)
    if db_url is None:
        db = course_dir / "gradebook.db"
        if not db.exists():
            raise FileNotFoundError(f"没有找到成绩库 {db}（请先运行 nbgrader autograde）")
        db_url = f"sqlite:///{db}"
    with Gradebook(db_url) as gb:
        try:
            record = gb.find_assignment(assignment)
        except MissingEntry:
            raise KeyError(f"成绩库里没有作业 {assignment!r}") from None
        notebooks = sorted(nb.name for nb in record.notebooks)
        items = [replace(item, test_cell=_label(name, item.test_cell, notebooks))
                 for name in notebooks for item in quiz_items(gb, assignment, name)]
        max_cells = {(name, c.name): float(c.max_score)
                     for name in notebooks for c in gb.find_notebook(name, assignment).grade_cells}
        graded = {s.student_id: s for s in gb.assignment_submissions(assignment)}
        submissions, unreadable, order, labels = [], {}, [], {}
        for student in sorted(set(graded) | set(students_on_disk(course_dir, assignment))):
            sub = graded.get(student)
            cells_read, reason = read_autograded(course_dir / "autograded" / student / assignment, notebooks,
                                                  cells=True)
            if reason is None and sub is None:
                reason = "成绩库中没有这份提交"
            if reason is not None:
                unreadable[student] = reason
                continue
            if not order:
                order = [(n, g) for n in notebooks for g in cells_read[n] if (n, g) in max_cells]
                labels = {_label(n, g, notebooks): (f"{n}：{text}" if len(notebooks) > 1 else text)
                          for n in notebooks for g, text in exercise_labels(cells_read[n]).items()}
            scores = {}
            for nb_sub in sub.notebooks:
                for g in nb_sub.grades:
                    scores[_label(nb_sub.notebook.name, g.name, notebooks)] = _score(g)
            all_cells = {g: c for n in notebooks for g, c in cells_read[n].items()}
            choices = {item.answer_cell: graded_choice(all_cells.get(item.answer_cell), item,
                                                       scores.get(item.test_cell),
                                                       all_cells.get(item.test_cell.rsplit("/", 1)[-1]), student)
                       for item in items}
            submissions.append(Submission(student, float(sub.score), scores, choices))
        order += sorted(k for k in max_cells if k not in order)
        cells = [(_label(n, g, notebooks), max_cells[(n, g)]) for n, g in order]
        labels.update({item.test_cell: f"第 {item.number} 题" for item in items})
        return AssignmentData(assignment, float(record.max_score), cells, items, submissions, unreadable, labels)


def canonical_choice(choice: Choice, item: QuizItem, student: str | None) -> Choice:
    """A choice in canonical letters: the letters ``student`` saw mapped through their option order.

    Unchanged for a question without variants, for the canonical student (None) and for an answer that is
    not a valid set of letters.
    """
    if not item.variants or student is None or choice.status != VALID:
        return choice
    order = variants.order(student, item.variants, item.number, len(item.options))
    return replace(choice, letters=frozenset(variants.shown_to_canonical(choice.letters, order)))


def graded_choice(cell, item: QuizItem, score: float | None, test_cell=None, student: str | None = None) -> Choice:
    """A student's answer to one question, as the grading saw it, in canonical letters (:func:`canonical_choice`).

    The text of the answer cell (:func:`answer_value`, :func:`read_choice`) is what the kernel was given,
    unless the cell failed when it was graded (a timeout, a crashed kernel ...): then, if the text read does not
    earn what the gradebook gave (the ``answer = ...`` line never ran), the answer is :data:`ERROR`, with the
    error's name, and counts for no option.  A timeout or crash of the question's test cell (``test_cell``)
    counts the same way.
    """
    if cell is None:
        return read_choice(quiz.MISSING, item)
    choice = canonical_choice(read_choice(answer_value(cell.get("source", "")), item), item, student)
    error = cell_error(cell)
    if not error and test_cell is not None and cell_error(test_cell) in ERROR_CAUSES:
        error = cell_error(test_cell)
    if not error:
        return choice
    text_score = (quiz.score(choice.letters, item.key, multi=item.multi, points=item.points)
                  if choice.status == VALID else 0.0)
    if score is not None and math.isclose(text_score, score, abs_tol=0.006) and choice.status == VALID:
        return choice  # the answer line ran before the error: the text is what was graded
    if choice.status != VALID and (score or 0.0) == 0.0:
        return choice  # blank or invalid whatever happened: the text already says why it scored 0
    return Choice(ERROR, error=error)


def read_autograded(folder: pathlib.Path, notebooks: list, cells: bool = False) -> tuple[dict, str | None]:
    """Cell sources of one student's autograded notebooks: ``({notebook: {grade id: source}}, None)``.

    With ``cells=True`` the values are the cells themselves (source, outputs, metadata), in notebook order.
    Returns ``({}, reason)`` (reason in Chinese) when a notebook is missing or cannot be read; never raises.
    """
    sources = {}
    for name in notebooks:
        path = folder / f"{name}.ipynb"
        if not path.exists():
            return {}, "没有自动评分后的笔记本（提交的文件无法读取或未被评分）"
        try:
            sources[name] = graded_cells(path) if cells else _answer_sources(path)
        except Exception as exc:  # noqa: BLE001 - any damage to a student's file must not stop the report
            return {}, f"自动评分后的笔记本无法读取：{type(exc).__name__}"
    return sources, None


def _score(grade) -> float | None:
    """A grade's score: the manual one if given, else the automatic one; None while a human has yet to grade.

    (nbgrader's ``Grade.score`` reads 0 for a written answer not graded yet.)
    """
    if grade.manual_score is not None:
        return float(grade.manual_score)
    return None if grade.auto_score is None else float(grade.auto_score)


def _label(notebook: str, cell: str, notebooks: list) -> str:
    """A graded cell's name on the page: the grade id, prefixed by the notebook when there are several."""
    return cell if len(notebooks) == 1 else f"{notebook}/{cell}"


def students_on_disk(course_dir: pathlib.Path, assignment: str) -> list[str]:
    """Students with a folder for ``assignment`` under ``submitted/`` or ``autograded/``."""
    found = set()
    for step in ("submitted", "autograded"):
        top = course_dir / step
        if top.is_dir():
            found.update(p.name for p in top.iterdir() if (p / assignment).is_dir())
    return sorted(found)




# --------------------------------------------------------------------------- answer cells, for comparing submissions

#: Kinds of answer cell: code students write, a written answer (Markdown), quiz letters.
CODE, WRITTEN, LETTERS = "code", "written", "letters"

_QUIZ_ANSWER = re.compile(r"q\d\d")
REPO = pathlib.Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class AnswerCell:
    """One cell students answer in, as the release notebook holds it.

    Attributes
    ----------
    grade_id : str
    kind : str
        :data:`CODE`, :data:`WRITTEN` or :data:`LETTERS`.
    template : str
        The released source of the cell (the stub every student starts from).
    label : str
        What students know it as (``"练习 2：带温度的 softmax"``), else the grade id.
    number, n_options : int
        For a quiz answer: the question's number and how many options it has (0 otherwise).
    variants : str
        For a quiz answer whose options are shown in a per-student order: the assignment of the order.
    """

    grade_id: str
    kind: str
    template: str
    label: str
    number: int = 0
    n_options: int = 0
    variants: str = ""


@dataclass
class ClassAnswers:
    """Every readable submission's answer cells, as submitted (nothing run again).

    Attributes
    ----------
    assignment : str
    cells : list of AnswerCell
        In notebook order.
    answers : dict
        Student -> {grade id: source}.
    unreadable : dict
        Student -> reason (Chinese): a notebook missing or not valid JSON.
    keys : dict
        Quiz answer cell -> canonical key letters (frozenset), from the instructor's source when it is there.
    """

    assignment: str
    cells: list
    answers: dict
    unreadable: dict
    keys: dict = field(default_factory=dict)


def _first_notebook(*folders: pathlib.Path) -> pathlib.Path | None:
    for folder in folders:
        found = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
        if found:
            return found[0]
    return None


def _question_shape(source: str) -> tuple[int, int, str] | None:
    """``(number, n_options, assignment)`` of the ``quiz.Question(...)`` a show cell defines, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("quiz.Question", "Question"):
            options = next((k.value for k in node.keywords if k.arg == "options"), None)
            if len(node.args) >= 2 and isinstance(options, ast.List):
                try:
                    return int(ast.literal_eval(node.args[1])), len(options.elts), str(ast.literal_eval(node.args[0]))
                except ValueError:
                    return None
    return None


def answer_cells(release: pathlib.Path) -> list[AnswerCell]:
    """The answer cells of a release notebook: its solution cells, each with its kind and template."""
    nb = nbformat.read(str(release), as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"]: c
             for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")}
    out, heading = [], None
    for grade_id, cell in cells.items():
        if not cell.metadata["nbgrader"].get("solution"):
            if cell.cell_type == "markdown":
                for match in _EXERCISE_HEADING.finditer(cell.source):
                    title = (match["title"] or "").strip()
                    heading = re.sub(r"\s+", " ", match["label"]) + (f"：{title}" if title else "")
            continue
        label = heading or grade_id
        if cell.cell_type == "markdown":
            out.append(AnswerCell(grade_id, WRITTEN, cell.source, label))
        elif _QUIZ_ANSWER.fullmatch(grade_id):
            shape = _question_shape(cells[f"{grade_id}_show"].source) if f"{grade_id}_show" in cells else None
            number, n_options, varied = shape if shape else (int(grade_id[1:]), 4, "")
            out.append(AnswerCell(grade_id, LETTERS, cell.source, f"第 {number} 题", number, n_options, varied))
        else:
            out.append(AnswerCell(grade_id, CODE, cell.source, label))
    return out


def source_keys(source: pathlib.Path | None) -> dict[str, frozenset]:
    """Quiz answer cell -> canonical key, read from the hidden ``quiz.grade`` calls of the instructor's source."""
    if source is None:
        return {}
    keys = {}
    for grade_id, cell in graded_cells(source).items():
        match = _QUIZ_TEST.fullmatch(grade_id)
        call = grade_call(cell.source) if match else None
        if call and "key" in call and "explanations" in call:
            keys[match["answer"]] = quiz.parse_answer(call["key"], "".join(call["explanations"]))
    return keys


def load_answers(course_dir, assignment: str) -> ClassAnswers:
    """Every student's answer cells of one assignment, from ``autograded/`` (else ``submitted/``).

    The answer cells and their templates come from the class's release (``COURSE/notebooks/<assignment>/``,
    else the repository's); quiz keys from the instructor's source (``COURSE/solutions/``, else the
    repository's).  A notebook that is missing or is not valid JSON is listed in ``unreadable``; it never
    stops the others.

    Raises
    ------
    FileNotFoundError
        No release notebook of ``assignment``, or no submission of it in the class folder.
    """
    course_dir = pathlib.Path(course_dir)
    release = _first_notebook(course_dir / "notebooks" / assignment, REPO / "notebooks" / assignment)
    if release is None:
        raise FileNotFoundError(f"没有找到作业 {assignment} 的发布版笔记本（notebooks/{assignment}/）")
    students = students_on_disk(course_dir, assignment)
    if not students:
        raise FileNotFoundError(f"{course_dir} 的 submitted/ 和 autograded/ 里没有作业 {assignment} 的提交")
    cells = answer_cells(release)
    answers, unreadable = {}, {}
    for student in students:
        folder = next((course_dir / step / student / assignment for step in ("autograded", "submitted")
                       if (course_dir / step / student / assignment / release.name).exists()), None)
        if folder is None:
            unreadable[student] = f"没有 {release.name}"
            continue
        read, reason = read_autograded(folder, [release.stem])
        if reason is not None:
            unreadable[student] = "笔记本无法读取（不是有效的 JSON 或已损坏）"
            continue
        answers[student] = {c.grade_id: read[release.stem].get(c.grade_id, c.template) for c in cells}
    source = _first_notebook(course_dir / "solutions" / assignment, REPO / "solutions" / assignment)
    return ClassAnswers(assignment, cells, answers, unreadable, source_keys(source))
