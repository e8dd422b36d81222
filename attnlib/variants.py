"""Per-student variants of a question: which student, which option order, which numbers.

A variant is a pure function of ``(student, assignment, question)``: the same
three strings always give the same option order and the same numbers, on any
machine, in any process (SHA-256, not Python's salted ``hash``).  No student
(``None``) means the canonical variant: options in their written order and the
first value of every parameter, which is what a reader working alone in
``make lab`` sees.

Where the student comes from, first match wins:

1. :func:`pin` -- the grader writes the submitting student into each hidden
   test before it runs, so nothing a student types in an answer cell changes
   the key they are graded against;
2. ``ATTNLIB_STUDENT`` -- set by the autograder for the kernel of each
   submission (and by anyone who wants to see a given student's variant);
3. ``JUPYTERHUB_USER`` -- set by JupyterHub in every student's server, and the
   name nbgrader's exchange records as the submitting student;
4. none: the canonical variant.

Canonical letters are the letters of the instructor's source (``key="B"``,
``explanations={"A": ...}``); shown letters are the ones a student sees.
Item analysis, feedback and the key all go through :func:`shown_to_canonical`
and :func:`canonical_to_shown`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence

__all__ = [
    "ENV_STUDENT", "canonical_to_shown", "draw", "order", "pin", "pinned", "shown_to_canonical", "student_id",
    "unit_float",
]

#: Environment variable holding the student whose variant a kernel shows.
ENV_STUDENT = "ATTNLIB_STUDENT"

LETTERS = "ABCDEFGH"

_pinned: list[str | None] = []


def pin(student: str | None) -> None:
    """Fix the student for the rest of this kernel (called by the grader inside hidden tests).

    ``pin(None)`` removes a pin (tests use it).
    """
    _pinned[:] = [] if student is None else [str(student)]


def pinned() -> str | None:
    """The pinned student, or None."""
    return _pinned[0] if _pinned else None


def student_id() -> str | None:
    """The student whose variant this process shows (see the module docstring); None is canonical."""
    for value in (pinned(), os.environ.get(ENV_STUDENT), os.environ.get("JUPYTERHUB_USER")):
        if value:
            return value
    return None


def _digest(student: str, assignment: str, question, salt: str) -> bytes:
    text = "\x1f".join((salt, str(assignment), str(question), str(student)))
    return hashlib.sha256(text.encode("utf-8")).digest()


def unit_float(student: str | None, assignment: str, question, salt: str = "") -> float:
    """A number in [0, 1) fixed by the four strings (0.0 for the canonical variant)."""
    if student is None:
        return 0.0
    return int.from_bytes(_digest(student, assignment, question, salt)[:8], "big") / 2**64


def order(student: str | None, assignment: str, question, n_options: int) -> tuple[int, ...]:
    """The option order a student sees: ``order[i]`` is the canonical index of the option shown at position ``i``.

    The identity for the canonical variant.  Otherwise a Fisher-Yates shuffle
    driven by SHA-256 of (student, assignment, question), so every order is
    reachable and each student's order is independent of the others'.
    """
    if n_options < 1 or n_options > len(LETTERS):
        raise ValueError(f"n_options 必须在 1 到 {len(LETTERS)} 之间，收到 {n_options!r}")
    perm = list(range(n_options))
    if student is None:
        return tuple(perm)
    for i in range(n_options - 1, 0, -1):
        j = int(unit_float(student, assignment, question, f"order{i}") * (i + 1))
        perm[i], perm[j] = perm[j], perm[i]
    return tuple(perm)


def shown_to_canonical(letters, perm: Sequence[int]) -> str:
    """Translate letters a student saw into canonical letters (sorted, as :func:`attnlib.quiz.format_letters`)."""
    return "".join(sorted(LETTERS[perm[LETTERS.index(ch)]] for ch in letters))


def canonical_to_shown(letters, perm: Sequence[int]) -> str:
    """Translate canonical letters into the letters this student saw (sorted)."""
    shown_of = {canonical: position for position, canonical in enumerate(perm)}
    return "".join(sorted(LETTERS[shown_of[LETTERS.index(ch)]] for ch in letters))


def draw(student: str | None, assignment: str, question, params: Mapping[str, Sequence]) -> dict:
    """One value per parameter, each from its list of allowed values.

    The canonical variant takes the first value of every list, so the
    instructor's written question is the canonical one.
    """
    chosen = {}
    for name, values in params.items():
        values = list(values)
        if not values:
            raise ValueError(f"参数 {name!r} 没有可选的取值")
        index = int(unit_float(student, assignment, question, f"param:{name}") * len(values))
        chosen[name] = values[index]
    return chosen
