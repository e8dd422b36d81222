"""A synthetic class for trying the similarity report: independent answers and disguised copies.

Built from what the repository keeps: the model solution of an assignment
(``solutions/``), the kept right answers in other styles
(``grading/right/<assignment>/*.py``, written independently of it), and copies
of the model answer disguised the two ways copying students do:

* :func:`rename` -- every local variable and argument renamed;
* :func:`reorder` -- independent statements swapped, helper functions moved,
  comments added.

The tests (``tests/test_similarity.py``) and the bench
(``bench/bench_similarity.py``) write these as submitted notebooks of a class
folder; an instructor can do the same to see the report before a real class.
"""

from __future__ import annotations

import ast
import pathlib
import re

import nbformat

REPO = pathlib.Path(__file__).resolve().parents[2]
CELL_MARK = re.compile(r"^# %% (\S+)\s*$", re.M)

__all__ = ["kept_right", "model_answers", "rename", "reorder", "write_submission"]


def model_answers(assignment: str) -> dict[str, str]:
    """Solution cell id -> the model answer's source (solution markers removed), code cells only."""
    nb = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata.nbgrader.grade_id: re.sub(r"^\s*### (BEGIN|END) SOLUTION\n?", "", c.source, flags=re.M)
            for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def kept_right(assignment: str) -> dict[str, dict[str, str]]:
    """Style name -> {cell id: source} of every kept right answer of ``assignment``."""
    out = {}
    for path in sorted((REPO / "grading" / "right" / assignment).glob("*.py")):
        parts = CELL_MARK.split(path.read_text(encoding="utf-8"))
        out[path.stem] = {parts[i]: parts[i + 1].strip() + "\n" for i in range(1, len(parts), 2)}
    return out


class _Renamer(ast.NodeTransformer):
    """Renames the names bound inside functions (arguments, assignments, loop variables)."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node):
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.mapping.get(node.arg, node.arg)
        return node

    def visit_keyword(self, node):
        self.generic_visit(node)
        return node  # a keyword's name belongs to the callee: unchanged


def _bound_names(tree: ast.AST) -> set[str]:
    """Names a cell's functions bind locally: their arguments and the targets they assign."""
    names = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))):
        names.update(a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg))
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def rename(source: str, prefix: str = "my_") -> str:
    """``source`` with every local variable and argument renamed (``x`` -> ``my_x``); comments dropped.

    Function names stay: the exercise and its tests name them.
    """
    tree = ast.parse(source)
    mapping = {name: f"{prefix}{name}" for name in _bound_names(tree)}
    return ast.unparse(_Renamer(mapping).visit(tree)) + "\n"


def _reads_writes(stmt: ast.stmt) -> tuple[set, set]:
    reads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    writes = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return reads, writes


def _independent(a: ast.stmt, b: ast.stmt) -> bool:
    """Two simple assignments that may run in either order (neither reads nor writes what the other writes)."""
    if not all(isinstance(s, (ast.Assign, ast.AnnAssign, ast.Expr)) for s in (a, b)):
        return False
    (ra, wa), (rb, wb) = _reads_writes(a), _reads_writes(b)
    return not (wa & (rb | wb) or wb & ra)


def _swap_body(body: list) -> list:
    """Swap neighbouring independent statements, each at most once (left to right)."""
    body, i = list(body), 0
    while i + 1 < len(body):
        if _independent(body[i], body[i + 1]):
            body[i], body[i + 1] = body[i + 1], body[i]
            i += 2
        else:
            i += 1
    return body


COMMENTS = ["# 先处理输入", "# 这里是关键的一步", "# 按公式计算", "# 注意数值稳定", "# 得到结果"]


def reorder(source: str) -> str:
    """``source`` with its independent statements swapped, its functions in reverse order and comments added.

    Functions of one cell may be defined in any order (a helper is looked up when it is called); a comment
    line goes above every statement of every function body.
    """
    tree = ast.parse(source)
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        doc = fn.body[:1] if fn.body and _is_docstring(fn.body[0]) else []
        fn.body = doc + _swap_body(fn.body[len(doc):])
    defs = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    others = [s for s in tree.body if not isinstance(s, ast.FunctionDef)]
    tree.body = others + defs[::-1]
    text = ast.unparse(tree)
    # a comment above each statement of each function body (the docstring excepted), found in the new text
    starts = sorted({stmt.lineno for fn in ast.walk(ast.parse(text)) if isinstance(fn, ast.FunctionDef)
                     for stmt in fn.body if not _is_docstring(stmt)})
    lines = text.splitlines()
    for count, lineno in enumerate(reversed(starts)):
        line = lines[lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        lines.insert(lineno - 1, f"{indent}{COMMENTS[count % len(COMMENTS)]}")
    return "\n".join(lines) + "\n"


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def write_submission(folder: pathlib.Path, release: pathlib.Path, answers: dict[str, str],
                     written: str | None = None) -> pathlib.Path:
    """The release notebook with these answer cells filled, written to ``folder/<release name>``.

    ``answers`` maps code cell ids to sources; ``written``, when given, fills every written answer cell.
    """
    nb = nbformat.read(str(release), as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("solution"):
            continue
        if cell.cell_type == "code" and meta.get("grade_id") in answers:
            cell.source = answers[meta["grade_id"]].strip("\n")
        elif cell.cell_type == "markdown" and written is not None:
            cell.source = written
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / release.name
    nbformat.write(nb, str(path))
    return path
