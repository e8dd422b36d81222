"""Run an nbgrader source notebook in this process and read each test cell's score.

Used by the tests that hold the kept wrong solutions (``grading/wrong/``) against
an assignment's tests: solution cells can be replaced, the hidden tests kept or
cut out (what a student sees before grading), and every graded test cell's
returned score (the cell's last expression, ``checks.score()``) is collected.
Running in-process is much faster than a kernel; the scores are the same
numbers nbgrader reads from the cells' outputs.
"""

from __future__ import annotations

import ast
import contextlib
import io
import pathlib
import re

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[^\n]*\n.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.S | re.M)
CELL_MARK = re.compile(r"^# %% (\S+)[^\n]*\n", re.M)


def source_notebook(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


def read_wrong_solution(path: pathlib.Path) -> tuple[str, list[str], dict[str, str]]:
    """A kept wrong solution: ``(what is wrong, test cells that must catch it, {cell id: new source})``.

    The file starts with comment lines: ``# wrong: <what the mistake is>`` and
    ``# caught by: <test cell id> [<test cell id> ...]``; then each replaced
    solution cell follows a line ``# %% <cell id>``.
    """
    text = path.read_text(encoding="utf-8")
    what = re.search(r"^# wrong: (.+)$", text, re.M)
    caught = re.search(r"^# caught by: (.+)$", text, re.M)
    if not what or not caught:
        raise ValueError(f"{path}: needs '# wrong:' and '# caught by:' header lines")
    parts = CELL_MARK.split(text)
    cells = {parts[i]: parts[i + 1].strip() + "\n" for i in range(1, len(parts), 2)}
    if not cells:
        raise ValueError(f"{path}: no '# %% <cell id>' section")
    return what.group(1).strip(), caught.group(1).split(), cells


def run(nb, *, replace: dict[str, str] | None = None, hidden: bool = True) -> dict[str, float]:
    """Execute the code cells of ``nb`` in one fresh namespace; return ``{test cell id: score}``.

    ``replace`` swaps the source of cells by grade id; with ``hidden=False`` the
    hidden tests are cut out first.  A test cell that raises scores 0, as in nbgrader.
    """
    replace = dict(replace or {})
    unknown = set(replace) - {grade_id(c) for c in nb.cells}
    if unknown:
        raise KeyError(f"no cells {sorted(unknown)} in the notebook")
    namespace: dict = {"__name__": "__main__"}
    scores: dict[str, float] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = replace.get(grade_id(cell), cell.source)
        if not hidden:
            source = HIDDEN.sub("", source)
        try:
            value = _exec(source, namespace)
        except Exception:  # a crashing cell: nbgrader gives it 0
            value = 0.0
        if is_test_cell(cell):
            scores[grade_id(cell)] = float(value) if isinstance(value, (int, float)) else 0.0
    return scores


def _exec(source: str, namespace: dict):
    """Run ``source``; return the value of its last line when that is an expression (as Jupyter shows it)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(tree, "<cell>", "exec"), namespace)  # noqa: S102 - the course's own notebooks
        if last is not None:
            return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)  # noqa: S307
    return None
