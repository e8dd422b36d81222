"""A class folder with a gradebook made up on the spot, for the grade export's tests and its bench.

Autograding a whole class takes minutes; the export only reads what grading left behind.  :func:`build` writes
that directly: nbgrader's own gradebook (``gradebook.db``, through nbgrader's API and its ORM tables, bulk
inserted), the class's ``nbgrader_config.py`` (``grading.course.class_folder``, with a late penalty), the
``autograded/`` notebooks that mark a submission as graded, and ``submitted/`` folders for the ones that could
not be graded.  Late penalties are not written by hand: nbgrader's ``AssignLatePenalties`` computes them with the
course's :class:`grading.term.CourseLatePenalty`, as ``nbgrader autograde`` does.

Each submission is a :class:`Hand`: who, which assignment, the fraction of each cell's points it earned, how many
hours after the due date it came, and its state (``graded``; ``pending``: its written answer still to be marked
by hand; ``ungraded``: handed in, but no autograded notebook -- a broken file).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import pathlib
import sys
import uuid
from dataclasses import dataclass

from grading import course as course_module

COURSE_ID = "attention-zh"
DUE = datetime.datetime(2026, 3, 15, 15, 59)  # nbgrader keeps due dates and timestamps in UTC, naive
#: nbgrader's step logs each late submission as a warning; here nobody is grading, so nothing is said
_QUIET = logging.getLogger("grading.synthetic_gradebook")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
EMPTY_NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@dataclass(frozen=True)
class Hand:
    """One handed-in assignment."""

    student: str
    assignment: str
    fraction: float = 1.0
    late_hours: float = 0.0
    state: str = "graded"  # "graded", "pending" or "ungraded"


def _id() -> str:
    return uuid.uuid4().hex


def build(root, *, roster: list[dict], assignments: dict[str, list[float]], hands: list[Hand],
          percent_per_day: float = 10.0, due: datetime.datetime = DUE) -> pathlib.Path:
    """Write the class folder ``root``; return it.

    Parameters
    ----------
    roster : list of dict
        ``{"id", "name", "email"}`` per student, as ``make roster`` imports them (the name in ``last_name``).
    assignments : dict
        Assignment id -> the points of each of its graded cells (one notebook named like the assignment; the
        last cell is a written answer, the others code).
    hands : list of Hand
        Every submission.
    percent_per_day : float
        The class's late penalty (``c.CourseLatePenalty.percent_per_day`` in its ``nbgrader_config.py``).
    """
    from nbgrader.api import (
        Assignment,
        Grade,
        Gradebook,
        GradeCell,
        Notebook,
        Student,
        SubmittedAssignment,
        SubmittedNotebook,
    )
    from sqlalchemy import insert

    root = pathlib.Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    course_module.class_folder(root)
    config = root / course_module.CLASS_CONFIG
    config.write_text(config.read_text(encoding="utf-8")
                      + f"c.CourseLatePenalty.percent_per_day = {percent_per_day!r}\n", encoding="utf-8")
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    bin_dir = os.path.dirname(sys.executable)  # a new gradebook runs this environment's ``alembic`` by name
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    cells: dict[str, list] = {}
    late: list[Hand] = []
    with Gradebook(db_url, course_id=COURSE_ID) as gb:
        # one transaction for the whole structure (nbgrader's update_or_create_* commit each row: slow for hundreds)
        for name, points in assignments.items():
            assignment = Assignment(name=name, duedate=due, course_id=COURSE_ID)
            notebook = Notebook(name=name, assignment=assignment)
            gb.db.add_all([assignment, notebook])
            cells[name] = []
            for i, value in enumerate(points):
                written = i == len(points) - 1
                cell = GradeCell(name=f"{'written' if written else 'test'}_{i + 1}", notebook=notebook,
                                 max_score=value, cell_type="markdown" if written else "code")
                gb.db.add(cell)
                cells[name].append((cell, value, written))
        known = {}
        for person in roster:
            known[person["id"]] = Student(id=person["id"], last_name=person.get("name"), email=person.get("email"))
        for hand in hands:
            known.setdefault(hand.student, Student(id=hand.student))
        gb.db.add_all(known.values())
        gb.db.flush()
        assignment_ids = {name: c[0][0].notebook.assignment.id for name, c in cells.items()}
        notebook_ids = {name: c[0][0].notebook.id for name, c in cells.items()}
        cells = {name: [(cell.id, value, written) for cell, value, written in c] for name, c in cells.items()}
        submitted, notebooks, grades = [], [], []
        for hand in hands:
            folder = root / "submitted" / hand.student / hand.assignment
            folder.mkdir(parents=True, exist_ok=True)
            when = due + datetime.timedelta(hours=hand.late_hours) if hand.late_hours else due - datetime.timedelta(
                hours=1)
            (folder / "timestamp.txt").write_text(f"{when.isoformat(sep=' ')}+00:00", encoding="utf-8")
            if hand.state == "ungraded":
                (folder / f"{hand.assignment}.ipynb").write_text('{"cells": [', encoding="utf-8")
                continue
            (folder / f"{hand.assignment}.ipynb").write_text(json.dumps(EMPTY_NOTEBOOK), encoding="utf-8")
            graded = root / "autograded" / hand.student / hand.assignment
            graded.mkdir(parents=True, exist_ok=True)
            (graded / f"{hand.assignment}.ipynb").write_text(json.dumps(EMPTY_NOTEBOOK), encoding="utf-8")
            sa, sn = _id(), _id()
            submitted.append({"id": sa, "assignment_id": assignment_ids[hand.assignment], "student_id": hand.student,
                              "timestamp": when})
            notebooks.append({"id": sn, "assignment_id": sa, "notebook_id": notebook_ids[hand.assignment],
                              "flagged": False})
            for cell, value, written in cells[hand.assignment]:
                waiting = written and hand.state == "pending"
                grades.append({"id": _id(), "notebook_id": sn, "cell_id": cell,
                               "auto_score": None if waiting else round(value * hand.fraction, 6),
                               "manual_score": None, "extra_credit": None, "needs_manual_grade": waiting})
            if hand.late_hours > 0:
                late.append(hand)
        for table, rows in ((SubmittedAssignment, submitted), (SubmittedNotebook, notebooks), (Grade, grades)):
            if rows:
                gb.db.execute(insert(table.__table__), rows)
        gb.db.commit()
    for hand in late:
        _penalise(db_url, hand, percent_per_day)
    return root


def _penalise(db_url: str, hand: Hand, percent_per_day: float) -> None:
    """nbgrader's own late-penalty step, with the course's plugin, on one submission (as ``autograde`` runs it)."""
    from nbformat import from_dict
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config import Config

    from grading.term import CourseLatePenalty

    step = AssignLatePenalties(plugin_class=CourseLatePenalty, log=_QUIET,
                               config=Config({"CourseLatePenalty": {"percent_per_day": percent_per_day}}))
    resources = {"nbgrader": {"notebook": hand.assignment, "assignment": hand.assignment, "student": hand.student,
                              "db_url": db_url}}
    step.preprocess(from_dict(EMPTY_NOTEBOOK), resources)
