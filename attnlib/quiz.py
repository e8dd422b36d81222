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

from attnlib.grading import Score, points_text

__all__ = [
    "InvalidAnswer", "MISSING", "check_format", "format_letters", "grade", "parse_answer",
    "render_feedback", "score", "take_answer",
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
          number=None) -> float:
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

    Returns
    -------
    float
        In ``[0, points]``.
    """
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
