"""Manual marks and comments that survive a re-grade, unless the answer they were given for changed.

nbgrader's ``SaveAutoGrades`` flags every cell that has a manual score for
review again at each ``autograde``: after one student's resubmission and a
re-grade of the class, every written answer reads 待人工批改 again, and the
resubmitter's old mark silently stands for the new text.  The course keeps,
for every answer a submission was graded with, a fingerprint of its text
(table ``course_answer`` in the gradebook, beside nbgrader's own tables):

* the answer did not change since the last grade: the manual score, extra
  credit and comment stay and the cell stays 已评分 (``needs_manual_grade``
  False);
* it changed: the cell is flagged for marking again, its manual score and
  extra credit are cleared (they were for the old text), and the manual
  comment becomes a note for the grader naming the previous mark and comment
  (:data:`PREVIOUS`), which the Formgrader shows in the comment box;
* nothing was recorded (a gradebook graded before this table existed): nbgrader's
  behaviour, the mark kept and flagged for review.

A test cell's (or task's) fingerprint is that of all answer cells of its
notebook together: an instructor's override of an automatic score stands as
long as the code it judged is the same.  ``SaveAutoGradesKeepingMarks`` does
this for ``nbgrader autograde`` (and the Formgrader's and the Hub's Autograde,
which read the course's ``nbgrader_config.py``); ``make grade-class`` merges
each worker's result through :func:`reconcile` too.
"""

from __future__ import annotations

import hashlib

from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades
from sqlalchemy import text

TABLE = "course_answer"
#: The note a changed answer's comment becomes (the Formgrader shows it to the grader).
PREVIOUS = "（学生重新提交后这个回答改过了，请重新批改。上次的得分：{score}；上次的评语：{comment}）"
#: One line for the instructor per changed answer that had a mark.
CHANGED = "{cell}的回答改过了：上次人工给的 {score} 分不再计入，等待重新批改"
NOTEBOOK_KEY = "*"  # fingerprint of all answer cells of a notebook (what a test cell judges)

CREATE = (f"CREATE TABLE IF NOT EXISTS {TABLE} (assignment TEXT NOT NULL, student TEXT NOT NULL, "
           "notebook TEXT NOT NULL, cell TEXT NOT NULL, fingerprint TEXT NOT NULL, "
           "PRIMARY KEY (assignment, student, notebook, cell))")


def _digest(*sources: str) -> str:
    return hashlib.sha256("\x00".join(s.rstrip() for s in sources).encode("utf-8")).hexdigest()


def fingerprints(nb) -> dict[str, str]:
    """``{answer cell grade id: fingerprint of its text}`` plus :data:`NOTEBOOK_KEY` for all of them together."""
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if utils.is_solution(c)}
    return {**{name: _digest(source) for name, source in answers.items()},
            NOTEBOOK_KEY: _digest(*(answers[name] for name in sorted(answers)))}


def stored(gb: Gradebook, assignment: str, student: str, notebook: str) -> dict[str, str]:
    """The fingerprints recorded when this submitted notebook was last graded (empty if none)."""
    gb.db.execute(text(CREATE))
    rows = gb.db.execute(text(f"SELECT cell, fingerprint FROM {TABLE} WHERE assignment = :a AND student = :s "
                              "AND notebook = :n"), {"a": assignment, "s": student, "n": notebook})
    return dict(rows.fetchall())


def _store(gb: Gradebook, assignment: str, student: str, notebook: str, prints: dict[str, str]) -> None:
    key = {"a": assignment, "s": student, "n": notebook}
    gb.db.execute(text(f"DELETE FROM {TABLE} WHERE assignment = :a AND student = :s AND notebook = :n"), key)
    for cell, value in prints.items():
        gb.db.execute(text(f"INSERT INTO {TABLE} VALUES (:a, :s, :n, :c, :f)"), {**key, "c": cell, "f": value})


def _points(grade) -> str:
    from attnlib.grading import points_text

    extra = f"（另有额外加分 {points_text(grade.extra_credit)}）" if grade.extra_credit else ""
    return f"{points_text(grade.manual_score)} / {points_text(grade.max_score)}{extra}"


def reconcile(gb: Gradebook, assignment: str, student: str, notebook: str, prints: dict[str, str],
              labels: dict | None = None) -> list[str]:
    """Keep or re-open the manual marks of one submitted notebook after its automatic grades were saved.

    Parameters
    ----------
    gb : Gradebook
        The gradebook holding the submission (its automatic scores already written).
    assignment, student, notebook : str
    prints : dict
        :func:`fingerprints` of the notebook just graded.
    labels : dict, optional
        ``{grade id: label}`` to name cells in the returned lines (练习 1 …).

    Returns
    -------
    list of str
        One Chinese line per answer whose mark was re-opened because its text changed.
    """
    before = stored(gb, assignment, student, notebook)
    submitted = gb.find_submission_notebook(notebook, assignment, student)
    lines, notes = [], {}

    def changed(name: str):  # True / False, or None when nothing was recorded
        key = name if name in prints else NOTEBOOK_KEY
        return None if key not in before else before[key] != prints.get(key)

    for grade in submitted.grades:
        if grade.manual_score is None and grade.extra_credit is None:
            continue
        state = changed(grade.cell.name)
        if state is False:
            grade.needs_manual_grade = grade.auto_score is None and grade.manual_score is None
        elif state:
            if grade.manual_score is not None:
                notes[grade.cell.name] = _points(grade)
                label = (labels or {}).get(grade.cell.name)
                cell = f"{label}（{grade.cell.name}）" if label and label != grade.cell.name else grade.cell.name
                lines.append(CHANGED.format(cell=cell, score=_points(grade)))
            grade.manual_score, grade.extra_credit, grade.needs_manual_grade = None, None, True
    for comment in submitted.comments:
        name = comment.cell.name
        if comment.manual_comment and changed(name) and name in prints and not comment.manual_comment.startswith(
                PREVIOUS[:8]):
            comment.manual_comment = PREVIOUS.format(score=notes.get(name, "没有打分"),
                                                     comment=comment.manual_comment)
    _store(gb, assignment, student, notebook, prints)
    gb.db.commit()
    return lines


class SaveAutoGradesKeepingMarks(SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades``, then :func:`reconcile`: unchanged answers keep their marks, 已评分."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        from grading.nbgrader_validate import cell_labels

        with Gradebook(self.db_url) as gb:
            for line in reconcile(gb, self.assignment_id, self.student_id, self.notebook_id, fingerprints(nb),
                                  cell_labels(nb)):
                self.log.warning("%s：%s", self.student_id, line)
        return nb, resources
