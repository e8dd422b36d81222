"""Print one student's variant of a quiz and its key, in their letters: ``make variant ASSIGNMENT=A STUDENT=S``.

For a regrade request: every question as the student saw it (options in their
order and letters, their numbers) and the right letters and explanations as
their feedback gives them, read from the instructor's source
(``solutions/<assignment>/``: the hidden ``quiz.grade(...)`` calls).  Without a
student, the canonical variant (what ``make lab`` shows with no class).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.course import SOLUTIONS, assignments  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="测验编号，例如 quiz-sdpa")
    parser.add_argument("student", nargs="?", default="", help="学生编号（JupyterHub 用户名）；省略时为标准顺序")
    parser.add_argument("--source", type=pathlib.Path, default=SOLUTIONS, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    import nbformat

    from grading.variants import NotAQuiz, student_sheet

    folder = args.source / args.assignment
    notebooks = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if not notebooks:
        known = "、".join(assignments(args.source)) if args.source.is_dir() else "（无）"
        print(f"错误：没有名为 {args.assignment} 的作业（{folder} 里没有笔记本）。已有的作业：{known}", file=sys.stderr)
        return 2
    try:
        for path in notebooks:
            print(student_sheet(nbformat.read(path, as_version=4), args.assignment, args.student or None), end="")
    except NotAQuiz as exc:
        print(f"错误：{exc}。", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
