"""Answer parsing, scoring and feedback for the autograded multiple-choice quizzes.

A quiz question is one nbgrader *autograded answer* cell where the student
writes ``answer = "B"`` (or ``"AB"`` for a multi-select question), followed by
a test cell.  The test cell's visible part checks only the *format* of the
answer; its hidden part (``### BEGIN HIDDEN TESTS``) calls :func:`grade` with
the key and the explanation of every option.  The key therefore exists only in
the instructor's source notebook, never in this module or a released notebook.

:func:`grade` prints the feedback (in Chinese) to stdout and returns the score
as a plain ``float``; the test cell ends with that call, so nbgrader reads the
returned number as the cell's partial credit.

Scoring rule
------------
* Single choice: all or nothing.
* Multi-select: every option is judged on its own.  With ``R`` right options,
  ``c`` of them picked and ``w`` wrong options picked, the score is
  ``points * max(0, c - w) / R``, exact (shown to 2 decimals; a sum of
  rounded parts would read 9.66 where 9.67 is meant).  Picking every option
  therefore earns nothing when half of them are wrong.
* An answer that is not a set of valid option letters earns 0, with a message
  naming what was wrong.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from attnlib import variants
from attnlib.grading import Score, points_text

__all__ = [
    "InvalidAnswer", "MISSING", "Question", "Variant", "announce", "check_format", "format_letters", "grade",
    "parse_answer", "render_feedback", "score", "take_answer",
]

#: Characters that may separate or follow option letters: spaces, ASCII and Chinese commas, semicolons, full stops
#: (``"B."`` as an option is printed, ``"A. B."``).
SEPARATORS = re.compile(r"[\s,，、;；.。]+")


class InvalidAnswer(ValueError):
    """An answer that cannot be read as a set of option letters (message in Chinese)."""


class _Missing:
    """Marker for 'the answer cell did not define ``answer``'."""

    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


def take_answer(namespace: dict, name: str = "answer"):
    """Remove ``name`` from ``namespace`` and return its value (:data:`MISSING` when absent).

    The test cell of every question calls this on ``globals()``.  Removing the
    variable means that an answer cell which fails to run (for example one that
    still holds the ``raise NotImplementedError()`` stub) cannot be graded with
    the previous question's answer.
    """
    return namespace.pop(name, MISSING)


def announce(assignment: str) -> None:
    """Print the one Chinese line saying whose option order this quiz shows.

    The setup cell of every quiz calls it, so a student (and the feedback page) can see which
    variant the letters refer to: the current student (:func:`attnlib.variants.student_id`), or
    the canonical order when there is none (``make lab`` with no class).
    """
    student = variants.student_id()
    if student is None:
        line = f"{assignment}：没有设定学生，显示的是标准顺序的选项（自己用 make lab 做题时就是这样）。"
    else:
        line = f"{assignment}：显示的是学生 {student} 的选项顺序，请按你看到的字母作答。"
    print(line)  # printed, not returned: the setup cell shows no Out[] value


def _letters_of(text: str) -> list[str]:
    """The option letters of one string, normalised (NFKC, upper case), in order."""
    text = unicodedata.normalize("NFKC", text).strip()
    letters = []
    for chunk in SEPARATORS.split(text):
        letters.extend(chunk.upper())
    return letters


def parse_answer(answer, options: str = "ABCD") -> frozenset[str]:
    """Read a student's answer as a set of option letters.

    Parameters
    ----------
    answer : str or list/tuple/set/frozenset of str
        ``"B"``, ``"ab"``, ``"A, B"``, ``"Ａ，Ｂ"`` (full width), ``["A", "B"]``, ``{"a", "b"}`` ...
        Case, spaces, ASCII/Chinese commas, ``、``, semicolons and full stops (``"B."``) are ignored;
        full-width letters count as their ASCII twins.
    options : str
        The valid letters, e.g. ``"ABCD"``.

    Returns
    -------
    frozenset of str
        The chosen letters, upper case.

    Raises
    ------
    InvalidAnswer
        Empty answer, a value that is not a string (or a collection of
        strings), a character that is not one of ``options``, or a letter
        given twice.  The message (Chinese) names the problem.
    """
    if answer is MISSING:
        raise InvalidAnswer(
            "没有找到变量 answer：请在上面的答案单元格里写一行 answer = \"…\""
            "（引号里是你选的字母，格式见测验开头的示例）并运行它"
            "（如果单元格里还留着 raise NotImplementedError()，请删掉那一行）。")
    if isinstance(answer, str):
        letters = _letters_of(answer)
    elif isinstance(answer, (list, tuple, set, frozenset)):
        letters = []
        for item in answer:
            if not isinstance(item, str):
                raise InvalidAnswer(
                    f"answer 里的元素 {item!r} 不是字符串（类型为 {type(item).__name__}）；"
                    "请写成 [\"A\", \"B\"] 或直接写 \"AB\"。")
            letters.extend(_letters_of(item))
    else:
        raise InvalidAnswer(
            f"answer 的类型是 {type(answer).__name__}，不是字符串；请把选项字母写在引号里（格式见测验开头的示例）。")
    if not letters:
        raise InvalidAnswer("answer 是空的：你还没有选择任何选项。")
    bad = sorted({ch for ch in letters if ch not in options}, key=letters.index)
    if bad:
        shown = "、".join(repr(ch) for ch in bad)
        raise InvalidAnswer(f"answer 里有无效的字符 {shown}；本题只能从 {format_letters(options)} 中选择。")
    repeated = sorted({ch for ch in letters if letters.count(ch) > 1})
    if repeated:
        raise InvalidAnswer(f"选项 {format_letters(repeated)} 写了不止一次；每个选项最多写一次。")
    return frozenset(letters)


def format_letters(letters) -> str:
    """Letters in alphabetical order as one string (``{"B", "A"} -> "AB"``); ``"（空）"`` if none."""
    text = "".join(sorted(letters))
    return text if text else "（空）"


def score(picked, key, *, multi: bool, points: float = 1.0) -> float:
    """Points earned by the set ``picked`` against the set ``key`` (see the module's scoring rule).

    Parameters
    ----------
    picked, key : iterable of str
        Chosen and right option letters (already parsed).
    multi : bool
        Multi-select (partial credit) or single choice (all or nothing).
    points : float > 0
        Points of the question.

    Returns
    -------
    float
        Between 0 and ``points``, not rounded (totals add up exactly); a plain
        Python float, so that nbgrader can read its ``repr`` as partial credit.
    """
    picked, key = frozenset(picked), frozenset(key)
    if not key:
        raise ValueError("key 不能为空 (empty key)")
    if points <= 0:
        raise ValueError(f"points 必须为正数，收到 {points!r}")
    if not multi:
        return float(points) if picked == key else 0.0
    right, wrong = len(picked & key), len(picked - key)
    return float(points * max(0, right - wrong) / len(key))


def check_format(answer, options: str = "ABCD", *, multi: bool = False) -> float | None:
    """The visible check of a quiz question: can ``answer`` be read?  Says nothing about right or wrong.

    Prints one Chinese line (stdout) and never raises, so the hidden part of
    the test cell always runs.

    Returns
    -------
    None or float
        ``None`` when the answer is readable (in a released notebook the test
        cell then shows no value and ``nbgrader validate`` counts it as
        passed); ``Score(0.0)`` when it is missing or invalid, so that ``validate``
        reports the question as not yet answered.  In the instructor's test
        cell the hidden :func:`grade` call comes last, so this value never
        becomes the grade.
    """
    try:
        picked = parse_answer(answer, options)
    except InvalidAnswer as exc:
        print(f"格式检查未通过：{exc}")
        return Score(0.0)
    if not multi and len(picked) != 1:
        print(f"格式检查未通过：这是单选题，你选了 {len(picked)} 个选项（{format_letters(picked)}），评分时会记 0 分。")
        return Score(0.0)
    print(f"格式检查通过：读到的答案是 {format_letters(picked)}。（对错要到评分后才知道。）")
    return None


def render_feedback(*, number, answer_text: str, problem: str | None, key, explanations: Mapping[str, str],
                    multi: bool, earned: float, points: float) -> str:
    """The Chinese feedback text of one question.

    Parameters
    ----------
    number : int or str
        The question's number as shown to the student.
    answer_text : str
        The student's answer as read (or a description when it was invalid).
    problem : str or None
        Why the answer could not be read, if it could not.
    key : iterable of str
        The right letters.
    explanations : mapping letter -> str
        Why each option is right or wrong, in option order.
    multi : bool
        Multi-select question (shown in the heading).
    earned, points : float
        The score and the maximum.
    """
    key = frozenset(key)
    kind = "多选题" if multi else "单选题"
    if problem is not None:
        verdict = "答案无效"
    elif earned >= points:
        verdict = "正确"
    elif earned > 0:
        verdict = "部分正确"
    else:
        verdict = "错误"
    lines = [
        f"第 {number} 题（{kind}，{points_text(points)} 分）：{verdict}，得 {points_text(earned)} 分",
        f"  你的答案：{answer_text}",
    ]
    if problem is not None:
        lines.append(f"  问题：{problem}")
    lines.append(f"  正确答案：{format_letters(key)}")
    lines.append("  逐项解析：")
    for letter, text in explanations.items():
        mark = "✓ 正确选项" if letter in key else "✗ 错误选项"
        lines.append(f"    {letter}（{mark}）{text}")
    return "\n".join(lines)


def grade(answer, *, key: str, explanations: Mapping[str, str], multi: bool = False, points: float = 1.0,
          number=None, question: Question | None = None) -> float:
    """Score one quiz question, print its feedback, and return the score.

    Called in the hidden part of a question's test cell, as the cell's last
    expression, so that nbgrader takes the returned number as partial credit.

    Parameters
    ----------
    answer : object
        What the student assigned to ``answer`` (:func:`take_answer`).
    key : str
        The right letters, e.g. ``"B"`` or ``"ABD"``.
    explanations : mapping letter -> str
        One explanation per option, in option order; its keys are the valid letters.
    multi : bool
        Multi-select (partial credit) or single choice (all or nothing).
    points : float
        Must equal the ``points`` of the nbgrader test cell.
    number : int or str, optional
        The question's number in the feedback.
    question : Question, optional
        A question with per-student variants: ``key`` and ``explanations`` are
        then canonical (the instructor's letters, explanations may hold
        ``{name}`` placeholders of the variant's values), the student's answer
        is read in the letters they saw, and the feedback speaks in those
        letters.  ``number``, ``multi`` and ``points`` must agree with it.

    Returns
    -------
    float
        In ``[0, points]``.
    """
    if question is not None:
        return question.grade(answer, key=key, explanations=explanations, multi=multi, points=points, number=number)
    options = "".join(explanations)
    key_set = parse_answer(key, options)
    if not multi and len(key_set) != 1:
        raise ValueError(f"单选题的 key 必须恰好一个字母，收到 {key!r}")
    problem = None
    try:
        picked = parse_answer(answer, options)
    except InvalidAnswer as exc:
        problem, earned = str(exc), 0.0
        answer_text = "（未作答）" if answer is MISSING else _short_repr(answer)
    else:
        answer_text = format_letters(picked)
        if not multi and len(picked) != 1:
            problem = f"这是单选题，你选了 {len(picked)} 个选项，按规则记 0 分。"
        earned = score(picked, key_set, multi=multi, points=points)
    print(render_feedback(number=number if number is not None else "?", answer_text=answer_text, problem=problem,
                          key=key_set, explanations=explanations, multi=multi, earned=earned, points=points))
    return Score(earned)  # nbgrader reads the number; the notebook shows only the feedback above


def _short_repr(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (an invalid answer can be anything)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a student's object may have a broken __repr__
        text = f"<{type(value).__name__} 对象>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fill(text: str, values: Mapping) -> str:
    """``text`` with its ``{name}`` placeholders filled; unchanged when the question has no numbers.

    A question with numbers writes a literal brace twice (``{{``), as ``str.format`` does; one without
    numbers keeps its text (LaTeX braces included) as written.
    """
    return text.format(**values) if values else text


class Variant:
    """What one student sees of one :class:`Question`.

    Attributes
    ----------
    student : str or None
        None for the canonical variant.
    order : tuple of int
        ``order[i]`` is the canonical index of the option shown at position ``i``.
    values : dict
        The variant's numbers (drawn parameters and what ``derive`` computed from them).
    """

    def __init__(self, student, order, values):
        self.student, self.order, self.values = student, tuple(order), dict(values)

    def shown(self, canonical_letters) -> str:
        """Canonical letters -> the letters this student saw."""
        return variants.canonical_to_shown(canonical_letters, self.order)

    def canonical(self, shown_letters) -> str:
        """Letters this student saw -> canonical letters."""
        return variants.shown_to_canonical(shown_letters, self.order)

    def record(self, assignment: str, number) -> dict:
        """The record kept in the displayed output's metadata (``attnlib_variant``)."""
        return {"assignment": assignment, "question": number, "student": self.student, "order": list(self.order),
                "values": {k: v for k, v in self.values.items() if isinstance(v, (int, float, str, bool))}}


class Question:
    """A quiz question whose option order, and optionally whose numbers, depend on the student.

    The released notebook defines each question in a locked cell and shows it
    (``Q3 = quiz.Question(...); Q3.show()``); the hidden test grades with the
    same object (``quiz.grade(_answer, question=Q3, key="C", explanations={...})``),
    the key and explanations written once, in canonical letters.  The student
    comes from :func:`attnlib.variants.student_id`.

    Parameters
    ----------
    assignment : str
        The assignment id (part of what fixes the variant).
    number : int
        The question's number (the same in every variant).
    options : list of str
        The options in canonical order (Markdown; may hold ``{name}`` placeholders).
    stem : str, optional
        Question text shown above the options (Markdown, placeholders allowed);
        empty when the notebook's Markdown cell above already states it.
    multi : bool
        Multi-select (partial credit) or single choice.
    points : float
        The question's points.
    params : mapping name -> list, optional
        Allowed values of each number; the canonical variant takes the first.
    derive : callable, optional
        ``derive(values) -> dict`` of further values computed from the drawn
        ones (e.g. the number each option shows).  It must not compute which
        option is right: that is the hidden test's business.
    params_from : mapping question number -> (mapping name -> list), optional
        Parameters drawn as that question of the same assignment draws them
        (``params_from={6: {...}}`` with question 6's own lists), so a question
        that goes on about an earlier one's numbers shows each student the
        numbers they saw there.  ``derive`` receives them with ``params``.
    """

    def __init__(self, assignment: str, number: int, *, options, stem: str = "", multi: bool = False,
                 points: float = 1.0, params: Mapping | None = None, derive=None,
                 params_from: Mapping | None = None):
        if len(options) < 2:
            raise ValueError("一道选择题至少要有两个选项")
        self.assignment, self.number, self.options = assignment, number, list(options)
        self.stem, self.multi, self.points = stem, multi, points
        self.params, self.derive = dict(params or {}), derive
        self.params_from = {other: dict(lists) for other, lists in (params_from or {}).items()}
        self.letters = variants.LETTERS[: len(self.options)]

    def variant(self, student=variants.student_id) -> Variant:
        """The variant of ``student`` (default: the current student, :func:`attnlib.variants.student_id`)."""
        if callable(student):
            student = student()
        values = {}
        for other, lists in self.params_from.items():  # the earlier question's draw: its number fixes the values
            values.update(variants.draw(student, self.assignment, other, lists))
        values.update(variants.draw(student, self.assignment, self.number, self.params))
        if self.derive is not None:
            values.update(self.derive(dict(values)))
        return Variant(student, variants.order(student, self.assignment, self.number, len(self.options)), values)

    def markdown(self, variant: Variant | None = None) -> str:
        """The question as this student sees it: stem and options, lettered in the shown order."""
        variant = variant or self.variant()
        lines = [_fill(self.stem, variant.values), ""] if self.stem else []
        for position, canonical in enumerate(variant.order):
            text = _fill(self.options[canonical], variant.values)
            lines.append(f"- **{self.letters[position]}.** {text}")
        return "\n".join(lines)

    def show(self):
        """Display the question (Markdown in a notebook, plain text elsewhere), recording the variant shown."""
        variant = self.variant()
        text = self.markdown(variant)
        try:
            from IPython.display import Markdown, display
        except ImportError:  # pragma: no cover - plain Python without IPython
            print(text)
            return
        display(Markdown(text), metadata={"attnlib_variant": variant.record(self.assignment, self.number)})

    def check(self, answer) -> float | None:
        """The visible format check (letters valid for this question); see :func:`check_format`."""
        return check_format(answer, self.letters, multi=self.multi)

    def grade(self, answer, *, key: str, explanations: Mapping[str, str], multi=None, points=None,
              number=None) -> float:
        """Score the answer of the current student against the canonical ``key``; print feedback in their letters."""
        for name, given, own in (("multi", multi, self.multi), ("points", points, self.points),
                                 ("number", number, self.number)):
            if given is not None and given != own:
                raise ValueError(f"grade 的 {name}={given!r} 与题目定义的 {own!r} 不一致")
        if "".join(explanations) != self.letters:
            raise ValueError(f"explanations 必须按 {self.letters} 的顺序给出每个选项的解析")
        variant = self.variant()
        shown_key = variant.shown(key)
        shown_explanations = {
            self.letters[position]: _fill(explanations[self.letters[canonical]], variant.values)
            for position, canonical in enumerate(variant.order)}
        return grade(answer, key=shown_key, explanations=shown_explanations, multi=self.multi, points=self.points,
                     number=self.number)
