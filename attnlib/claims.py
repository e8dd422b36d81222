"""Sentences about computed values, each with the condition under which it is true (used by the book's lessons).

A lesson that comments on a number it computes ("the difference is a rounding
error", "key C is the longest") states the condition in the code and lets the
code choose the sentence; the chosen sentence is glued into the page.  When no
sentence (or more than one) is true for the value, the cell fails, and so does
the build::

    layer2 = claims.Sentences(
        (lambda x: x == 0, "第 2 层也完全相同"),
        (lambda x: 0 < x < 1e-5, "第 2 层最多差 {:.0e}，这是舍入误差"),
    )
    glue("ch11_layer2", layer2.pick(diff), display=False)

The sentence is formatted with the value (``str.format``), so its number and
its words come from the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Sentences"]


class Sentences:
    """The sentences a page may say about one value, each paired with a test that makes it true.

    Parameters
    ----------
    *cases : (callable, str)
        ``(test, sentence)`` pairs; ``test(value)`` is true exactly when ``sentence`` is.
        ``sentence`` may hold ``str.format`` fields, filled with the value.
    """

    def __init__(self, *cases: tuple[Callable[[Any], bool], str]):
        if not cases or any(len(case) != 2 or not callable(case[0]) for case in cases):
            raise TypeError("Sentences 需要若干个 (条件, 句子) 对 / expects (test, sentence) pairs")
        self.cases = cases

    def pick(self, value) -> str:
        """The one sentence that is true for ``value``; ``ValueError`` when none or several are."""
        true = [sentence for test, sentence in self.cases if test(value)]
        if len(true) != 1:
            raise ValueError(
                f"对 {value!r} 成立的句子有 {len(true)} 句，应当恰好 1 句：{true} / "
                f"{len(true)} sentences hold for {value!r}, exactly one must"
            )
        return true[0].format(value)
