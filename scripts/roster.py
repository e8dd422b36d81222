"""Import a class roster (id, name, email) into a class folder's gradebook: ``make roster COURSE=DIR ROSTER=FILE``.

The CSV is what a registrar or learning platform exports: a header row naming
the columns ``id``, ``name``, ``email`` (or 学号, 姓名, 邮箱), one student per
row, UTF-8.  Students already in the gradebook are updated; nobody is removed.
``grades.csv`` then carries each student's name and email, and ``make
grade-class`` names every submission from an id that is not on the roster.
The class folder gets its ``nbgrader_config.py`` too (``grading.course.class_folder``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.course import class_folder  # noqa: E402
from grading.term import RosterError, import_roster  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course", type=pathlib.Path, help="班级的课程目录（成绩库 gradebook.db 在这里）")
    parser.add_argument("roster", type=pathlib.Path, help="名单 CSV：id（学号）、name（姓名）、email（邮箱）三列")
    args = parser.parse_args(argv)
    if not args.roster.is_file():
        print(f"找不到名单文件 {args.roster}", file=sys.stderr)
        return 2
    args.course.mkdir(parents=True, exist_ok=True)
    class_folder(args.course)  # the class's nbgrader_config.py, where its late penalty goes
    try:
        count = import_roster(args.course, args.roster)
    except RosterError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"已导入 {count} 名学生到 {args.course.resolve() / 'gradebook.db'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
