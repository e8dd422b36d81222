"""``make audit``: the mutation analysis of an assignment's tests (``grading/audit.py``).

Three parts:

* the operators, on small cells: each kind of mutation is made where it should
  be and nowhere else (only between the solution markers, never in a string, a
  ``raise`` message or a docstring), ids and order are stable;
* the classification, on a tiny synthetic notebook whose mutants are known to
  be caught visibly, caught only by hidden checks, survive, be declared
  equivalent, break the exercise's point, never end;
* every chapter assignment, audited on a small deterministic sample of its
  mutants (:data:`BUDGET`, spread across its answer cells and the operators):
  no mutant survives undeclared, every point-breaking mutant is capped and
  caught by a visible essential check, the reference answer earns full marks.
  A chapter owner who meets a failure here runs ``make audit ASSIGNMENT=…`` for
  the whole page: add a check, or declare the mutant equivalent with its reason
  in ``grading/audit/<assignment>.toml``.
"""

from __future__ import annotations

import textwrap

import nbformat
import pytest
from nbrun import nbgrader_cell

from grading import audit
from grading.runner import ROOT, grade, source_notebook

pytestmark = pytest.mark.grading

CHAPTERS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.name.startswith("ch"))
BUDGET = 12
"""Mutants graded per chapter assignment in the suite (a deterministic sample; ``make audit`` grades them all)."""
BUDGETS = {"ch18-backward": 4}
"""Smaller samples where every mutant costs seconds (chapter 18's tests measure memory on long sequences)."""


def _cell(body: str, name: str = "f") -> str:
    """An answer cell: a function whose body is ``body`` between the solution markers."""
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return f'def {name}(x, n=3):\n    """说明。"""\n    ### BEGIN SOLUTION\n{inner}\n    ### END SOLUTION\n'


def _changes(body: str, operator: str | None = None) -> list[str]:
    found = audit.mutants("f", _cell(body))
    return [f"{m.before} → {m.after}" for m in found if operator is None or m.operator == operator]


# --------------------------------------------------------------------------- operators

@pytest.mark.parametrize(("operator", "body", "expected"), [
    ("arith", "return x + n", "return x + n → return x - n"),
    ("arith", "return x @ x", "return x @ x → return x * x"),
    ("arith", "y = x\ny /= n\nreturn y", "y /= n → y *= n"),
    ("compare", "return x < n", "return x < n → return x <= n"),
    ("compare", "return x >= n", "return x >= n → return x > n"),
    ("compare", "return x is None", "return x is None → return x is not None"),
    ("boolean", "return x and n", "return x and n → return x or n"),
    ("boolean", "return not x", "return not x → return x"),
    ("boolean", "return np.sum(x, keepdims=True)",
     "return np.sum(x, keepdims=True) → return np.sum(x, keepdims=False)"),
    ("sign", "return -x", "return -x → return x"),
    ("sign", "return x * 0.5", "return x * 0.5 → return x * -0.5"),
    ("number", "return x[2]", "return x[2] → return x[3]"),
    ("number", "return x[2]", "return x[2] → return x[1]"),
    ("number", "return x * 1e-9", "return x * 1e-9 → return x * 1.000000001"),
    ("axis", "return np.sum(x, axis=-1)", "return np.sum(x, axis=-1) → return np.sum(x, axis=-2)"),
    ("axis", "return np.sum(x, axis=-1)", "return np.sum(x, axis=-1) → return np.sum(x, axis=0)"),
    ("axis", "return np.sum(x, axis=None)", "return np.sum(x, axis=None) → return np.sum(x, axis=-1)"),
    ("keyword", "return np.sum(x, axis=0, keepdims=True)",
     "return np.sum(x, axis=0, keepdims=True) → return np.sum(x, keepdims=True)"),
    ("off_by_one", "return x[:n]", "return x[:n] → return x[:n + 1]"),
    ("off_by_one", "return x[n:]", "return x[n:] → return x[n - 1:]"),
    ("off_by_one", "return x[n]", "return x[n] → return x[n + 1]"),
    ("off_by_one", "return [i for i in range(n)]", "return [i for i in range(n)] → return [i for i in range(n - 1)]"),
    ("drop", "return x * n + 1", "return x * n + 1 → return x * n"),
    ("drop", "return x * n + 1", "return x * n + 1 → return x + 1"),
    ("drop", "return x / np.sqrt(n)", "return x / np.sqrt(n) → return x"),
    ("drop_call", "return x / np.sqrt(n)", "return x / np.sqrt(n) → return x / n"),
    ("drop_call", "return x @ x.T", "return x @ x.T → return x @ x"),
    ("swap_call", "return np.max(x, axis=-1)", "return np.max(x, axis=-1) → return np.min(x, axis=-1)"),
    ("swap_call", "return np.tril(x)", "return np.tril(x) → return np.triu(x)"),
    ("aug_assign", "y = x\ny += n\nreturn y", "y += n → y = n"),
    ("loop", "y = 0\nfor i in x:\n    y += i\nreturn y", "for i in x: → for i in []:"),
    ("loop", "for i in x:\n    if i:\n        break\nreturn i", "break → continue"),
    ("remove", "y = x\ny = y * 2\nreturn y", "y = y * 2 → pass"),
])
def test_each_operator_makes_its_mutation(operator, body, expected):
    assert expected in _changes(body, operator), _changes(body)


def test_only_the_solution_is_mutated_never_strings_messages_or_the_docstring():
    source = ('def f(x, n=3):\n    """说明：返回 x + 1。"""\n    y = x + 1  # 骨架里的代码，学生看得到\n'
              '    ### BEGIN SOLUTION\n    if n < 0:\n        raise ValueError(f"n = {n + 1} 不能是负数")\n'
              '    return y * 2, "float32"\n    ### END SOLUTION\n')
    found = audit.mutants("f", source)
    assert found and all(5 <= m.line <= 7 for m in found), [m.change for m in found]
    assert not [m for m in found if m.line == 6 and m.operator != "remove"], [m.change for m in found]  # raise
    assert not [m for m in found if m.line == 7 and '"float32"' not in m.after and m.operator != "remove"]
    assert audit.mutants("f", "def f(x):\n    return x + 1\n") == []  # no solution markers: nothing to mutate


def test_a_mutant_is_the_cell_with_one_edit_and_every_mutant_is_a_different_program():
    source = _cell("""
        s = np.exp(x - np.max(x, axis=-1, keepdims=True))  # 先减去最大值
        return s / np.sum(s, axis=-1, keepdims=True)
    """)
    found = audit.mutants("f", source)
    assert len(found) > 20
    programs = set()
    for m in found:
        assert m.source.splitlines()[: m.line - 1] == source.splitlines()[: m.line - 1]
        assert "# 先减去最大值" in m.source or m.operator == "remove"  # the edit is local: comments stay
        programs.add(audit._canonical(__import__("ast").parse(m.source)))
    assert len(programs) == len(found)


def test_ids_and_order_are_stable_and_survive_an_edit_on_another_line():
    body = "y = x * n\nreturn y + 1"
    first, again = audit.mutants("f", _cell(body)), audit.mutants("f", _cell(body))
    assert [m.id for m in first] == [m.id for m in again]
    assert len({m.id for m in first}) == len(first)
    edited = audit.mutants("f", _cell("z = 0  # 新加的一行\n" + body))
    kept = {m.id for m in first if "return" in m.before}
    assert kept <= {m.id for m in edited}
    assert all(m.id.startswith("f:") and m.id.split(":")[1] in audit.OPERATORS for m in first)


def test_the_sample_is_deterministic_and_spread_across_cells_and_operators():
    found = (audit.mutants("a", _cell("return x * n + 1 if n > 0 else -x", "a"))
             + audit.mutants("b", _cell("y = x[:n]\ny += 2\nreturn np.sum(y, axis=-1)", "b")))
    chosen = audit.sample(found, 8, seed="demo")
    assert chosen == audit.sample(found, 8, seed="demo") and len(chosen) == 8
    assert {m.cell for m in chosen} == {"a", "b"}
    for cell in ("a", "b"):
        ops = [m.operator for m in chosen if m.cell == cell]
        assert len(set(ops)) == len(ops), ops  # a cell's first picks are all different operators
    assert [m.id for m in chosen] == [m.id for m in found if m in chosen]  # in the cells' own order
    assert audit.sample(found, None) == found


# --------------------------------------------------------------------------- classification

SETUP = "import numpy as np\n"
ADD = '''def first_sum(x, k):
    """前三个数之和乘以 k；k 为负数时抛出 ValueError。"""
    ### BEGIN SOLUTION
    total = 0
    for i in range(3):
        total += x[i] * k
    if k < 0:
        raise ValueError("k 不能是负数")
    return total
    ### END SOLUTION
'''
TEST_ADD = '''from attnlib.grading import Checks, Mistake

checks = Checks(points=3, title="练习 1")
got = checks.call(first_sum, [1.0, 2.0, 3.0, 4.0], 2.0)
checks.check(got == 12.0, "前三个数之和乘以 2", expected=12.0, got=got, needs=got, essential=True,
             mistakes=[Mistake("all_four", lambda: 20.0, "把四个数都加上了")])
### BEGIN HIDDEN TESTS
checks.raises(ValueError, first_sum, [1.0, 2.0, 3.0, 4.0], -1.0, what="k 为负：抛出 ValueError")
### END HIDDEN TESTS
checks.score()
'''
COUNTDOWN = '''def countdown(n):
    ### BEGIN SOLUTION
    while n > 0:
        n -= 1
    return first_sum([n, n, n], 1.0)
    ### END SOLUTION
'''
TEST_COUNTDOWN = '''from attnlib.grading import Checks

checks = Checks(points=2)
got = checks.call(countdown, 5)
checks.check(got == 0, "从 5 数到 0", expected=0, got=got, needs=got, essential=True)
checks.score()
'''


def _notebook() -> nbformat.NotebookNode:
    code = nbgrader_cell
    return nbformat.v4.new_notebook(cells=[
        code(SETUP, "setup"), code(ADD, "first_sum", solution=True), code(TEST_ADD, "test_first_sum", points=3),
        code(COUNTDOWN, "countdown", solution=True), code(TEST_COUNTDOWN, "test_countdown", points=2)])


def test_plan_runs_what_a_mutant_needs_only():
    layout = audit.plan(_notebook())
    # countdown calls first_sum: a mutant of first_sum reaches both tests; one of countdown only its own
    assert layout["first_sum"]["tests"] == ["test_first_sum", "test_countdown"]
    assert layout["countdown"] == {"tests": ["test_countdown"], "cells": [0, 1, 3, 4]}


def _verdict(report, change: str) -> audit.Verdict:
    found = [v for v in report.verdicts if f"{v.mutant.before} → {v.mutant.after}" == change]
    assert len(found) == 1, (change, [v.mutant.change for v in report.verdicts])
    return found[0]


@pytest.fixture(scope="module")
def synthetic():
    nb = _notebook()
    declared = {m.id: "测试用的声明" for m in audit.all_mutants(nb) if m.after == "if k < 1:"}
    report = audit.audit("synthetic", nb, equivalents=declared, timeout=2.0,
                         select=lambda m: m.cell == "first_sum" or (m.before, m.after) == ("n -= 1", "n += 1"))
    return report


def test_a_mutant_that_misses_the_point_is_capped_and_named_by_its_mistake_model(synthetic):
    v = _verdict(synthetic, "for i in range(3): → for i in range(4):")
    assert (v.outcome, v.breaks_point, v.capped, v.visibly_essential, v.problem) == ("visible", True, True, True, None)
    assert v.hint == "all_four"
    assert v.visible["test_first_sum"].score == pytest.approx(0.0)
    assert v.full["test_first_sum"].score == pytest.approx(1)
    other = _verdict(synthetic, "for i in range(3): → for i in range(2):")
    assert other.outcome == "visible" and other.hint == "只有观察"


def test_a_mutant_only_hidden_checks_catch_is_counted_as_such(synthetic):
    v = _verdict(synthetic, 'raise ValueError("k 不能是负数") → pass')
    assert (v.outcome, v.breaks_point, v.capped, v.problem) == ("hidden", False, False, None)
    assert v.visible["test_first_sum"].score == 3 and v.full["test_first_sum"].score == pytest.approx(1.5)


def test_a_survivor_fails_the_audit_unless_declared_equivalent(synthetic):
    survivor = _verdict(synthetic, "if k < 0: → if k <= 0:")  # k = 0 is never tried
    assert survivor.outcome == "survived" and survivor.problem.startswith("存活")
    declared = _verdict(synthetic, "if k < 0: → if k < 1:")
    assert declared.outcome == "equivalent" and declared.problem is None and declared.reason == "测试用的声明"
    assert not synthetic.ok
    assert survivor in synthetic.problems and declared not in synthetic.problems


def test_a_mutant_that_never_ends_is_stopped_and_caught(synthetic):
    v = _verdict(synthetic, "n -= 1 → n += 1")
    assert v.outcome == "visible" and v.full["test_countdown"].timed_out
    assert v.hint == "只有观察（超时）"


def test_a_point_breaking_mutant_caught_only_by_hidden_essential_checks_fails_the_audit():
    nb = _notebook()
    hidden_point = TEST_ADD.replace('what="k 为负：抛出 ValueError"', 'what="k 为负：抛出 ValueError", essential=True')
    nb.cells[2].source = hidden_point
    report = audit.audit("synthetic", nb, equivalents={}, select=lambda m: (m.before, m.after) == (
        'raise ValueError("k 不能是负数")', "pass"))
    (v,) = report.verdicts
    assert v.breaks_point and v.capped and not v.visibly_essential
    assert "可见的要点检查没有发现它" in v.problem
    assert not report.ok


def test_the_reference_that_fails_its_own_tests_is_an_error_not_a_pass():
    nb = _notebook()
    nb.cells[1].source = ADD.replace("range(3)", "range(2)")
    report = audit.audit("synthetic", nb, equivalents={}, budget=3)
    assert not report.ok
    assert any("参考答案本身没有得满分" in e for e in report.errors)


def test_the_summary_and_the_page_say_it_in_chinese(synthetic):
    text = audit.summary(synthetic)
    for words in ("答案单元", "可见检查抓住", "只被隐藏检查抓住", "存活", "封顶", "结论：没有通过",
                  "if k < 0: → if k <= 0:"):
        assert words in text, text
    page = audit.page(synthetic)
    assert "<script" not in page and "http" not in page
    assert "逐个变异体" in page and "只有观察（超时）" in page and "all_four" in page


def test_the_runner_grades_as_nbgrader_does():
    """Any stderr in a test cell zeroes it (a warning, sys.stderr, fd 2); an error zeroes it; no value: full."""
    cells = {
        "warns": "import warnings\nwarnings.warn('注意')\n1.0",
        "prints": "import sys\nprint('x', file=sys.stderr)\n1.0",
        "fd2": "import os\nos.write(2, b'x')\n1.0",
        "raises": "1 / 0",
        "quiet_numpy": "import numpy as np\nwith np.errstate(all='ignore'):\n    np.log(0.0)\n0.5",
        "no_value": "x = 1",
        "not_a_number": "'好'",
        "stdout": "print('很多输出')\n0.25",
        "deprecated_in_a_library": "import warnings\nwarnings.warn_explicit('旧', DeprecationWarning, 'lib.py', 1,"
                                   " module='somelib')\n1.0",
    }
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(src, metadata={"nbgrader": {"grade_id": gid, "grade": True, "solution": False,
                                                              "points": 2, "locked": True, "schema_version": 3,
                                                              "task": False}})
        for gid, src in cells.items()])
    scores = {k: r.score for k, r in grade(nb).items()}
    assert scores == {"warns": 0.0, "prints": 0.0, "fd2": 0.0, "raises": 0.0, "quiet_numpy": 0.5, "no_value": 2.0,
                      "not_a_number": 2.0, "stdout": 0.25, "deprecated_in_a_library": 1.0}


# --------------------------------------------------------------------------- the chapters

@pytest.mark.parametrize("assignment", CHAPTERS)
def test_the_visible_part_read_inside_the_full_run_is_what_validate_gets(assignment):
    """The audit grades each mutant once and reads the visible-only grade where the hidden tests begin
    (``grade(..., split=True)``): for every test cell that can be split so, that grade is the one a run with
    the hidden tests cut out gives (score and every check)."""
    nb = source_notebook(assignment)
    full, visible = grade(nb, hidden=True, split=True), grade(nb, hidden=False)
    split = {t: r.visible for t, r in full.items() if r.visible is not None}
    assert split, f"{assignment}: no test cell could be split"
    for t, twin in split.items():
        assert (twin.score, twin.records) == (visible[t].score, visible[t].records), t


@pytest.mark.parametrize("assignment", CHAPTERS)
def test_a_sample_of_the_chapters_mutants_is_caught_or_declared(assignment):
    report = audit.audit(assignment, budget=BUDGETS.get(assignment, BUDGET))
    assert report.verdicts or report.errors, f"{assignment}: no mutant graded"
    assert report.ok, audit.summary(report)


# --------------------------------------------------------------------------- the documented commands

@pytest.mark.slow
def test_make_audit_as_written(tmp_path):
    """README's and the 教师指南's ``make audit`` lines from the repository root: the table, the page, the status."""
    from test_documented_commands import ENGLISH_FALLBACK, _as_written, _guide_command, _run, documented

    readme = _guide_command(r"make audit ASSIGNMENT=\S+", "README.md")
    sample = _guide_command(r"make audit ASSIGNMENT=\S+ BUDGET=\d+ OUT=页面\.html")
    script = _guide_command(r"\.venv/bin/python scripts/audit\.py \S+ --budget \d+ -o 页面\.html")
    assert readme in documented() and readme == _guide_command(r"make audit ASSIGNMENT=\S+")
    assignment = readme.split("=", 1)[1]
    default_page = ROOT / "_build" / "audit" / f"{assignment}.html"
    for command, page, status in ((readme, default_page, 2), (_as_written(sample, 页面=str(tmp_path / "页面")),
                                                              tmp_path / "页面.html", 2),
                                  (_as_written(script, 页面=str(tmp_path / "脚本")), tmp_path / "脚本.html", 1)):
        page.unlink(missing_ok=True)
        run = _run(command, timeout=600)
        out = run.stdout + run.stderr
        passed = "结论：通过" in out
        assert run.returncode == (0 if passed else status), out[-3000:]
        assert passed or "结论：没有通过" in out, out[-3000:]
        for words in ("答案单元", "可见检查抓住", "只被隐藏检查抓住", "存活", f"逐个变异体的页面：{page}"):
            assert words in out, out[-3000:]
        assert not ENGLISH_FALLBACK.search(out), out[-3000:]
        assert page.read_text(encoding="utf-8").count(f"{assignment} 的变异分析") == 2  # title and heading
        if "BUDGET" in command or "--budget" in command:
            assert "按预算抽取了 40 个" in out, out[-3000:]
    usage = _run("make audit")
    assert usage.returncode == 2 and "用法：make audit ASSIGNMENT=" in usage.stdout + usage.stderr
