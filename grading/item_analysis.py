"""Item analysis of one graded assignment: an offline HTML page for the instructor, in Chinese.

Everything is read from what nbgrader has already written in a course
directory; nothing is executed again:

* the gradebook (``gradebook.db``, through nbgrader's :class:`~nbgrader.api.Gradebook`):
  every graded cell's score, the totals, and the source of the instructor's
  test cells (which, for a quiz, hold the key in the hidden ``quiz.grade(...)`` call);
* the autograded notebooks (``autograded/<student>/<assignment>/*.ipynb``):
  the ``answer = ...`` line of every quiz answer cell, read with
  :func:`ast.literal_eval` and parsed by the course's own
  :func:`attnlib.quiz.parse_answer`.

A submission whose autograded notebook is missing or cannot be read (for
example a submitted file that was not valid JSON) is left out of every
statistic and counted on the page.

The page (:func:`render_html`) holds the per-question correct rates, the
choice of every option with its discrimination (point-biserial correlation
with the score on the other questions), per-exercise score distributions and
the class's total-score histogram; figures are inline PNG, there is no script
and no link to the network.
"""

from __future__ import annotations

import ast
import base64
import datetime
import html
import math
import pathlib
import re
from collections import Counter
from dataclasses import dataclass, field, replace

import nbformat
import numpy as np

from attnlib import quiz
from attnlib.grading import points_text

__all__ = [
    "BLANK", "INVALID", "AssignmentData", "CellStats", "Choice", "OptionStats", "QuizItem", "Submission",
    "analyse", "answer_value", "cell_stats", "grade_call", "histogram", "load_assignment", "option_stats",
    "point_biserial", "quiz_items", "read_choice", "render_html", "write_report",
]

#: Status of an answer that holds no letter at all (``""``, ``[]``, no ``answer`` line).
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


# --------------------------------------------------------------------------- reading


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
    """

    answer_cell: str
    test_cell: str
    number: int
    key: frozenset
    options: str
    multi: bool
    points: float


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
        ``{"key": "B", "multi": False, "points": 1, "number": 1, "explanations": {...}}``;
        None when the cell holds no such call or a keyword is not a literal.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("quiz.grade", "grade"):
            try:
                return {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
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
            points=float(cell.max_score)))
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
    return {g: c.source for g, c in _graded_cells(path).items()}


def _graded_cells(path: pathlib.Path) -> dict:
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
        for student in sorted(set(graded) | set(_students_on_disk(course_dir, assignment))):
            sub = graded.get(student)
            cells_read, reason = _read_autograded(course_dir / "autograded" / student / assignment, notebooks,
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
                                                       all_cells.get(item.test_cell.rsplit("/", 1)[-1]))
                       for item in items}
            submissions.append(Submission(student, float(sub.score), scores, choices))
        order += sorted(k for k in max_cells if k not in order)
        cells = [(_label(n, g, notebooks), max_cells[(n, g)]) for n, g in order]
        labels.update({item.test_cell: f"第 {item.number} 题" for item in items})
        return AssignmentData(assignment, float(record.max_score), cells, items, submissions, unreadable, labels)


def graded_choice(cell, item: QuizItem, score: float | None, test_cell=None) -> Choice:
    """A student's answer to one question, as the grading saw it.

    The text of the answer cell (:func:`answer_value`, :func:`read_choice`) is what the kernel was given,
    unless the cell failed when it was graded (a timeout, a crashed kernel ...): then, if the text read does not
    earn what the gradebook gave (the ``answer = ...`` line never ran), the answer is :data:`ERROR`, with the
    error's name, and counts for no option.  A timeout or crash of the question's test cell (``test_cell``)
    counts the same way.
    """
    if cell is None:
        return read_choice(quiz.MISSING, item)
    choice = read_choice(answer_value(cell.get("source", "")), item)
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


def _read_autograded(folder: pathlib.Path, notebooks: list, cells: bool = False) -> tuple[dict, str | None]:
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
            sources[name] = _graded_cells(path) if cells else _answer_sources(path)
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


def _students_on_disk(course_dir: pathlib.Path, assignment: str) -> list[str]:
    """Students with a folder for ``assignment`` under ``submitted/`` or ``autograded/``."""
    found = set()
    for step in ("submitted", "autograded"):
        top = course_dir / step
        if top.is_dir():
            found.update(p.name for p in top.iterdir() if (p / assignment).is_dir())
    return sorted(found)


# --------------------------------------------------------------------------- statistics


def point_biserial(indicator, scores) -> float:
    """Pearson correlation of a 0/1 indicator with a score (the point-biserial coefficient).

    Parameters
    ----------
    indicator : array_like of bool or 0/1
    scores : array_like of float

    Returns
    -------
    float
        In ``[-1, 1]``; NaN when either variable is constant (nobody or everybody chose the option).
    """
    x = np.asarray(indicator, dtype=float)
    y = np.asarray(scores, dtype=float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    x, y = x - x.mean(), y - y.mean()
    return float((x @ y) / math.sqrt((x @ x) * (y @ y)))


@dataclass
class CellStats:
    """Statistics of one graded cell over the readable submissions.

    Attributes
    ----------
    name : str
    max_score : float
    graded : int
        Submissions with a score (manual grades still pending are excluded).
    pending : int
        Manual grades still pending.
    mean : float
        Mean score of the graded submissions (NaN when none).
    full_rate : float
        Fraction of graded submissions with full marks (the correct rate).
    discrimination : float
        Point-biserial-style correlation of the cell's score with the total of the other cells.
    distribution : dict
        Score -> number of submissions.
    """

    name: str
    max_score: float
    graded: int
    pending: int
    mean: float
    full_rate: float
    discrimination: float
    distribution: dict


def cell_stats(data: AssignmentData) -> list[CellStats]:
    """Per graded cell: mean score, correct (full-marks) rate, discrimination and score distribution."""
    totals = np.array([s.total for s in data.submissions], dtype=float)
    out = []
    for name, max_score in data.cells:
        raw = [s.scores.get(name) for s in data.submissions]
        values = np.array([math.nan if v is None else float(v) for v in raw])
        done = ~np.isnan(values)
        graded = values[done]
        rest = totals[done] - graded
        out.append(CellStats(
            name=name, max_score=max_score, graded=int(done.sum()), pending=int((~done).sum()),
            mean=float(graded.mean()) if graded.size else math.nan,
            full_rate=float(np.mean(np.isclose(graded, max_score))) if graded.size else math.nan,
            discrimination=point_biserial(graded, rest) if graded.size else math.nan,
            distribution=dict(sorted(Counter(round(float(v), 2) for v in graded).items()))))
    return out


@dataclass
class OptionStats:
    """How the class answered one quiz question.

    Attributes
    ----------
    item : QuizItem
    counts : dict
        Option letter -> number of students whose valid answer contains it.
    discrimination : dict
        Option letter -> point-biserial correlation of choosing it with the score on the other questions.
    blank, invalid : int
        Students who left the question blank / wrote something that is not a set of valid letters.
    blank_invalid_discrimination : float
        The same correlation for "blank, invalid or failed".
    answered : int
        Readable submissions (the denominator of every rate).
    disagree : int
        Answers whose score by the quiz rule (:func:`attnlib.quiz.score`) differs from the gradebook's:
        the text of the cell does not say what the kernel saw (e.g. ``answer = x``); 0 normally.
    """

    item: QuizItem
    counts: dict
    discrimination: dict
    blank: int
    invalid: int
    blank_invalid_discrimination: float
    answered: int
    disagree: int = 0
    errors: Counter = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        """Answers whose cell failed when graded (:data:`ERROR`): counted for no option."""
        return sum(self.errors.values())


def option_stats(data: AssignmentData) -> list[OptionStats]:
    """Distractor analysis of every quiz question: choice counts and discrimination of each option."""
    totals = np.array([s.total for s in data.submissions], dtype=float)
    out = []
    for item in data.items:
        scores = np.array([s.scores.get(item.test_cell) or 0.0 for s in data.submissions], dtype=float)
        rest = totals - scores
        choices = [s.choices[item.answer_cell] for s in data.submissions]
        chosen = {letter: np.array([letter in c.letters for c in choices]) for letter in item.options}
        missing = np.array([c.status != VALID for c in choices])
        failed = np.array([c.status == ERROR for c in choices], dtype=bool)
        rescored = np.array([quiz.score(c.letters, item.key, multi=item.multi, points=item.points)
                             if c.status == VALID else 0.0 for c in choices])
        out.append(OptionStats(
            item=item, counts={k: int(v.sum()) for k, v in chosen.items()},
            discrimination={k: point_biserial(v, rest) for k, v in chosen.items()},
            blank=sum(c.status == BLANK for c in choices), invalid=sum(c.status == INVALID for c in choices),
            blank_invalid_discrimination=point_biserial(missing, rest), answered=len(choices),
            disagree=int(np.sum(~np.isclose(rescored, scores, atol=0.006) & ~failed)),
            errors=Counter(c.error for c in choices if c.status == ERROR)))
    return out


def histogram(totals, max_score: float) -> tuple[np.ndarray, np.ndarray]:
    """Counts of total scores in bins of width 1 (at most 20 equal bins) from 0 to ``max_score``.

    The last bin includes ``max_score`` itself.

    Returns
    -------
    edges : ndarray, shape (n_bins + 1,)
    counts : ndarray of int, shape (n_bins,)
    """
    n_bins = max(1, min(20, int(math.ceil(max_score))))
    edges = np.linspace(0.0, max_score, n_bins + 1)
    counts, _ = np.histogram(np.clip(np.asarray(totals, dtype=float), 0.0, max_score), bins=edges)
    return edges, counts


@dataclass
class Analysis:
    """Everything the page shows."""

    data: AssignmentData
    cells: list
    options: list
    edges: np.ndarray
    counts: np.ndarray


def analyse(data: AssignmentData) -> Analysis:
    """All the statistics of :class:`AssignmentData`, ready for :func:`render_html`."""
    edges, counts = histogram([s.total for s in data.submissions], data.max_score)
    return Analysis(data, cell_stats(data), option_stats(data), edges, counts)


# --------------------------------------------------------------------------- figures


def _png(fig) -> str:
    """A figure as a ``data:`` URI (inline PNG, base64)."""
    from attnlib import plots

    return "data:image/png;base64," + base64.b64encode(plots.figure_png(fig, dpi=90)).decode("ascii")


def _figure_total(analysis: Analysis) -> str:
    import matplotlib.pyplot as plt

    edges, counts = analysis.edges, analysis.counts
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#4c72b0", edgecolor="white")
    ax.set_xlabel(f"总分（满分 {_num(analysis.data.max_score)}）")
    ax.set_ylabel("人数")
    ax.set_title(f"全班总分分布（{len(analysis.data.submissions)} 份可读提交）")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def _figure_cells(analysis: Analysis) -> str:
    import matplotlib.pyplot as plt

    stats = analysis.cells
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(stats) + 2), 3.2), layout="constrained")
    x = np.arange(len(stats))
    ax.bar(x - 0.2, [100 * s.full_rate for s in stats], width=0.4, label="满分率（答对率）", color="#55a868")
    ax.bar(x + 0.2, [100 * s.mean / s.max_score if s.max_score else 0 for s in stats], width=0.4,
           label="平均得分率", color="#8172b2")
    ax.set_xticks(x, [_short(analysis.data.label(s.name)) for s in stats], rotation=45, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("百分比 (%)")
    ax.set_title("各题答对率与平均得分率")
    ax.legend(loc="upper right", fontsize="small")
    return _png(fig)


def _figure_options(options: list[OptionStats]) -> str:
    import matplotlib.pyplot as plt

    cols = min(5, len(options))
    rows = math.ceil(len(options) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.4 * rows), layout="constrained", squeeze=False)
    for ax in axes.flat[len(options):]:
        ax.set_visible(False)
    for ax, st in zip(axes.flat, options, strict=False):
        labels = [*st.item.options, "空/无效/出错" if st.failed else "空/无效"]
        values = [st.counts[k] for k in st.item.options] + [st.blank + st.invalid + st.failed]
        colors = ["#55a868" if k in st.item.key else "#c44e52" for k in st.item.options] + ["#999999"]
        ax.bar(labels, values, color=colors)
        kind = "多选" if st.item.multi else "单选"
        ax.set_title(f"第 {st.item.number} 题（{kind}，答案 {quiz.format_letters(st.item.key)}）", fontsize="small")
        ax.set_ylim(0, max(1, st.answered))
        ax.tick_params(labelsize="small")
    fig.suptitle("各选项被选人数（绿色为正确选项，红色为干扰项）")
    return _png(fig)


def _short(label: str) -> str:
    """A label without its title, for a chart's axis: ``"练习 1：数值稳定的 softmax" -> "练习 1"``."""
    return label.split("：", 1)[0]


def distribution_bars(st: CellStats) -> tuple[list[str], list[int], list[str]]:
    """The bars of one cell's score-distribution chart: labels, heights and colours.

    One bar per score reached, and, while written answers wait for a human, a grey bar ``待人工批改`` with
    their number, so the chart accounts for every readable submission.
    """
    labels = [f"{_num(v)} 分" for v in st.distribution]
    values = [int(c) for c in st.distribution.values()]
    colors = ["#4c72b0"] * len(values)
    if st.pending:
        labels.append("待人工批改")
        values.append(int(st.pending))
        colors.append("#999999")
    return labels, values, colors


def _figure_distributions(stats: list[CellStats], data: AssignmentData | None = None) -> str:
    import matplotlib.pyplot as plt

    cols = min(4, len(stats))
    rows = math.ceil(len(stats) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.5 * rows), layout="constrained", squeeze=False)
    for ax in axes.flat[len(stats):]:
        ax.set_visible(False)
    for ax, st in zip(axes.flat, stats, strict=False):
        labels, values, colors = distribution_bars(st)
        ax.bar(labels, values, color=colors)
        name = _short(data.label(st.name)) if data is not None else st.name
        ax.set_title(f"{name}（满分 {_num(st.max_score)}）", fontsize="small")
        ax.set_xlabel("得分", fontsize="small")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel("人数", fontsize="small")
        ax.tick_params(labelsize="small")
    fig.suptitle("各练习的得分分布")
    return _png(fig)


# --------------------------------------------------------------------------- the page

_CSS = """
body { font-family: "Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", sans-serif;
       max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.6; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { white-space: nowrap; word-break: keep-all; background: #fafafa; }
td.label { white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
tr.key td { background: #e8f5e9; font-weight: bold; }
td.warn { color: #b71c1c; }
.note { background: #f5f5f5; border-left: 4px solid #888; padding: 0.5em 1em; }
.bad { background: #fff3e0; border-left: 4px solid #e65100; padding: 0.5em 1em; }
img { max-width: 100%; height: auto; }
.side { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
"""


def _num(x) -> str:
    """A score for display: ``2.0 -> "2"``, ``1.3333 -> "1.33"``; NaN -> ``"—"``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return points_text(x)


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:.1f}%"


def _r(x: float) -> str:
    """A correlation with its sign, ``"0.00"`` when it rounds to zero (never ``"-0.00"``)."""
    if math.isnan(x):
        return "—"
    text = f"{x:+.2f}"
    return "0.00" if text in ("+0.00", "-0.00") else text


def _attr(x: float) -> str:
    """A number for a ``data-`` attribute (full precision; empty when undefined)."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else repr(float(x))


def _unreadable_section(data: AssignmentData) -> list[str]:
    e = html.escape
    n = len(data.unreadable)
    if not n:
        return [f'<p id="unreadable" data-count="0">无法读取的提交：0 份。'
                f"全部 {len(data.submissions)} 份提交都已纳入统计。</p>"]
    items = "".join(f"<li>{e(s)}：{e(r)}</li>" for s, r in sorted(data.unreadable.items()))
    return [f'<div class="bad" id="unreadable" data-count="{n}"><p><strong>无法读取的提交：{n} 份</strong>'
            f'（笔记本文件损坏或未能自动评分），它们不计入本页的任何统计，请单独处理：</p><ul>{items}</ul></div>']


def _cells_table(analysis: Analysis) -> list[str]:
    e = html.escape
    rows = []
    for st in analysis.cells:
        dist = "，".join(f"{_num(v)} 分×{c}" for v, c in st.distribution.items()) or "—"
        rows.append(
            f'<tr data-cell="{e(st.name)}" data-mean="{_attr(st.mean)}" data-full-rate="{_attr(st.full_rate)}" '
            f'data-graded="{st.graded}" data-pending="{st.pending}">'
            f'<td class="label">{e(analysis.data.label(st.name))}</td><td>{_num(st.max_score)}</td>'
            f"<td>{st.graded}</td><td>{st.pending}</td>"
            f"<td>{_num(st.mean)}</td><td>{_pct(st.full_rate)}</td><td>{_r(st.discrimination)}</td>"
            f"<td>{e(dist)}</td></tr>")
    head = (f"<tr><th>{'题目' if analysis.data.items else '练习'}</th><th>满分</th><th>已评分</th>"
            "<th>待人工批改</th><th>平均分</th>"
            "<th>答对率（满分率）</th><th>区分度</th><th>得分分布</th></tr>")
    return [f'<table id="cells">{head}{"".join(rows)}</table>']


def _options_tables(analysis: Analysis) -> list[str]:
    e = html.escape
    out = []
    for st in analysis.options:
        item = st.item
        n = st.answered
        kind = "多选" if item.multi else "单选"
        rows = []
        for letter in item.options:
            is_key = letter in item.key
            r = st.discrimination[letter]
            odd = not math.isnan(r) and ((is_key and r <= 0) or (not is_key and r > 0))
            rows.append(
                f'<tr class="{"key" if is_key else "distractor"}" data-option="{letter}"'
                f' data-count="{st.counts[letter]}" data-discrimination="{_attr(r)}" data-key="{int(is_key)}">'
                f"<td>{letter}{'（正确选项 ✓）' if is_key else '（干扰项）'}</td><td>{st.counts[letter]}</td>"
                f"<td>{_pct(st.counts[letter] / n) if n else '—'}</td>"
                f'<td class="{"warn" if odd else ""}">{_r(r)}{"（需复查）" if odd else ""}</td></tr>')
        rows.append(
            f'<tr data-option="blank" data-count="{st.blank}"><td>未作答</td><td>{st.blank}</td>'
            f"<td>{_pct(st.blank / n) if n else '—'}</td>"
            f'<td rowspan="{3 if st.failed else 2}">{_r(st.blank_invalid_discrimination)}</td></tr>')
        rows.append(
            f'<tr data-option="invalid" data-count="{st.invalid}"><td>无效答案（如 "Z"）</td><td>{st.invalid}</td>'
            f"<td>{_pct(st.invalid / n) if n else '—'}</td></tr>")
        if st.failed:
            rows.append(
                f'<tr data-option="error" data-count="{st.failed}"><td>评分时运行出错</td><td>{st.failed}</td>'
                f"<td>{_pct(st.failed / n) if n else '—'}</td></tr>")
        head = "<tr><th>选项</th><th>选择人数</th><th>选择比例</th><th>区分度</th></tr>"
        out.append(
            f'<h3 id="{e(item.answer_cell)}">第 {item.number} 题（{kind}，{_num(item.points)} 分，'
            f"正确答案 {quiz.format_letters(item.key)}）</h3>"
            f'<table class="options" data-question="{e(item.answer_cell)}" data-disagree="{st.disagree}">'
            f'{head}{"".join(rows)}</table>')
        if st.failed:
            causes = "、".join(f"{ERROR_CAUSES.get(ename, f'出错（{ename}）')} {count} 份"
                              for ename, count in sorted(st.errors.items()))
            out.append(f'<p class="bad" data-question="{e(item.answer_cell)}" data-failed="{st.failed}">'
                       f"有 {st.failed} 份答案在评分时运行出错（{e(causes)}）：笔记本里写的答案没有被评分的内核拿到，"
                       "成绩库按出错计分。它们单列在“评分时运行出错”一行，不算作选了任何选项，"
                       "所以上表正确选项的选择比例与答对率一致。</p>")
        if st.disagree:
            out.append(f'<p class="bad">有 {st.disagree} 份答案按笔记本里的文字读出的结果与成绩库的得分不一致'
                       "（例如答案是用变量或表达式写的，不重新运行就读不出来），它们按读到的结果计入上表，请到成绩库核对。</p>")
    return out


def render_html(analysis: Analysis) -> str:
    """The whole report page (Chinese, self-contained: inline CSS and PNG, no script, no link).

    Numbers are also written into ``data-`` attributes of the table rows, for checks and scripts.
    """
    from attnlib import plots

    e = html.escape
    data = analysis.data
    try:
        plots.setup()
        font_note = ""
    except RuntimeError as exc:
        font_note = f'<p class="bad">注意：{e(str(exc))}</p>'
    n = len(data.submissions)
    totals = np.array([s.total for s in data.submissions], dtype=float)
    is_quiz = bool(data.items)
    parts = [
        "<!DOCTYPE html>", '<html lang="zh-CN"><head><meta charset="utf-8">',
        f"<title>题目分析：{e(data.assignment)}</title><style>{_CSS}</style></head><body>",
        f"<h1>题目分析：{e(data.assignment)}</h1>",
        f"<p>生成时间：{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}。"
        "数据来自 nbgrader 成绩库和自动评分后的笔记本，本页没有重新运行任何代码。</p>",
        font_note,
        f'<p id="class-size" data-count="{n}">纳入统计的提交：<strong>{n}</strong> 份；满分 {_num(data.max_score)} 分；'
        + (f"平均分 {_num(float(totals.mean()))}，中位数 {_num(float(np.median(totals)))}，"
           f"标准差 {_num(float(totals.std()))}。" if n else "没有可统计的提交。") + "</p>",
        *_unreadable_section(data),
    ]
    if not n:
        parts.append("</body></html>")
        return "\n".join(parts)
    parts += [
        "<h2>怎样读这一页</h2>",
        _method_note(is_quiz),
        "<h2>全班总分分布</h2>",
        f'<div class="side"><img id="fig-total" alt="全班总分分布直方图" src="{_figure_total(analysis)}">',
        _histogram_table(analysis), "</div>",
        "<h2>各题（各评分单元）得分</h2>",
        f'<img id="fig-cells" alt="各题答对率与平均得分率" src="{_figure_cells(analysis)}">',
        *_cells_table(analysis),
    ]
    if any(st.pending for st in analysis.cells):
        parts.append('<p class="note">有书面作答还没有人工批改：它们不计入该单元的平均分与答对率，'
                     "在总分里按 nbgrader 的做法记 0 分。批改后重新生成本页即可。</p>")
    if is_quiz:
        parts += ["<h2>选项分析（干扰项分析）</h2>",
                  f'<img id="fig-options" alt="各选项被选人数" src="{_figure_options(analysis.options)}">',
                  "<p>多选题中，一个选项的“选择人数”是答案里包含该选项的人数，所以各行之和可以超过总人数。"
                  "未作答、无效答案不计入任何选项。</p>",
                  *_options_tables(analysis)]
    else:
        parts += ["<h2>各练习的得分分布</h2>",
                  f'<img id="fig-distributions" alt="各练习的得分分布" '
                  f'src="{_figure_distributions(analysis.cells, data)}">',
                  *(["<p>灰色的“待人工批改”一栏是书面作答还没有打分的份数。</p>"]
                    if any(st.pending for st in analysis.cells) else [])]
    parts.append("</body></html>")
    return "\n".join(parts)


def _method_note(is_quiz: bool) -> str:
    """How to read the page: options and distractors only where there are any (a quiz)."""
    if is_quiz:
        return (
            '<div class="note" id="method"><p><strong>区分度的算法：</strong>点二列相关系数（point-biserial）。'
            "对每个选项，把“是否选了它”记为 1 或 0，计算它与该生<strong>其余各题总分</strong>"
            "（总分减去本题得分，避免本题自己抬高相关）之间的皮尔逊相关系数，取值在 −1 到 +1 之间；"
            "各题的区分度同理，用本题得分代替 0/1。没有人选或所有人都选时无法计算，记为“—”。</p>"
            "<p><strong>一句话读法：</strong>好的正确选项区分度为正（总分高的学生更常选它），"
            "好的干扰项区分度为负（总分低的学生更常选它）；正确选项的区分度接近 0 或为负、"
            "或干扰项的区分度为正（表中标“需复查”），说明题目、选项或答案本身可能有问题。</p>"
            "<p>答对率即得到该题满分的比例；多选题有部分得分，所以同时给出平均分。"
            "人数较少（例如不到 30 人）时相关系数波动很大，只作参考。</p></div>")
    return (
        '<div class="note" id="method"><p><strong>区分度的算法：</strong>把每个学生在这道练习上的得分，'
        "与他<strong>其余各练习的总分</strong>（总分减去本练习得分，避免本练习自己抬高相关）求皮尔逊相关系数，"
        "取值在 −1 到 +1 之间；所有人得分相同时无法计算，记为“—”。</p>"
        "<p><strong>一句话读法：</strong>区分度为正，说明总分高的学生在这道练习上也得分高，练习按预期区分了掌握程度；"
        "接近 0 或为负，说明练习的要求、测试或评分标准可能有问题，值得复查。</p>"
        "<p>答对率即得到该练习满分的比例；练习有部分得分，所以同时给出平均分。"
        "人数较少（例如不到 30 人）时相关系数波动很大，只作参考。</p></div>")


def _histogram_table(analysis: Analysis) -> str:
    edges, counts = analysis.edges, analysis.counts
    cells = []
    for i, count in enumerate(counts):
        close = "]" if i == len(counts) - 1 else ")"
        cells.append(f'<tr data-bin-count="{int(count)}"><td>[{_num(edges[i])}, {_num(edges[i + 1])}{close}</td>'
                     f"<td>{int(count)}</td></tr>")
    return f'<table id="histogram"><tr><th>总分区间</th><th>人数</th></tr>{"".join(cells)}</table>'


def write_report(course_dir, assignment: str, out=None, *, db_url: str | None = None) -> tuple[pathlib.Path, Analysis]:
    """Read, analyse and write the page for one assignment.

    Parameters
    ----------
    course_dir : path
        nbgrader course root.
    assignment : str
    out : path, optional
        Default ``<course_dir>/reports/<assignment>-item-analysis.html``.
    db_url : str, optional
        Gradebook URL (default ``sqlite:///<course_dir>/gradebook.db``).

    Returns
    -------
    (pathlib.Path, Analysis)
        Where the page was written, and its numbers.
    """
    course_dir = pathlib.Path(course_dir)
    analysis = analyse(load_assignment(course_dir, assignment, db_url))
    out = pathlib.Path(out) if out else course_dir / "reports" / f"{assignment}-item-analysis.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(analysis), encoding="utf-8")
    return out, analysis
