"""The course's ``nbgrader autograde`` steps: nbgrader's own, three of them replaced.

* ``Execute`` -> ``kernel_limits.LimitedExecute`` (a memory cap; a dead or
  hung kernel costs one cell);
* ``SaveAutoGrades`` -> ``manual_marks.SaveAutoGradesKeepingMarks`` (manual
  marks survive a re-grade unless the answer changed);
* ``OverwriteCells`` -> :class:`QuietOverwriteCells`: nbgrader puts every
  read-only cell back as the gradebook holds it, and says "Attribute
  'checksum' for cell test_… has changed!" for each test cell of every honest
  submission, because the student's copy lacks the hidden tests the gradebook
  has.  That reads like tampering; this says nothing when the cell is exactly
  the released one, and one Chinese line when the student did change it.

and two added (``grading/variants.py``): each submission is graded against its
own student's variant -- ``RecordShownVariant`` first among the sanitizing steps
(whose variant the submitted outputs showed), ``PinStudent`` before ``Execute``
(the submitter pinned in every hidden test, a shown mismatch reported), and the
``Execute`` step's kernel started with ``ATTNLIB_STUDENT`` set to the submitter.

``nbgrader_config.py`` and ``make grade-class`` (``class_grading.nbgrader_config``)
both use :func:`autograde_steps`.
"""

from __future__ import annotations

from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, Execute, OverwriteCells, SaveAutoGrades

from grading import variants

#: What the grading log says when a student changed a read-only cell (it is put back before grading).
CHANGED_LOCKED = "%s：只读单元 %s 被改动过，评分时已换回发下去的原样"


def released_source(source: str) -> str:
    """A source cell's text as the student version has it: the hidden tests removed."""
    from nbformat import v4

    cell = v4.new_code_cell(source)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    return cell.source


def _same_text(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


class QuietOverwriteCells(OverwriteCells):
    """nbgrader's ``OverwriteCells``, silent about read-only cells the student left as released."""

    def preprocess_cell(self, cell, resources, cell_index):
        self._released = self._as_released(cell)
        return super().preprocess_cell(cell, resources, cell_index)

    def _as_released(self, cell) -> bool:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None:
            return False
        try:
            source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:
            return False
        return _same_text(cell.source, released_source(source.source))

    def report_change(self, name, attr, old, new):
        if attr != "checksum":
            super().report_change(name, attr, old, new)
        elif not self._released:
            self.log.warning(CHANGED_LOCKED, self.resources_student, name)

    def preprocess(self, nb, resources):
        self.resources_student = resources.get("nbgrader", {}).get("student", "")
        return super().preprocess(nb, resources)


def autograde_steps(execute) -> list:
    """nbgrader's autograde preprocessors with ``execute`` for ``Execute``, the replacements and additions above."""
    from nbgrader.converters import Autograde

    from grading.manual_marks import SaveAutoGradesKeepingMarks

    swap = {Execute: variants.student_kernel(execute), SaveAutoGrades: SaveAutoGradesKeepingMarks}
    steps = [swap.get(step, step) for step in Autograde.class_traits()["autograde_preprocessors"].default()]
    return [variants.PinStudent, *steps]


def sanitize_steps() -> list:
    """nbgrader's sanitizing preprocessors (run before execution) with :class:`QuietOverwriteCells`.

    :class:`grading.variants.RecordShownVariant` comes first: it reads the outputs ``ClearOutput`` removes.
    """
    from nbgrader.converters import Autograde

    return [variants.RecordShownVariant, *(QuietOverwriteCells if step is OverwriteCells else step
                                          for step in Autograde.class_traits()["sanitize_preprocessors"].default())]
