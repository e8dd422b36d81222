"""A term's people and dates: the class roster, and the late-submission penalty.

* :func:`import_roster` reads the CSV a registrar or learning platform exports
  (one row per student: ``id``, ``name``, ``email``; the headers may also be
  学号, 姓名, 邮箱) into the class gradebook, so ``grades.csv`` carries names
  (``make roster COURSE=课程目录 ROSTER=名单.csv``).  The whole name goes into
  nbgrader's ``last_name`` (a Chinese name is not split into two fields).
* :func:`roster_ids` is who is on it; ``make grade-class`` names every
  submission from an id that is not, in one Chinese line.
* :class:`CourseLatePenalty` is the course's late policy for nbgrader's
  ``AssignLatePenalties``: ``percent_per_day`` of the notebook's score for
  each day or part of a day after the due date (0, the default, is no
  penalty).  The due date is nbgrader's own (``nbgrader db assignment add
  ASSIGNMENT --duedate=…``); a submission's time is its ``timestamp.txt``.
"""

from __future__ import annotations

import csv
import math
import os
import pathlib
import sqlite3
import sys

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

#: Accepted header of each roster column (compared without case and spaces).
HEADERS = {
    "id": ("id", "student_id", "学号", "学生编号"),
    "name": ("name", "姓名", "名字"),
    "email": ("email", "e-mail", "邮箱", "电子邮箱", "电子邮件"),
}
NOT_ON_ROSTER = "学生编号 {student} 不在导入的名单里（make roster）：照常评分，grades.csv 里这一行没有姓名"


class RosterError(ValueError):
    """The roster file cannot be read; the message is Chinese."""


def read_roster(path) -> list[dict]:
    """``[{"id", "name", "email"}]`` of a roster CSV (UTF-8, with or without BOM); raises RosterError."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        columns = {}
        for field in reader.fieldnames or []:
            key = field.strip().lower().replace(" ", "")
            for name, accepted in HEADERS.items():
                if key in accepted:
                    columns[name] = field
        if "id" not in columns:
            raise RosterError(f"{path}：第一行要有学生编号一列（id 或 学号），实际是 {reader.fieldnames}")
        rows = []
        for row in reader:
            student = (row.get(columns["id"]) or "").strip()
            if student:
                rows.append({name: (row.get(field) or "").strip() or None for name, field in columns.items()})
    return rows


def import_roster(course, path) -> int:
    """Add or update every student of the roster ``path`` in ``course/gradebook.db``; return how many."""
    from nbgrader.api import Gradebook

    bin_dir = os.path.dirname(sys.executable)  # a new gradebook runs this environment's ``alembic`` by name
    os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    rows = read_roster(path)
    with Gradebook(f"sqlite:///{pathlib.Path(course).resolve() / 'gradebook.db'}") as gb:
        for row in rows:
            gb.update_or_create_student(row["id"], last_name=row.get("name"), email=row.get("email"))
    return len(rows)


def roster_ids(course) -> set[str]:
    """Students of the class gradebook that came from a roster (they have a name or an email)."""
    db = pathlib.Path(course) / "gradebook.db"
    if not db.exists():
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {row[0] for row in con.execute(
            "SELECT id FROM student WHERE coalesce(last_name, first_name, email) IS NOT NULL")}
    except sqlite3.DatabaseError:
        return set()
    finally:
        con.close()


class CourseLatePenalty(LateSubmissionPlugin):
    """``percent_per_day`` of the score for each started day late (never more than the score)."""

    percent_per_day = Float(0.0, help="Percent of the notebook's score lost per started day late.").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float):
        if self.percent_per_day <= 0 or total_seconds_late <= 0:
            return super().late_submission_penalty(student_id, score, total_seconds_late)
        days = math.ceil(total_seconds_late / 86400)
        return min(score, score * self.percent_per_day * days / 100)
