"""A correct answer that prints, warns or reseeds keeps full marks, in every assignment (the grading contract).

nbgrader zeroes a test cell with any stderr output, a warning included.  The
course's test cells run the student's code through ``checks.call`` (which
swallows stderr and warnings), so a correct answer that is noisy on the way
keeps every point.  Each assignment's reference answers are turned into
misbehaving sheets (``grading.runner.sheet``):

* ``noisy``: every function and method the answer cells define warns
  (``warnings.warn``), prints to ``sys.stderr``, writes to file descriptor 2
  and logs a warning, on every call;
* ``chatty``: the same on stdout;
* ``reseed``: every call reseeds NumPy's and PyTorch's global generators;

and graded in-process by the runner (``grading/runner.py``), which scores a test
cell as nbgrader does: 0 after any stderr output.  Every test cell must keep
its points, with the hidden tests and with the visible ones alone (Validate).

That the runner's rule is nbgrader's is shown once, on a probe notebook graded
by a real ``nbgrader autograde``: cells that leak stderr in each way (a warning,
``sys.stderr``, fd 2, logging, a NumPy warning), cells that do not, the noisy
answer called through ``checks.call`` and called bare.
"""

from __future__ import annotations

import ast

import nbformat
import pytest
from nbrun import nbgrader_cell

from grading.runner import ROOT, SHEETS, grade, is_test_cell, misbehave, sheet, source_notebook

pytestmark = pytest.mark.grading

ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists())
EPS = 1e-9
#: Sheets that are not correct answers of an assignment, by its own instructions.
NOT_CORRECT = {
    ("ch02-qkv", "reseed"): "练习 2 要求 SelfAttention 构造时不改动全局的 np.random 状态：重新设种子的答案违反说明",
}


def _lost(runs: dict) -> dict:
    return {t: r for t, r in runs.items() if r.score < r.points - EPS}


def _why(runs: dict) -> str:
    return "\n".join(f"  {t}: {r.score:g}/{r.points:g}" + (f"，stderr：{r.stderr[:300]!r}" if r.stderr else "")
                     + (f"，出错：{r.error}" if r.error else "") for t, r in runs.items())


@pytest.mark.parametrize("kind", SHEETS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_correct_answer_that_misbehaves_keeps_full_marks(assignment, kind):
    if (assignment, kind) in NOT_CORRECT:
        pytest.skip(NOT_CORRECT[assignment, kind])
    nb = sheet(source_notebook(assignment), kind)
    full = grade(nb, hidden=True, split=True)
    visible = {t: r.visible for t, r in full.items() if r.visible is not None}
    if len(visible) < len(full):
        visible = grade(nb, hidden=False)
    assert full, f"{assignment}: no test cell ran"
    lost_full, lost_visible = _lost(full), _lost(visible)
    assert not lost_full and not lost_visible, (
        f"{assignment}（{kind}）：正确答案{'在评分时' if lost_full else ''}{'、在 Validate 时' if lost_visible else ''}"
        f"丢了分：\n评分：\n{_why(lost_full)}\nValidate：\n{_why(lost_visible)}")


def test_the_sheets_change_every_answer_and_keep_it_correct_python():
    nb = source_notebook("ch05-softmax")
    noisy = sheet(nb, "noisy")
    for before, after in zip(nb.cells, noisy.cells, strict=True):
        if before.metadata.get("nbgrader", {}).get("solution") and before.cell_type == "code":
            assert after.source != before.source and after.source.count("_noise_warnings.warn") >= 2
            compile(after.source, "<cell>", "exec")
        else:
            assert after.source == before.source
    with pytest.raises(ValueError, match="没有这种答卷"):
        sheet(nb, "loud")
    one_liner = ast.parse(misbehave("def f(x): return x + 1\n"))  # no line to insert before: rewritten whole
    (f,) = [node for node in one_liner.body if isinstance(node, ast.FunctionDef)]
    assert "_noise_warnings.warn" in ast.unparse(f) and ast.unparse(f.body[-1]) == "return x + 1"


# --------------------------------------------------------------------------- the rule against real nbgrader

PROBE = "noisy-probe"
ANSWER = '''def double(x):
    """2 * x。"""
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION
'''
RACY = "fd_2"
PROBE_TESTS = {
    # cell id: (source, what nbgrader gives it out of 2 points)
    "through_checks": ("from attnlib.grading import Checks\n\nchecks = Checks(points=2)\n"
                       "checks.check(checks.call(double, 2) == 4, '2 的两倍')\nchecks.score()", 2.0),
    "bare_call": ("assert double(2) == 4", 0.0),
    "a_warning": ("import warnings\n\nwarnings.warn('当心', UserWarning)", 0.0),
    "sys_stderr": ("import sys\n\nprint('到 stderr', file=sys.stderr)", 0.0),
    # the kernel forwards what reaches fd 2 from a thread: it may land after the cell has finished (then nbgrader
    # gives full points; both happened here).  The runner takes the strict reading, so no test cell relies on luck
    "fd_2": ("import os\n\n_ = os.write(2, '到文件描述符 2\\n'.encode())", 0.0),
    "logging": ("import logging\n\nlogging.getLogger('probe').warning('日志')", 0.0),
    "numpy_warning": ("import numpy as np\n\nnp.log(np.zeros(2))", 0.0),
    "numpy_quiet": ("import numpy as np\n\nwith np.errstate(divide='ignore'):\n    np.log(np.zeros(2))\n1.5", 1.5),
    "library_deprecation": ("import warnings\n\nwarnings.warn_explicit('旧接口', DeprecationWarning, 'lib.py', 1, "
                            "module='somelib')\n0.5", 0.5),
    "stdout_only": ("print('很多输出\\n' * 100)\n1.0", 1.0),
    "no_value": ("x = double(1) if False else 2", 2.0),
    "raises": ("1 / 0", 0.0),
}


def _probe() -> nbformat.NotebookNode:
    code = nbgrader_cell
    cells = [code("import numpy as np", "setup"), code(misbehave(ANSWER, "noisy"), "double", solution=True)]
    cells += [code(src, gid, points=2) for gid, (src, _) in PROBE_TESTS.items()]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.mark.slow
def test_the_runners_stderr_rule_is_nbgraders(tmp_path):
    """One real ``nbgrader autograde`` of the noisy probe: every cell gets the score the runner gives it."""
    from nbgrader.api import Gradebook

    from grading.course import Course

    source = tmp_path / "source" / PROBE
    source.mkdir(parents=True)
    nb = _probe()
    nbformat.write(nb, str(source / f"{PROBE}.ipynb"))
    course = Course(tmp_path / "course")
    course.add_sources([PROBE], source=source.parent)
    course.nbgrader("generate_assignment", PROBE, "--force")
    course.submit(PROBE, "probe", nb)
    course.nbgrader("autograde", PROBE, "--force")
    with Gradebook(f"sqlite:///{course.path('gradebook.db')}") as gb:
        submitted = gb.find_submission_notebook(PROBE, PROBE, "probe")
        real = {g.name: g.auto_score for g in submitted.grades if g.name in PROBE_TESTS}
    ours = {t: r.score for t, r in grade(nb).items()}
    expected = {gid: score for gid, (_, score) in PROBE_TESTS.items()}
    assert ours == expected, f"runner 给的分与这里写的不同：{ours}"
    assert real.pop(RACY) in (0.0, 2.0)
    assert real == {k: v for k, v in expected.items() if k != RACY}, f"nbgrader 与 runner 不一致：{real}，{ours}"
    assert sum(is_test_cell(c) for c in nb.cells) == len(PROBE_TESTS)
