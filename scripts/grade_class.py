"""Autograde every submission of one assignment in an nbgrader course directory, in parallel.

``make grade-class ASSIGNMENT=ch05-softmax COURSE=DIR`` runs this.  It grades
every ``DIR/submitted/<student>/<assignment>/`` with ``--jobs`` worker
processes (each submission in its own worker course, merged into
``DIR/gradebook.db`` one at a time), shows a progress line, applies the
per-cell timeout of ``nbgrader_config.py`` and a memory limit per notebook,
names every submission it could not grade in one Chinese line, and ends with
the score table and ``grades.csv`` (nbgrader's CSV export).  The autograded
notebooks land in ``DIR/autograded/`` as with ``nbgrader autograde``, ready
for ``nbgrader generate_feedback``.

With ``--sandbox-user nobody`` (as root; ``make grade-class SANDBOX=nobody``)
every student kernel runs as that unprivileged user and cannot see the
class's submissions, gradebook or source notebooks (``grading/sandbox.py``).

Exit status: 0 when the run went through, including when some submissions
could not be graded: each of those is named in a Chinese line, marked 无法评分
in the table and left with an empty score and the status 无法评分 in
``grades.csv`` (so ``make`` does not end with ``Error 1`` as if the command
had crashed).  With ``--strict`` such a run exits 1, for scripts that must
stop there.  2 when nothing was graded (no submissions, or the sandbox cannot
be used).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grade_samples import cell_order, format_table, read_gradebook  # noqa: E402

from attnlib.grading import points_text  # noqa: E402
from grading.class_grading import (  # noqa: E402
    DEFAULT_MEMORY_GB,
    ClassReport,
    grade_class,
    source_labels,
    submitted_students,
)
from grading.course import REPO, SOLUTIONS  # noqa: E402
from grading.sandbox import SandboxError  # noqa: E402

BAR = 30
ROOT_WARNING = ("注意：正在以 root 身份评分，学生的代码也有 root 权限。建议打开沙箱："
                "用 make 时加上 SANDBOX=nobody（make grade-class ASSIGNMENT=… COURSE=… SANDBOX=nobody），"
                "直接运行本脚本时加上 --sandbox-user nobody。")


class Progress:
    """One progress line, redrawn in place on a terminal; one plain line per submission otherwise.

    Parameters
    ----------
    stream : file
        Where to write (``sys.stderr`` by default).
    """

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, done: int, total: int, outcome) -> None:
        state = "" if outcome.graded else "（未评分）"
        note = f"{outcome.student}{state} {outcome.seconds:.1f} s"
        if self.tty:
            filled = BAR * done // max(total, 1)
            bar = "#" * filled + "-" * (BAR - filled)
            self.stream.write(f"\r[{bar}] {done}/{total} {note}\x1b[K")
            if done == total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{done}/{total}] {note}\n")
        self.stream.flush()


def column_labels(assignment: str) -> dict[str, str]:
    """``{grade id: 练习 1 / 第 3 题}`` as the notebook labels its graded cells; a label two cells share names both."""
    labels = source_labels(SOLUTIONS, assignment)
    graded = cell_order(assignment)
    shared = {label for label in labels.values() if sum(labels.get(c) == label for c in graded) > 1}
    return {c: f"{labels[c]}（{c}）" if labels.get(c) in shared else labels.get(c, c) for c in graded}


def summary(report: ClassReport, course: pathlib.Path, jobs: int) -> str:
    """The score table, the problem lines and the timing, as printed at the end."""
    ungraded = report.ungraded
    results = [r for r in read_gradebook(course / "gradebook.db")
               if r.assignment == report.assignment and r.student not in ungraded
               and r.student in {o.student for o in report.outcomes}]
    lines = [format_table(results, {report.assignment: ungraded}, column_labels(report.assignment))]
    problems = report.problem_lines()
    if problems:
        lines += ["", f"需要注意的提交（{len(problems)} 条）："] + [f"  {p}" for p in problems]
    n = len(report.outcomes)
    per = sum(o.seconds for o in report.outcomes) / n if n else 0.0  # each submission's own grading time
    if ungraded:
        lines += ["", f"未能评分的 {len(ungraded)} 份（{'、'.join(ungraded)}）在 CSV 里得分为空、status 为“无法评分”，"
                      "请单独处理；其余提交都已评分。"]
    took = points_text(report.wall_seconds)
    lines += ["", f"{report.assignment}：{n} 份提交，{len(ungraded)} 份未评分；用时 {took} s"
                  f"（{jobs} 个进程并行；每份作业评分平均用时 {per:.2f} s）",
              f"成绩表 CSV：{report.csv_path}"]
    return "\n".join(lines)


def warm_model_cache(assignment: str) -> None:
    """Build part 7's model cache once, as the grader, before any student's kernel starts.

    An assignment whose tests read the real model (``attnlib.pretrained``) finds its float32 weights in the
    environment's cache, which the stamp built; if ``attnlib/pretrained.py`` changed since, each sandboxed kernel
    (which cannot write there) would dequantize the whole file again.  Without the model nothing is built: the
    checks that need it say so in every student's feedback.
    """
    source = SOLUTIONS / assignment / f"{assignment}.ipynb"
    if not source.is_file() or "pretrained" not in source.read_text(encoding="utf-8"):
        return
    from attnlib import pretrained

    try:
        pretrained.load_smollm2()
    except pretrained.ModelNotInstalled as exc:
        print(f"注意：{exc}", file=sys.stderr)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="作业编号，例如 ch05-softmax")
    parser.add_argument("--course", type=pathlib.Path, default=REPO,
                        help="nbgrader 课程目录（含 submitted/），默认是仓库根目录")
    parser.add_argument("--jobs", type=int, default=2, help="并行评分的进程数（默认 2）")
    parser.add_argument("--timeout", type=int, default=None, help="每个单元的时限（秒），默认取 nbgrader_config.py")
    parser.add_argument("--memory-gb", type=float, default=DEFAULT_MEMORY_GB,
                        help=f"每份笔记本内核的内存上限（GB，默认 {DEFAULT_MEMORY_GB:g}；0 表示不限）")
    parser.add_argument("--csv", type=pathlib.Path, default=None, help="成绩表 CSV 的路径，默认 COURSE/grades.csv")
    parser.add_argument("--strict", action="store_true",
                        help="有提交未能评分时以状态 1 结束（默认以 0 结束，未评分的在表里和 CSV 的 status 列标出）")
    parser.add_argument("--student", default="", metavar="ID[,ID…]",
                        help="只评这些学生（逗号分隔的学生编号，例如重新提交的人）；其他学生的成绩不变")
    parser.add_argument("--sandbox-user", default=None, metavar="USER",
                        help="以这个没有权限的系统用户运行学生的内核，看不到班级的其他文件（需要 root，例如 nobody）")
    args = parser.parse_args(argv)
    course = args.course.resolve()
    if not (course / "submitted").is_dir():
        print(f"找不到 {course / 'submitted'}：请用 --course 指向 nbgrader 课程目录。", file=sys.stderr)
        return 2
    chosen = [s for s in re.split(r"[,，、\s]+", args.student) if s] or None
    if chosen:
        have = set(submitted_students(course, args.assignment))
        unknown = [s for s in chosen if s not in have]
        if unknown:
            print(f"{course / 'submitted'} 下没有这些学生的 {args.assignment} 提交：{'、'.join(unknown)}"
                  f"（应为 submitted/<学生>/{args.assignment}/）。", file=sys.stderr)
            return 2
    overrides = {"Execute.timeout": args.timeout} if args.timeout else None
    if args.sandbox_user is None and os.geteuid() == 0:
        print(ROOT_WARNING, file=sys.stderr)
    warm_model_cache(args.assignment)
    try:
        report = grade_class(course, args.assignment, jobs=args.jobs, overrides=overrides, memory_gb=args.memory_gb,
                             csv_path=args.csv, progress=Progress(), sandbox_user=args.sandbox_user,
                             students=chosen)
    except SandboxError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not report.outcomes:
        print(f"{course / 'submitted'} 下没有 {args.assignment} 的提交（应为 submitted/<学生>/{args.assignment}/）。")
        return 2
    print(summary(report, course, args.jobs))
    return 1 if report.ungraded and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
