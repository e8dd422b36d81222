"""``grades.csv`` that never turns a submission it could not grade into a number.

nbgrader's CSV export (``nbgrader export``) writes 0.0 both for a blank
notebook that earned nothing and for a submission that could not be graded at
all (a file that is not valid JSON, another assignment's notebook) or was
never handed in.  Uploaded to a learning platform, the last two would silently
become zeros.  :class:`CourseCsvExport` writes the same columns plus
``status`` (and ``total_seconds_late``, how late the submission was; the
penalty is ``late_submission_penalty``), leaves the score cells empty unless the submission was graded,
and sorts the rows by assignment and student:

=================  ======================================================
``status``         meaning
=================  ======================================================
已评分              autograded; the score is final
待人工批改          autograded, a written answer still to be graded by hand:
                   the score is provisional (the automatic part only)
无法评分            handed in, but no autograded notebook exists: score empty
未提交              nothing handed in: score empty
=================  ======================================================

A graded submission whose notebook showed another student's variant (or the
canonical one) than its submitter's is graded against the submitter's key, and
its status says so after the status above: ``已评分；题目版本不符：笔记本显示的是
alice 的版本，已按本人的版本评分`` (``grading/variants.py`` keeps that fact beside
the autograded notebook).

Without ``--to`` the file is ``grades.csv`` in the course directory
(``CourseDirectory.root``), not in the folder the command was typed in.

A submission counts as graded when ``autograded/<student>/<assignment>/``
holds every notebook of the assignment.  The course's ``nbgrader_config.py``
makes ``nbgrader export`` use it; ``make grade-class`` writes its
``grades.csv`` with it too.
"""

from __future__ import annotations

import csv
import pathlib

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin
from traitlets import List, Unicode

from grading import variants

COLUMNS = ["assignment", "duedate", "timestamp", "total_seconds_late", "student_id", "last_name", "first_name", "email",
           "raw_score", "late_submission_penalty", "score", "max_score", "status"]
GRADED, PENDING, UNGRADED, MISSING = "已评分", "待人工批改", "无法评分", "未提交"


class CourseCsvExport(CsvExportPlugin):
    """nbgrader's CSV export with a ``status`` column and no score for what was not graded."""

    course_root = Unicode("", help="The course directory (default: the export app's CourseDirectory.root).").tag(
        config=True)
    ungraded = List(Unicode(), help="'assignment/student' pairs known to be ungraded whatever the folders say.")

    def _root(self) -> pathlib.Path:
        if self.course_root:
            return pathlib.Path(self.course_root)
        coursedir = getattr(self.parent, "coursedir", None)
        return pathlib.Path(coursedir.root if coursedir is not None else ".")

    def rows(self, gradebook: Gradebook) -> list[dict]:
        """One dict per (assignment, student), sorted, with the ``status`` of each."""
        root, rows = self._root(), []
        students = [str(s) for s in self.student]
        for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
            if self.assignment and assignment.name not in [str(a) for a in self.assignment]:
                continue
            notebooks = [nb.name for nb in assignment.notebooks]
            for student in sorted(gradebook.students, key=lambda s: s.id):
                if students and student.id not in students:
                    continue
                row = {"assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
                       "last_name": student.last_name, "first_name": student.first_name, "email": student.email,
                       "max_score": assignment.max_score, "timestamp": "", "total_seconds_late": "", "raw_score": "",
                       "late_submission_penalty": "", "score": ""}
                autograded = root / "autograded" / student.id / assignment.name
                graded = (f"{assignment.name}/{student.id}" not in self.ungraded
                          and all((autograded / f"{name}.ipynb").is_file() for name in notebooks))
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    submission = None
                if submission is not None and graded:
                    penalty = submission.late_submission_penalty or 0.0
                    row.update(timestamp=submission.timestamp, total_seconds_late=submission.total_seconds_late,
                               raw_score=submission.score,
                               late_submission_penalty=penalty, score=max(0.0, submission.score - penalty),
                               status=_with_variant_note(PENDING if submission.needs_manual_grade else GRADED,
                                                         autograded))
                elif submission is not None or (root / "submitted" / student.id / assignment.name).is_dir():
                    row.update(timestamp=submission.timestamp if submission is not None else "", status=UNGRADED)
                else:
                    row["status"] = MISSING
                rows.append({k: "" if v is None else str(v) for k, v in row.items()})
        return rows

    def export(self, gradebook: Gradebook) -> None:
        # into the course directory, wherever the command is typed (``--to`` still names any file)
        dest = self.to or str(self._root() / "grades.csv")
        self.log.info("Exporting grades to %s", dest)
        rows = self.rows(gradebook)
        with open(dest, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, COLUMNS)
            writer.writeheader()
            writer.writerows(rows)


def _with_variant_note(status: str, autograded: pathlib.Path) -> str:
    """``status``, followed by the variant mismatch recorded for the submission, if any."""
    facts = variants.read_facts(autograded)
    return f"{status}；{variants.status_note(facts)}" if facts else status
