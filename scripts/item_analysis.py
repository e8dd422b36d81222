"""Item analysis of one graded assignment: an offline HTML page for the instructor (Chinese).

Usage::

    scripts/item_analysis.py COURSE_DIR ASSIGNMENT [-o OUT.html]

Reads ``COURSE_DIR/gradebook.db`` and ``COURSE_DIR/autograded/*/ASSIGNMENT/``
as nbgrader left them after ``nbgrader autograde`` (nothing is run again) and
writes one self-contained page: correct rate and mean of every graded cell,
option choices and their discrimination for quiz questions, score
distributions of exercises and the class's total-score histogram.  Default
output: ``COURSE_DIR/reports/ASSIGNMENT-item-analysis.html``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.analysis.item_page import write_report  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course_dir", type=pathlib.Path, help="nbgrader 课程目录（含 gradebook.db 与 autograded/）")
    parser.add_argument("assignment", help="作业编号，例如 quiz-sdpa 或 ch05-softmax")
    parser.add_argument("-o", "--out", type=pathlib.Path, default=None,
                        help="输出的 HTML 文件（默认 COURSE_DIR/reports/ASSIGNMENT-item-analysis.html）")
    parser.add_argument("--db", default=None, help="成绩库 URL（默认 sqlite:///COURSE_DIR/gradebook.db）")
    args = parser.parse_args(argv)
    try:
        out, analysis = write_report(args.course_dir, args.assignment, args.out, db_url=args.db)
    except (FileNotFoundError, KeyError) as exc:
        print(f"错误：{exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    data = analysis.data
    print(f"{args.assignment}：{len(data.submissions)} 份提交纳入统计，{len(data.unreadable)} 份无法读取。")
    for student, reason in sorted(data.unreadable.items()):
        print(f"  无法读取：{student}（{reason}）")
    print(f"题目分析页面：{out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
