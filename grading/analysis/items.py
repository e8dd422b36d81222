"""The statistics of the item analysis: correct rates, discrimination, option choices, the score histogram.

Input: an :class:`~grading.analysis.loading.AssignmentData` (quiz choices already in canonical letters);
output: an :class:`Analysis`, everything :mod:`grading.analysis.item_page` shows.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from attnlib import quiz
from grading.analysis.loading import BLANK, ERROR, INVALID, VALID, AssignmentData, QuizItem

__all__ = ["Analysis", "CellStats", "OptionStats", "analyse", "cell_stats", "histogram", "option_stats",
           "point_biserial"]


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


