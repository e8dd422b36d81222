"""Hooks that make nbgrader's feedback safe to hand out and readable offline.

``nbgrader_config.py`` wires them in:

* :class:`HideTestTracebacks` runs after nbgrader's ``ClearHiddenTests`` in
  ``GenerateFeedback.preprocessors``: a traceback printed by a test cell quotes
  the cell's source lines (hidden ones too), so test cells keep only
  ``ErrorName: message``.
* :class:`GetGradesAndPending` replaces nbgrader's ``GetGrades`` there: it also
  marks the cells still waiting for a human grader, so the page says 待人工批改
  instead of showing their provisional 0 as a score, and gives nbgrader's
  automatic comment ("No response.") in Chinese.
* :func:`offline_mathjax` is a Jinja filter used by
  ``grading/templates/feedback_offline/mathjax.html.j2``: it inlines the MathJax
  bundle of the ``sphinx-mathjax-offline`` package instead of nbconvert's CDN
  script tag.
"""

from __future__ import annotations

import importlib.util
import pathlib

from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import GetGrades
from traitlets import default

TEMPLATES = pathlib.Path(__file__).parent / "templates"
TEMPLATE_NAME = "feedback_offline"


def is_test_cell(cell) -> bool:
    """An nbgrader autograder test cell: graded, not a solution, code."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


class HideTestTracebacks(Preprocessor):
    """Shorten every error output of a test cell to ``ErrorName: message``."""

    @default("enabled")
    def _enabled_default(self):  # nbconvert preprocessors are off unless enabled
        return True

    def preprocess_cell(self, cell, resources, index):
        if is_test_cell(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


# nbgrader's automatic comments (saveautogrades.py), as the student reads them.
AUTO_COMMENTS = {"No response.": "未作答：这个答案单元和发下来的版本一模一样。"}


class GetGradesAndPending(GetGrades):
    """nbgrader's ``GetGrades``, plus ``metadata.nbgrader.pending`` on each graded cell.

    nbgrader's own automatic comments are replaced by their Chinese text;
    comments a grader typed are kept as they are.
    """

    def _get_comment(self, cell, resources) -> None:
        super()._get_comment(cell, resources)
        comment = cell.metadata.nbgrader.get("comment")
        cell.metadata.nbgrader["comment"] = AUTO_COMMENTS.get(comment, comment)

    def _get_score(self, cell, resources) -> None:
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(
            cell.metadata["nbgrader"]["grade_id"], self.notebook_id, self.assignment_id, self.student_id)
        cell.metadata.nbgrader["pending"] = bool(grade.needs_manual_grade)


def mathjax_bundle(name: str = "tex-svg.js") -> pathlib.Path | None:
    """Path of a MathJax 3 bundle shipped by ``sphinx-mathjax-offline``, or None."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        path = pathlib.Path(root) / "static" / "mathjax" / name
        if path.is_file():
            return path
    return None


def offline_mathjax(name: str) -> str:
    """A ``<script>`` element holding the MathJax bundle ``name`` inline (empty if not installed)."""
    path = mathjax_bundle(name)
    if path is None:
        return "<!-- MathJax not installed: math stays as TeX source -->"
    source = path.read_text(encoding="utf-8").replace("</script", "<\\/script")
    return f"<script>\n{source}\n</script>"
