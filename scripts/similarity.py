"""Similarity of the submissions of one assignment: an offline HTML page and a CSV for the instructor (Chinese).

Usage::

    scripts/similarity.py COURSE_DIR ASSIGNMENT [-o OUT.html]

Reads the notebooks of ``COURSE_DIR/autograded/*/ASSIGNMENT/`` (else
``submitted/``) as they are, runs nothing, and writes the pairs of submissions
ranked by how alike their answer cells are (code and written answers
separately, the released stub left out), each of the first pairs side by side
with the shared fragments marked, and for a quiz with per-student option orders
the pairs whose letters were copied.  Default output:
``COURSE_DIR/reports/ASSIGNMENT-similarity.html`` and ``.csv`` next to it
(columns student_a, student_b, cell, score).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.analysis.similarity_page import write_report  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course_dir", type=pathlib.Path, help="班级目录（含 submitted/ 或 autograded/）")
    parser.add_argument("assignment", help="作业编号，例如 ch05-softmax 或 quiz-sdpa")
    parser.add_argument("-o", "--out", type=pathlib.Path, default=None,
                        help="输出的 HTML 文件（默认 COURSE_DIR/reports/ASSIGNMENT-similarity.html；CSV 在它旁边）")
    args = parser.parse_args(argv)
    try:
        page, table, sim = write_report(args.course_dir, args.assignment, args.out)
    except FileNotFoundError as exc:
        print(f"错误：{exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    answers = sim.answers
    print(f"{args.assignment}：比较了 {len(answers.answers)} 份提交，{len(answers.unreadable)} 份无法读取。")
    for student, reason in sorted(answers.unreadable.items()):
        print(f"  无法读取：{student}（{reason}）")
    for label, pairs in (("代码", sim.code), ("书面作答", sim.written)):
        if pairs:
            top = pairs[0]
            print(f"{label}最相似的一对：{top.a} 与 {top.b}（{100 * top.score:.1f}%）")
    copied = [p for p in sim.letters if p.copied]
    if copied:
        top = copied[0]
        print(f"选项字母照抄：{len(copied)} 对，最多的一对 {top.a} 与 {top.b}（{len(top.copied)} 题）")
    print(f"相似度页面：{page}")
    print(f"相似度表格：{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
