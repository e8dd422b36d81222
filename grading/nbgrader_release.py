"""A hook that makes nbgrader's student versions of quiz answer cells read naturally.

nbgrader replaces every solution region with one stub per kernel language
(``# YOUR CODE HERE`` / ``raise NotImplementedError()``).  For a quiz answer
cell, whose solution is just ``answer = "B"``, the natural blank is
``answer = ""``: the student fills in the letters, and a blank answer is
already refused (0 points, with a Chinese message) by ``attnlib.quiz``.
``nbgrader_config.py`` puts :class:`AnswerAwareClearSolutions` in place of
``ClearSolutions`` in ``GenerateAssignment.preprocessors``.
"""

from __future__ import annotations

import re

from nbgrader.preprocessors import ClearSolutions

ANSWER_STUB = 'answer = ""'
_SOLUTION = re.compile(r"### BEGIN SOLUTION\n(?P<body>.*?)\n### END SOLUTION", re.S)


def is_answer_solution(source: str) -> bool:
    """True if every solution region of a cell is one line assigning to ``answer``."""
    bodies = [m.group("body").strip() for m in _SOLUTION.finditer(source)]
    return bool(bodies) and all(re.fullmatch(r"answer\s*=[^\n]*", body) for body in bodies)


class AnswerAwareClearSolutions(ClearSolutions):
    """``ClearSolutions`` whose stub for an ``answer = ...`` solution is ``answer = ""``."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code" or not is_answer_solution(cell.source):
            return super().preprocess_cell(cell, resources, cell_index)
        stubs = self.code_stub
        self.code_stub = {**stubs, resources["language"]: ANSWER_STUB}
        try:
            return super().preprocess_cell(cell, resources, cell_index)
        finally:
            self.code_stub = stubs


def release_preprocessors(defaults: list) -> list:
    """nbgrader's generate_assignment steps with ``ClearSolutions`` swapped for ours."""
    return [AnswerAwareClearSolutions if step is ClearSolutions else step for step in defaults]
