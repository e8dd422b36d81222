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
from dataclasses import dataclass, field

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


SEVERITIES = ("essential", "edge")


@dataclass
class Kept:
    """A kept solution file: a wrong one (``grading/wrong/``) or a right one in another style (``grading/right/``).

    Attributes
    ----------
    what : str
        ``# wrong:`` (the mistake) or ``# right:`` (the style) header.
    caught_by : list of str
        ``# caught by:`` test cells that must catch the mistake (empty for a right one).
    severity : str or None
        ``# severity: essential`` (the exercise's point is missed) or ``edge``.
    diagnosis : str or None
        ``# diagnosis:`` the Chinese words the cell's hint must contain.
    cells : dict
        ``{solution cell id: new source}``, each after a line ``# %% <cell id>``.
    """

    what: str
    caught_by: list = field(default_factory=list)
    severity: str | None = None
    diagnosis: str | None = None
    cells: dict = field(default_factory=dict)


def _header(text: str, name: str) -> str | None:
    found = re.search(rf"^# {name}: (.+)$", text, re.M)
    return found.group(1).strip() if found else None


def read_kept(path: pathlib.Path) -> Kept:
    """Read a kept wrong (``# wrong:``) or right (``# right:``) solution file; see :class:`Kept`."""
    text = path.read_text(encoding="utf-8")
    parts = CELL_MARK.split(text)
    cells = {parts[i]: parts[i + 1].strip() + "\n" for i in range(1, len(parts), 2)}
    if not cells:
        raise ValueError(f"{path}: no '# %% <cell id>' section")
    right = _header(parts[0], "right")
    if right is not None:
        return Kept(what=right, cells=cells)
    what, caught = _header(parts[0], "wrong"), _header(parts[0], "caught by")
    if not what or not caught:
        raise ValueError(f"{path}: needs '# wrong:' and '# caught by:' header lines (or '# right:')")
    severity = _header(parts[0], "severity")
    if severity is not None and severity not in SEVERITIES:
        raise ValueError(f"{path}: '# severity:' must be one of {SEVERITIES}, not {severity!r}")
    return Kept(what=what, caught_by=caught.split(), severity=severity, diagnosis=_header(parts[0], "diagnosis"),
                cells=cells)


def read_wrong_solution(path: pathlib.Path) -> tuple[str, list[str], dict[str, str]]:
    """A kept wrong solution: ``(what is wrong, test cells that must catch it, {cell id: new source})``.

    The file starts with comment lines: ``# wrong: <what the mistake is>``,
    ``# caught by: <test cell id> [<test cell id> ...]``, ``# severity:
    essential|edge`` and ``# diagnosis: <words of the hint>``; then each
    replaced solution cell follows a line ``# %% <cell id>``.
    """
    kept = read_kept(path)
    return kept.what, kept.caught_by, kept.cells


def run(nb, *, replace: dict[str, str] | None = None, hidden: bool = True) -> dict[str, float]:
    """Execute the code cells of ``nb`` in one fresh namespace; return ``{test cell id: score}``.

    ``replace`` swaps the source of cells by grade id; with ``hidden=False`` the
    hidden tests are cut out first.  A test cell that raises scores 0, as in nbgrader.
    """
    return execute(nb, replace=replace, hidden=hidden)[0]


def execute(nb, *, replace: dict[str, str] | None = None, hidden: bool = True
            ) -> tuple[dict[str, float], dict[str, str]]:
    """Like :func:`run`, and also return what each test cell printed: ``({id: score}, {id: stdout})``."""
    replace = dict(replace or {})
    unknown = set(replace) - {grade_id(c) for c in nb.cells}
    if unknown:
        raise KeyError(f"no cells {sorted(unknown)} in the notebook")
    namespace: dict = {"__name__": "__main__"}
    scores: dict[str, float] = {}
    printed: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = replace.get(grade_id(cell), cell.source)
        if not hidden:
            source = HIDDEN.sub("", source)
        out = io.StringIO()
        try:
            value = _exec(source, namespace, out)
        except Exception as exc:  # a crashing cell: nbgrader gives it 0
            value = 0.0
            out.write(f"\n{type(exc).__name__}: {exc}\n")
        if is_test_cell(cell):
            scores[grade_id(cell)] = float(value) if isinstance(value, (int, float)) else 0.0
            printed[grade_id(cell)] = out.getvalue()
    return scores, printed


def _exec(source: str, namespace: dict, out: io.StringIO | None = None):
    """Run ``source``; return the value of its last line when that is an expression (as Jupyter shows it)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    with contextlib.redirect_stdout(out if out is not None else io.StringIO()):
        exec(compile(tree, "<cell>", "exec"), namespace)  # noqa: S102 - the course's own notebooks
        if last is not None:
            return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)  # noqa: S307
    return None
