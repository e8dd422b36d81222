"""Grades from a class's gradebook into the files learning platforms import (``make export``).

One table is read from the class folder -- every student of the gradebook (the roster of ``make roster`` and anyone
who handed something in) by every assignment of it -- with the statuses and scores of ``grades.csv``
(:class:`grading.nbgrader_export.CourseCsvExport`, whose rows this module reuses): the score after the late
penalty the gradebook holds, nothing for a submission that could not be graded or was never handed in.  Then it is
written in one of three formats:

``canvas``
    Canvas's gradebook import CSV: ``Student, ID, SIS User ID, SIS Login ID, Section``, a ``Notes`` column, one
    column per assignment titled by the assignment's id, and a ``Points Possible`` row under the header with each
    assignment's points.  Canvas matches a row by ``ID`` (its own user id, unknown here: left empty), then ``SIS User
    ID``, then ``SIS Login ID``: both carry the gradebook's student id (学号).  A column whose title is an existing
    assignment's is imported into it; another makes a new assignment worth its Points Possible.  An empty cell is no
    score (Canvas lists every change for review before it imports).  ``Notes`` goes into Canvas's Notes column
    when the gradebook shows one (View → Notes); otherwise the ``(read only)`` in its Points Possible cell makes
    Canvas leave it alone (its importer drops read-only columns when it has found every row's student).
``moodle``
    Moodle's grade import CSV ("Import → CSV file"): ``ID number``, ``Email address``, ``Full name``, one column
    per assignment (map each to a grade item, or to a new one), ``Notes`` (map it to an item's feedback, or ignore
    it).  Moodle matches rows on the email or the ID number, as the import page is told.  An empty cell is no grade.
``xlsx``
    A spreadsheet with Chinese headers for platforms that import one: sheet ``成绩`` with 学号, 姓名, one column
    per assignment, 总分 (the sum of the scores it has: a number, not a formula, since an importer reads stored
    values) and 说明; sheet ``满分`` with each assignment's points and due date.

Every format is UTF-8 (the CSVs with a byte-order mark, so that Excel shows Chinese); names with Chinese
characters and commas come back as written (CSV quoting).  The note of a student lists, per assignment, what is not
a plain final score: 无法评分, 未提交, 待人工批改 (the score is the automatic part only), a late penalty, a quiz
variant mismatch.  Scores in the CSVs have two decimals (what Canvas shows and compares); the spreadsheet keeps
full precision.
"""

from __future__ import annotations

import csv
import pathlib
from dataclasses import dataclass, field

from grading.nbgrader_export import MISSING, PENDING, UNGRADED, CourseCsvExport

FORMATS = ("canvas", "moodle", "xlsx")
#: Where each format goes in the class folder unless told otherwise.
DEFAULT_NAMES = {"canvas": "grades-canvas.csv", "moodle": "grades-moodle.csv", "xlsx": "grades.xlsx"}
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_NOTES = "Notes"
POINTS_POSSIBLE = "    Points Possible"
MOODLE_COLUMNS = ["ID number", "Email address", "Full name"]
MOODLE_NOTES = "Notes"
XLSX_ID, XLSX_NAME, XLSX_TOTAL, XLSX_NOTES = "学号", "姓名", "总分", "说明"
PENDING_NOTE = "待人工批改（分数只含自动评分部分）"


class ExportError(ValueError):
    """The export cannot be made; the message is Chinese."""


@dataclass
class Cell:
    """One student's result in one assignment."""

    score: float | None
    status: str
    penalty: float = 0.0
    seconds_late: float = 0.0

    def note(self) -> str:
        """What the note column says about this cell ("" for a plain final score)."""
        if self.status == MISSING:
            return MISSING
        if self.status == UNGRADED:
            return UNGRADED
        parts = []
        base, _, extra = self.status.partition("；")
        if base == PENDING:
            parts.append(PENDING_NOTE)
        if self.penalty > 0:
            parts.append(f"迟交 {self.seconds_late / 3600:.1f} 小时，扣 {self.penalty:.2f} 分")
        if extra:
            parts.append(extra)
        return "，".join(parts)


@dataclass
class Student:
    id: str
    name: str
    email: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def note(self, assignments: list[str]) -> str:
        said = [(a, self.cells[a].note()) for a in assignments]
        return "；".join(f"{a}：{text}" for a, text in said if text)

    def total(self, assignments: list[str]) -> float | None:
        scores = [self.cells[a].score for a in assignments if self.cells[a].score is not None]
        return sum(scores) if scores else None


@dataclass
class Table:
    """Every student by every assignment of a class, in the gradebook's order (assignments and students by id)."""

    assignments: list[str]
    points: dict[str, float]
    duedates: dict[str, str]
    students: list[Student]

    def count(self, status: str) -> int:
        return sum(1 for s in self.students for c in s.cells.values() if c.status.partition("；")[0] == status)


class _Loaded:
    """The few parts of nbgrader's ``Gradebook`` that ``CourseCsvExport.rows`` asks for, read in bulk.

    ``rows`` looks every (assignment, student) pair up with ``find_submission``, and nbgrader computes each
    submission's score, penalty and "needs manual grade" in a query of its own over the whole ``grade`` table:
    minutes for a class of hundreds.  Here each of them is one grouped query over the class, with nbgrader's own
    column expressions (``Grade.score``: the manual score if any, else the automatic one, plus extra credit), and the
    submissions are served from a dictionary.
    """

    def __init__(self, db):
        from nbgrader.api import Assignment, Grade, Student, SubmittedAssignment, SubmittedNotebook
        from sqlalchemy import func, select
        from sqlalchemy.orm import selectinload, undefer

        self.assignments = db.query(Assignment).options(selectinload(Assignment.notebooks),
                                                        undefer(Assignment.max_score)).all()
        self.students = db.query(Student).all()
        graded = dict(db.execute(
            select(SubmittedNotebook.assignment_id, func.coalesce(func.sum(Grade.score), 0.0))
            .join(Grade, Grade.notebook_id == SubmittedNotebook.id).group_by(SubmittedNotebook.assignment_id)).all())
        pending = {row[0] for row in db.execute(
            select(SubmittedNotebook.assignment_id).join(Grade, Grade.notebook_id == SubmittedNotebook.id)
            .where(Grade.needs_manual_grade).distinct())}
        penalties = dict(db.execute(
            select(SubmittedNotebook.assignment_id, func.coalesce(func.sum(SubmittedNotebook.late_submission_penalty),
                                                                  0.0))
            .group_by(SubmittedNotebook.assignment_id)).all())
        self._submissions = {}
        rows = db.execute(select(SubmittedAssignment.id, SubmittedAssignment.student_id, SubmittedAssignment.timestamp,
                                 SubmittedAssignment.extension, Assignment.name, Assignment.duedate)
                          .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id))
        for sid, student, timestamp, extension, name, duedate in rows:
            # nbgrader's SubmittedAssignment.total_seconds_late, with its due date moved by the student's extension
            due = duedate + extension if duedate is not None and extension is not None else duedate
            late = 0.0 if timestamp is None or due is None else max(0.0, (timestamp - due).total_seconds())
            self._submissions[name, student] = _Submission(timestamp, late, graded.get(sid, 0.0),
                                                           penalties.get(sid, 0.0), sid in pending)

    def find_submission(self, assignment: str, student: str):
        from nbgrader.api import MissingEntry

        try:
            return self._submissions[assignment, student]
        except KeyError:
            raise MissingEntry() from None


@dataclass
class _Submission:
    """What ``CourseCsvExport.rows`` reads of a submission (nbgrader's ``SubmittedAssignment`` attributes)."""

    timestamp: object
    total_seconds_late: float
    score: float
    late_submission_penalty: float
    needs_manual_grade: bool


def _number(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def read_class(course, assignments: list[str] | None = None) -> Table:
    """The class's table (raises ExportError in Chinese when there is no gradebook or an unknown assignment)."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    course = pathlib.Path(course).resolve()
    db = course / "gradebook.db"
    if not db.is_file():
        raise ExportError(f"{course} 里没有成绩库 gradebook.db：先导入名单（make roster）或评分（make grade-class）。")
    exporter = CourseCsvExport(course_root=str(course))
    # read only: nbgrader's Gradebook() would add a course row of its own to a class's gradebook
    engine = create_engine(f"sqlite:///file:{db}?mode=ro&uri=true")
    with Session(engine) as session:
        loaded = _Loaded(session)
        known = sorted(a.name for a in loaded.assignments)
        wanted = known if not assignments else list(dict.fromkeys(assignments))
        unknown = [a for a in wanted if a not in known]
        if unknown:
            raise ExportError(f"成绩库里没有这些练习：{'、'.join(unknown)}。有的是：{'、'.join(known) or '（没有）'}。")
        if not wanted:
            raise ExportError(f"{db} 里还没有任何练习：先评分（make grade-class）。")
        exporter.assignment = wanted
        rows = exporter.rows(loaded)
    engine.dispose()
    students: dict[str, Student] = {}
    points: dict[str, float] = {}
    duedates: dict[str, str] = {}
    for row in rows:
        name = " ".join(part for part in (row["first_name"], row["last_name"]) if part)
        student = students.setdefault(row["student_id"], Student(row["student_id"], name, row["email"]))
        points[row["assignment"]] = float(row["max_score"] or 0)
        duedates[row["assignment"]] = row["duedate"]
        student.cells[row["assignment"]] = Cell(
            score=_number(row["score"]), status=row["status"], penalty=_number(row["late_submission_penalty"]) or 0.0,
            seconds_late=_number(row["total_seconds_late"]) or 0.0)
    return Table(wanted, points, duedates, sorted(students.values(), key=lambda s: s.id))


def _two(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def write_canvas(table: Table, path) -> None:
    """Canvas's gradebook import CSV (module docstring)."""
    with open(path, "w", newline="", encoding="utf-8-sig") as fh:
        out = csv.writer(fh)
        out.writerow([*CANVAS_COLUMNS, CANVAS_NOTES, *table.assignments])
        out.writerow([POINTS_POSSIBLE, "", "", "", "", "(read only)",
                      *(_two(table.points[a]) for a in table.assignments)])
        for s in table.students:
            out.writerow([s.name, "", s.id, s.id, "", s.note(table.assignments),
                          *(_two(s.cells[a].score) for a in table.assignments)])


def write_moodle(table: Table, path) -> None:
    """Moodle's grade import CSV (module docstring)."""
    with open(path, "w", newline="", encoding="utf-8-sig") as fh:
        out = csv.writer(fh)
        out.writerow([*MOODLE_COLUMNS, *table.assignments, MOODLE_NOTES])
        for s in table.students:
            out.writerow([s.id, s.email, s.name, *(_two(s.cells[a].score) for a in table.assignments),
                          s.note(table.assignments)])


def write_xlsx(table: Table, path) -> None:
    """The spreadsheet with Chinese headers (module docstring)."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    sheet = book.active
    sheet.title = "成绩"
    sheet.append([XLSX_ID, XLSX_NAME, *table.assignments, XLSX_TOTAL, XLSX_NOTES])
    for s in table.students:
        sheet.append([s.id, s.name, *(s.cells[a].score for a in table.assignments), s.total(table.assignments),
                      s.note(table.assignments)])
    first, last = 3, 3 + len(table.assignments)  # the score columns, 1-based, the total included
    for row in sheet.iter_rows(min_row=2, min_col=first, max_col=last):
        for cell in row:
            cell.number_format = "0.00"
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    sheet.freeze_panes = "C2"
    points = book.create_sheet("满分")
    points.append(["练习", "满分", "截止时间（UTC）"])
    for a in table.assignments:
        points.append([a, table.points[a], table.duedates[a]])
    points.append([XLSX_TOTAL, sum(table.points.values()), ""])
    book.save(path)


WRITERS = {"canvas": write_canvas, "moodle": write_moodle, "xlsx": write_xlsx}


def export(course, fmt: str, out=None, assignments: list[str] | None = None) -> tuple[pathlib.Path, Table]:
    """Write ``course``'s grades in format ``fmt`` to ``out`` (default: :data:`DEFAULT_NAMES` in the class folder)."""
    if fmt not in FORMATS:
        raise ExportError(f"不认识的格式 {fmt!r}：可以是 {'、'.join(FORMATS)}。")
    table = read_class(course, assignments)
    path = pathlib.Path(out) if out else pathlib.Path(course).resolve() / DEFAULT_NAMES[fmt]
    path.parent.mkdir(parents=True, exist_ok=True)
    WRITERS[fmt](table, path)
    return path, table
