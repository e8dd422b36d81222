"""Grades of a class for a learning platform: ``make export COURSE=课程目录 FORMAT=canvas|moodle|xlsx``.

Reads the class folder's gradebook (``make roster``, ``make grade-class``) and writes the file each platform imports
(``grading/lms_export.py``): Canvas's gradebook import CSV, Moodle's grade import CSV, or a spreadsheet with
Chinese headers.  Scores are those of ``grades.csv``: after the late penalty, and empty -- never 0 -- for a
submission that could not be graded or was never handed in, with the reason in the note column.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading import lms_export  # noqa: E402
from grading.nbgrader_export import MISSING, PENDING, UNGRADED  # noqa: E402

WHAT = {"canvas": " Canvas 的成绩导入文件（CSV）", "moodle": " Moodle 的成绩导入文件（CSV）",
        "xlsx": "带中文表头的成绩表（Excel .xlsx）"}
HOW = {"canvas": "在 Canvas 的“成绩”（Grades）页面点“导入”（Import），选这个文件；按 SIS User ID 匹配学生，"
                 "同名的作业列导入到那个作业，其余的列新建作业（满分取 Points Possible 那一行）。",
       "moodle": "在 Moodle 的“成绩管理 → 导入 → CSV 文件”里选这个文件（编码 UTF-8，分隔符逗号），用 ID number 或"
                 " Email address 识别学生，再把每个练习列映射到一个成绩项（或新建成绩项）。",
       "xlsx": "第一个工作表“成绩”：学号、姓名、每个练习一列、总分、说明；第二个工作表“满分”是每个练习的满分。"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course", type=pathlib.Path, help="班级的课程目录（成绩库 gradebook.db 在这里）")
    parser.add_argument("--format", required=True, help="canvas、moodle 或 xlsx")
    parser.add_argument("-o", "--out", type=pathlib.Path,
                        help="写到哪个文件（默认是课程目录里的 grades-canvas.csv、grades-moodle.csv 或 grades.xlsx）")
    parser.add_argument("--assignment", help="只导出这些练习（逗号分隔）；默认是成绩库里的全部练习")
    args = parser.parse_args(argv)
    wanted = [a.strip() for a in args.assignment.split(",") if a.strip()] if args.assignment else None
    try:
        path, table = lms_export.export(args.course, args.format, args.out, wanted)
    except lms_export.ExportError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"已写出{WHAT[args.format]}：{path}")
    print(f"{len(table.students)} 名学生，{len(table.assignments)} 个练习：{'、'.join(table.assignments)}。")
    counts = {status: table.count(status) for status in (UNGRADED, MISSING, PENDING)}
    if counts[UNGRADED] or counts[MISSING]:
        print(f"留空（不是 0 分）的格子：{counts[UNGRADED]} 份无法评分，{counts[MISSING]} 份未提交；原因写在说明列里。")
    if counts[PENDING]:
        print(f"注意：{counts[PENDING]} 份提交还在等待人工批改，它们的分数只含自动评分部分"
              "（说明列里写着“待人工批改”）。在 Formgrader 里批改完再导出一次。")
    print(HOW[args.format])
    return 0


if __name__ == "__main__":
    sys.exit(main())
