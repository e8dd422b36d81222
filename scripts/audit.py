"""Mutation analysis of an assignment's tests: ``make audit ASSIGNMENT=ch16-gqa [BUDGET=40] [OUT=page.html]``.

Every reference answer of ``solutions/<assignment>/`` is mutated one small step
at a time and each mutant is graded with the visible tests and with all of
them (``grading/audit.py`` says how and why).  Prints a Chinese table per
answer cell and the mutants to deal with, writes the page
``_build/audit/<assignment>.html`` (or ``OUT``), and exits with status 1 when a
mutant survives undeclared or a point-breaking one is not capped and visibly
caught (so CI can use it), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading import audit  # noqa: E402
from grading.course import SOLUTIONS, assignments  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="作业编号，例如 ch16-gqa")
    parser.add_argument("--budget", type=int, default=None,
                        help="最多评多少个变异体（按答案单元和算子均匀抽取，结果可重复）；默认全部")
    parser.add_argument("-o", "--out", type=pathlib.Path, default=None,
                        help="页面写到哪里；默认 _build/audit/<作业>.html")
    parser.add_argument("--timeout", type=float, default=None, help="变异之后每个单元最多运行几秒")
    args = parser.parse_args(argv)
    if args.assignment not in assignments(SOLUTIONS):
        print(f"错误：没有名为 {args.assignment} 的作业。已有的作业：{'、'.join(assignments(SOLUTIONS))}",
              file=sys.stderr)
        return 2
    if args.budget is not None and args.budget < 1:
        print(f"错误：BUDGET 必须是正整数，收到 {args.budget}", file=sys.stderr)
        return 2

    def progress(done: int, total: int) -> None:
        if sys.stdout.isatty():
            print(f"\r已评 {done}/{total} 个变异体", end="" if done < total else "\n", flush=True)

    report = audit.audit(args.assignment, budget=args.budget, timeout=args.timeout, progress=progress)
    out = args.out or audit.OUT / f"{args.assignment}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(audit.page(report), encoding="utf-8")
    print(audit.summary(report), end="")
    print(f"逐个变异体的页面：{out}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
