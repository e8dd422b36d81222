"""``make audit``: mutation analysis of an assignment's tests.

Each reference answer of ``solutions/<assignment>/<assignment>.ipynb`` (the code
between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of every autograded
answer cell) is changed one small step at a time -- a *mutant*: ``+`` for ``-``,
``<`` for ``<=``, a slice bound off by one, ``axis=-1`` for ``axis=-2``, a
factor dropped, a statement removed, ``+=`` for ``=`` ... -- and every mutant is
graded twice, as a student's answer would be: with the visible tests only
(what Validate shows) and with the hidden tests too (the grade).  A mutant that
changes behaviour should lose points, and one that misses the exercise's point
(本题要点: it fails an essential check) should be capped at a third of the cell's
points by a *visible* essential check, so Validate tells the student.  The
report says, per answer cell and per mutant, where it was caught, the scores,
whether it was capped and which hint it got (the name of the matched mistake
model, or 只有观察 when the feedback only states what it observed).

A mutant no test can catch because it changes nothing (``x * 1.0``, a branch
that cannot run) is an *equivalent* mutant: it is declared once, with a reason,
in ``grading/audit/<assignment>.toml`` (not in ``solutions/``, whose files
nbgrader copies into the release), keyed by its id::

    [equivalent."masked_softmax:compare:3f2a9c1d"]
    mutation = "第 7 行：total > 0 → total >= 0"
    reason = "total 是非负数之和，等于 0 时 np.divide 的 where 两种写法都跳过"

Ids are ``<answer cell>:<operator>:<hash>``, the hash of the changed line before
and after the mutation (and its occurrence), so an id survives edits elsewhere in
the cell.  The audit fails (exit status 1) when a mutant survives undeclared,
when a point-breaking mutant is not capped or not caught by a visible essential
check, when a declared equivalent is caught after all, or when the reference
answer itself does not earn full marks.

Why our own operators on Python's ``ast`` and not mutmut or cosmic-ray.  Both
are maintained mutation tools, and their operator sets are the model here
(mutmut 3's operator swap table: ``+``/``-``, ``*``/``/``, ``<``/``<=``,
``and``/``or``, ``True``/``False``, ``+=`` to ``=``; cosmic-ray's number
replacer (±1), zero-iteration ``for`` loop, ``break``/``continue``).  But both
mutate *files on an import path* and judge each mutant by the exit status of a
test command run in a fresh process (mutmut 3 rewrites every function of a
package with a trampoline and drives pytest; cosmic-ray keeps a session database
and runs the command per mutant through its workers), whereas an answer here is
a notebook cell executed in one namespace and judged by its test cells' partial
credit and their ``Checks.records``, in-process
(:mod:`grading.runner`).  Their operators are functions on libcst (mutmut) or
parso (cosmic-ray) trees, so using them would add a parser and, for cosmic-ray,
a database and a task runner to the course's pinned environment for what is a
few hundred lines here; and the mistakes a course on attention is about need
operators neither has: an ``axis=`` argument changed, a factor or a term
dropped, a transpose or a ``sqrt`` left out, ``max`` for ``min``, ``tril`` for
``triu``.  String constants are not mutated (in these answers they are error
messages and dtype names; mutating messages only makes equivalent mutants), nor
is code inside a ``raise`` (its message) or an f-string.

Every mutant is an edit of the cell's text (the smallest span that gives the
mutated syntax tree, checked by parsing it back), so the page shows it as
"line: before → after".  Only the cells a mutant needs are executed: the setup
and answer cells, the test cells that use a name the mutated cell defines
(directly or through another answer cell) and the test cells those use; each
cell runs under a time limit (a mutated loop may never end).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import html
import pathlib
import random
import re
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable

import tomllib

from grading.runner import ROOT, SOLUTION, CellRun, grade, grade_id, is_answer_cell, is_test_cell

EQUIVALENTS = ROOT / "grading" / "audit"
OUT = ROOT / "_build" / "audit"
CAP = 1 / 3
EPS = 1e-9
MIN_TIMEOUT = 10.0
"""Seconds a cell may run under a mutant, at least (20 times the reference's slowest run when that is more)."""

#: Operators, in the order they are tried on each node, with their Chinese names.
OPERATORS = {
    "axis": "轴参数改变",
    "keyword": "去掉一个关键字参数",
    "arith": "算术运算符互换",
    "compare": "比较运算符互换",
    "boolean": "布尔运算互换",
    "sign": "符号翻转",
    "number": "常数改变",
    "off_by_one": "边界差一",
    "drop": "去掉一项或一个因子",
    "drop_call": "去掉一次函数调用或转置",
    "swap_call": "函数互换",
    "aug_assign": "+= 改成 =",
    "loop": "循环改变",
    "remove": "删掉一条语句",
}


# --------------------------------------------------------------------------- mutants

@dataclasses.dataclass(frozen=True)
class Mutant:
    """One mutation of one answer cell.

    Attributes
    ----------
    id : str
        ``<cell>:<operator>:<hash>``: stable while the changed line is unchanged.
    cell : str
        The answer cell's grade id.
    operator : str
        A key of :data:`OPERATORS`.
    line : int
        The first changed line, counted in the cell (from 1).
    before, after : str
        The changed line(s), before and after the mutation (stripped; several lines joined by " ⏎ ").
    source : str
        The whole mutated cell.
    """

    id: str
    cell: str
    operator: str
    line: int
    before: str
    after: str
    source: str

    @property
    def change(self) -> str:
        return f"第 {self.line} 行：{self.before} → {self.after}"


def solution_lines(source: str) -> list[tuple[int, int]]:
    """The 1-based line ranges (first, last) of the code between the solution markers of a cell."""
    ranges = []
    for found in SOLUTION.finditer(source):
        first = source.count("\n", 0, found.start(2)) + 1
        last = source.count("\n", 0, found.end(2))
        if last >= first:
            ranges.append((first, last))
    return ranges


_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
          ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.MatMult: ast.Mult, ast.BitAnd: ast.BitOr,
          ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd, ast.LShift: ast.RShift, ast.RShift: ast.LShift}
_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_AXIS_WORDS = {"axis", "dim", "axis1", "axis2", "axes", "dims", "source", "destination", "start_dim", "end_dim"}
_SWAP_CALLS = {"max": "min", "min": "max", "maximum": "minimum", "minimum": "maximum", "argmax": "argmin",
               "argmin": "argmax", "amax": "amin", "amin": "amax", "nanmax": "nanmin", "nanmin": "nanmax",
               "sum": "mean", "mean": "sum", "tril": "triu", "triu": "tril", "floor": "ceil", "ceil": "floor",
               "any": "all", "all": "any", "cumsum": "sum", "logsumexp": "max"}
_DROP_CALLS = {"sqrt", "exp", "log", "abs", "square", "tanh", "transpose", "swapaxes", "contiguous", "clone",
               "copy", "float", "int", "round", "detach", "relu", "sigmoid"}


def _int_const(node) -> int | None:
    """The value of an integer literal (``3``, ``-3``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int):
        return -node.operand.value
    return None


def _number(value) -> ast.expr:
    return ast.UnaryOp(ast.USub(), ast.Constant(-value)) if value < 0 else ast.Constant(value)


def _plus(node: ast.expr, delta: int) -> ast.expr:
    return ast.BinOp(copy.deepcopy(node), ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))


def _callee(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _mutations(node, parent) -> Iterable[tuple[str, object]]:
    """``(operator, replacement)`` for ``node``: a new node, or None to delete it from its parent's list."""
    new = copy.deepcopy
    # axis= and other keyword arguments
    if isinstance(node, ast.keyword) and node.arg is not None:
        value = _int_const(node.value)
        if node.arg in _AXIS_WORDS:
            if value is not None:
                for other in (value - 1, value + 1) if value < 0 else (value + 1, value - 1):
                    if other >= 0 or value < 0:
                        yield "axis", ast.keyword(node.arg, _number(other))
            elif isinstance(node.value, ast.Constant) and node.value.value is None:
                yield "axis", ast.keyword(node.arg, _number(-1))
                yield "axis", ast.keyword(node.arg, _number(0))
        yield "keyword", None
    if isinstance(node, ast.BinOp):
        swap = _ARITH.get(type(node.op))
        if swap:
            yield "arith", ast.BinOp(new(node.left), swap(), new(node.right))
    if isinstance(node, ast.AugAssign):
        swap = _ARITH.get(type(node.op))
        if swap:
            yield "arith", ast.AugAssign(new(node.target), swap(), new(node.value))
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                ops = [new(o) for o in node.ops]
                ops[i] = _COMPARE[type(op)]()
                yield "compare", ast.Compare(new(node.left), ops, [new(c) for c in node.comparators])
    if isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolean", ast.BoolOp(other, [new(v) for v in node.values])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "boolean", new(node.operand)
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "boolean", ast.Constant(not node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield "sign", new(node.operand)
    if isinstance(node, ast.Constant) and type(node.value) is float and node.value != 0:
        if not (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)):
            yield "sign", ast.UnaryOp(ast.USub(), ast.Constant(node.value))  # 0.5 -> -0.5
    negative = _int_const(node)
    if isinstance(node, ast.UnaryOp) and negative is not None:  # -1 -> 0 and -2
        yield "number", _number(negative + 1)
        yield "number", _number(negative - 1)
    under_minus = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float) and not under_minus:
        if type(node.value) is int:
            yield "number", ast.Constant(node.value + 1)
            if node.value > 0:
                yield "number", ast.Constant(node.value - 1)
        elif abs(node.value) < 1e300:
            yield "number", ast.Constant(node.value + 1.0)
    if isinstance(node, ast.Slice):
        for name in ("lower", "upper"):
            bound = getattr(node, name)
            if bound is not None and _int_const(bound) is None:
                for delta in (1, -1):
                    yield "off_by_one", ast.Slice(**{**{f: new(getattr(node, f)) for f in ("lower", "upper", "step")},
                                                     name: _plus(bound, delta)})
    if isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Name, ast.BinOp)):
        for delta in (1, -1):
            yield "off_by_one", ast.Subscript(new(node.value), _plus(node.slice, delta), ast.Load())
    if isinstance(node, ast.Call) and _callee(node) == "range":
        for i, arg in enumerate(node.args[:2]):
            if _int_const(arg) is None and not isinstance(arg, ast.Starred):
                for delta in (1, -1):
                    args = [new(a) for a in node.args]
                    args[i] = _plus(arg, delta)
                    yield "off_by_one", ast.Call(new(node.func), args, [new(k) for k in node.keywords])
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
        yield "drop", new(node.left)
        yield "drop", new(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        yield "drop", new(node.left)
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and isinstance(node.ctx, ast.Load):
        yield "drop_call", new(node.value)
    if isinstance(node, ast.Call) and _callee(node) in _DROP_CALLS:
        if isinstance(node.func, ast.Attribute) and not node.args and not _is_module(node.func.value):
            yield "drop_call", new(node.func.value)  # x.transpose(), x.float(), x.clone()
        elif node.args and not isinstance(node.args[0], ast.Starred):
            yield "drop_call", new(node.args[0])  # np.sqrt(x), np.swapaxes(x, -1, -2)
    if isinstance(node, ast.Call) and _callee(node) in _SWAP_CALLS:
        func = new(node.func)
        if isinstance(func, ast.Attribute):
            func.attr = _SWAP_CALLS[func.attr]
        else:
            func.id = _SWAP_CALLS[func.id]
        yield "swap_call", ast.Call(func, [new(a) for a in node.args], [new(k) for k in node.keywords])
    if isinstance(node, ast.AugAssign):
        yield "aug_assign", ast.Assign([new(node.target)], new(node.value))
    if isinstance(node, (ast.For, ast.AsyncFor)):
        yield "loop", "zero-iterations"
    if isinstance(node, ast.Break):
        yield "loop", ast.Continue()
    if isinstance(node, ast.Continue):
        yield "loop", ast.Break()
    if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                            ast.Import, ast.ImportFrom, ast.Pass, ast.Global,
                                                            ast.Nonlocal)):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            yield "remove", ast.Pass()


def _is_module(node) -> bool:
    return isinstance(node, ast.Name) and node.id in ("np", "numpy", "torch", "anp", "att", "F", "math")


_SKIP_FIELDS = {"annotation", "returns", "type_comment", "decorator_list", "type_params"}


def _walk(node, path=()):
    """``(path, node, parent)`` pre-order; a path is a tuple of ``(field, index or None)``.

    Not entered: strings (no mutation), f-strings, the message of a ``raise``, annotations, decorators.
    """
    stack = [(path, node, None)]
    while stack:
        path, node, parent = stack.pop()
        yield path, node, parent
        if isinstance(node, (ast.JoinedStr, ast.Raise)):
            continue
        children = []
        for name, value in ast.iter_fields(node):
            if name in _SKIP_FIELDS:
                continue
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST) and not _is_docstring(node, name, i):
                        children.append(((*path, (name, i)), item, node))
            elif isinstance(value, ast.AST):
                children.append(((*path, (name, None)), value, node))
        stack.extend(reversed(children))


def _is_docstring(node, field: str, index: int) -> bool:
    if field != "body" or index != 0 or not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                                              ast.ClassDef)):
        return False
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                  str)


def _get(tree, path):
    node = tree
    for name, index in path:
        node = getattr(node, name) if index is None else getattr(node, name)[index]
    return node


def _replaced(tree, path, new):
    """A copy of ``tree`` with the node at ``path`` replaced by ``new`` (None: removed from its list)."""
    tree = copy.deepcopy(tree)
    parent = _get(tree, path[:-1])
    name, index = path[-1]
    if index is None:
        setattr(parent, name, new)
    elif new is None:
        del getattr(parent, name)[index]
    else:
        getattr(parent, name)[index] = new
    return ast.fix_missing_locations(tree)


def _unparse(node) -> str:
    return ast.unparse(ast.fix_missing_locations(copy.deepcopy(node)))


def _canonical(tree) -> str:
    return ast.dump(ast.parse(ast.unparse(tree)))


class _Text:
    """A cell's source, addressed as ast addresses it (lines from 1, columns in UTF-8 bytes)."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line.encode()))
        self.data = source.encode()

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def splice(self, start: int, end: int, text: str) -> str:
        return (self.data[:start] + text.encode() + self.data[end:]).decode()


def _edits(text: _Text, tree, path, new):
    """``(span, text)`` candidates for the mutation, smallest edit first (each is checked by parsing it back)."""
    node = _get(tree, path)
    start, end = text.offset(node.lineno, node.col_offset), text.offset(node.end_lineno, node.end_col_offset)
    if new is None:  # a keyword argument removed, with its comma
        after = re.match(rb"\s*,\s*", text.data[end:])
        if after:
            yield node, text.splice(start, end + after.end(), "")
        before = re.search(rb",\s*$", text.data[:start])
        if before:
            yield node, text.splice(before.start(), end, "")
    else:
        code = _unparse(new)
        yield node, text.splice(start, end, code)
        if isinstance(new, ast.expr):
            yield node, text.splice(start, end, f"({code})")
    mutated = _replaced(tree, path, new)
    for depth in range(len(path) - 1, 0, -1):  # larger and larger spans, each rewritten whole
        outer = _get(tree, path[:depth])
        if not hasattr(outer, "lineno"):
            continue
        code = _unparse(_get(mutated, path[:depth]))
        s, e = text.offset(outer.lineno, outer.col_offset), text.offset(outer.end_lineno, outer.end_col_offset)
        yield outer, text.splice(s, e, code)
        if isinstance(outer, ast.expr):
            yield outer, text.splice(s, e, f"({code})")


def mutants(cell_id: str, source: str) -> list[Mutant]:
    """Every mutant of the solution code of one answer cell, in a fixed order (distinct programs only)."""
    regions = solution_lines(source)
    if not regions:
        return []
    tree = ast.parse(source)
    text = _Text(source)
    seen = {_canonical(tree)}
    found: list[Mutant] = []
    occurrences: dict[tuple, int] = defaultdict(int)
    for path, node, parent in _walk(tree):
        if not hasattr(node, "lineno") or not path:
            continue
        if not any(first <= node.lineno and node.end_lineno <= last for first, last in regions):
            continue
        for operator, new in _mutations(node, parent):
            where = path
            if new == "zero-iterations":  # for x in []:
                where, new = (*path, ("iter", None)), ast.List([], ast.Load())
            wanted = _replaced(tree, where, new)
            try:
                key = _canonical(wanted)
            except (SyntaxError, ValueError):
                continue
            if key in seen:
                continue
            edit = _first_edit(text, tree, where, new, key)
            if edit is None:
                continue
            seen.add(key)
            found.append(_mutant(cell_id, operator, source, edit[1], edit[0], occurrences))
    return found


def _first_edit(text: _Text, tree, path, new, key: str):
    """The smallest ``(span, text)`` edit whose text parses to the mutated tree ``key``; None if none does."""
    for span, candidate in _edits(text, tree, path, new):
        try:
            if _canonical(ast.parse(candidate)) == key:
                return span, candidate
        except SyntaxError:
            continue
    return None


def _mutant(cell_id, operator, source, mutated, span, occurrences) -> Mutant:
    old, new = source.splitlines(), mutated.splitlines()
    first, last = span.lineno, span.end_lineno
    tail = len(old) - last
    before = _show_lines(old[first - 1:last])
    after = _show_lines(new[first - 1:len(new) - tail]) or "（删除）"
    key = (operator, before, after)
    occurrences[key] += 1
    digest = hashlib.sha1("\0".join([cell_id, *key, str(occurrences[key])]).encode()).hexdigest()[:8]
    return Mutant(f"{cell_id}:{operator}:{digest}", cell_id, operator, first, before, after, mutated)


def _show_lines(lines: list[str], limit: int = 200) -> str:
    shown = " ⏎ ".join(line.strip() for line in lines if line.strip())
    return shown if len(shown) <= limit else shown[:limit] + " …"


def all_mutants(nb) -> list[Mutant]:
    """The mutants of every answer cell of ``nb``, cell by cell."""
    return [m for cell in nb.cells if is_answer_cell(cell) for m in mutants(grade_id(cell), cell.source)]


def sample(found: list[Mutant], budget: int | None, seed: str = "") -> list[Mutant]:
    """At most ``budget`` mutants, spread across cells and, within a cell, across operators (deterministic).

    The cells take turns; each cell takes its operators in turn; within an operator the mutants come in an
    order shuffled by a generator seeded from ``seed``, the cell and the operator.  The result keeps the order of
    ``found``.
    """
    if budget is None or budget >= len(found):
        return list(found)
    groups: dict[str, dict[str, list[Mutant]]] = {}
    for m in found:
        groups.setdefault(m.cell, {}).setdefault(m.operator, []).append(m)
    for cell, ops in groups.items():
        for op, items in ops.items():
            random.Random(f"{seed}/{cell}/{op}").shuffle(items)
    queues = {cell: [list(items) for items in ops.values()] for cell, ops in groups.items()}
    turn = {cell: 0 for cell in groups}
    chosen: set[str] = set()
    while len(chosen) < budget and any(any(q) for q in queues.values()):
        for cell, lists in queues.items():
            if len(chosen) >= budget:
                break
            for _ in range(len(lists)):
                items = lists[turn[cell] % len(lists)]
                turn[cell] += 1
                if items:
                    chosen.add(items.pop(0).id)
                    break
    return [m for m in found if m.id in chosen]


# --------------------------------------------------------------------------- which cells a mutant needs

class _TopLevel(ast.NodeVisitor):
    """The names a cell binds in the notebook's namespace (not inside its functions, classes or comprehensions)."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_FunctionDef(self, node):
        self.names.add(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node):
        pass

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

    def visit_Import(self, node):
        self.names.update((a.asname or a.name).split(".")[0] for a in node.names)

    visit_ImportFrom = visit_Import

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self.names.add(node.id)


def _names(source: str) -> tuple[set[str], set[str]]:
    """``(defined, needed)``: names a cell binds at its top level (or declares global), names it reads that it
    does not bind itself (so they must come from earlier cells)."""
    tree = ast.parse(source)
    top = _TopLevel()
    top.visit(tree)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Load, ast.Del)):
            used.add(node.id)
        elif isinstance(node, ast.Global):
            top.names.update(node.names)
    return top.names, used - top.names


def plan(nb) -> dict[str, dict]:
    """For each answer cell: ``{"tests": [test cell ids it affects], "cells": [indices of the cells to run]}``.

    Always run: every code cell that is not a test cell (setup and answer cells, cheap definitions).  Then the
    test cells that read a name the answer cell defines, directly or through another non-test cell that reads
    one, and every earlier test cell that defines a name one of the cells to run reads.
    """
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    names = {i: _names(c.source) for i, c in code}
    tests = {i for i, c in code if is_test_cell(c)}
    base = [i for i, _ in code if i not in tests]
    out = {}
    for index, cell in code:
        if not is_answer_cell(cell):
            continue
        reach = set(names[index][0])
        grew = True
        while grew:  # names of other non-test cells that read what this one defines
            grew = False
            for i in base:
                if i != index and names[i][1] & reach and not names[i][0] <= reach:  # reads it, defines more
                    reach |= names[i][0]
                    grew = True
        affected = sorted(i for i in tests if i > index and names[i][1] & reach)
        run = set(base) | set(affected)
        todo = list(run)
        while todo:
            i = todo.pop()
            for j in tests:
                if j < i and j not in run and names[j][0] & names[i][1]:
                    run.add(j)
                    todo.append(j)
        out[grade_id(cell)] = {"tests": [grade_id(nb.cells[i]) for i in affected], "cells": sorted(run)}
    return out


# --------------------------------------------------------------------------- grading

@dataclasses.dataclass
class Verdict:
    """What the tests made of one mutant.

    Attributes
    ----------
    mutant : Mutant
    tests : list of str
        The test cells that use the mutated cell.
    visible, full : dict
        ``{test cell: CellRun}`` with the visible tests only, and with the hidden ones too.
    outcome : str
        ``"visible"`` (a visible check caught it), ``"hidden"`` (only hidden checks did), ``"survived"``
        or ``"equivalent"`` (survived and declared equivalent).
    breaks_point : bool
        An essential check failed under full grading: the mutant misses the exercise's point.
    capped : bool
        Some test cell kept at most a third of its points (full grading).
    visibly_essential : bool
        With the visible tests alone, some test cell failed an essential check (or scored 0): Validate tells the
        student that the point is missed.
    hint : str
        The matched mistake models' names, or 只有观察 (with what went wrong, when the cell failed outright).
    problem : str or None
        Why this mutant fails the audit.
    reason : str or None
        The declared reason, for an equivalent.
    """

    mutant: Mutant
    tests: list
    visible: dict
    full: dict
    outcome: str = "survived"
    breaks_point: bool = False
    capped: bool = False
    visibly_essential: bool = True
    hint: str = ""
    problem: str | None = None
    reason: str | None = None


def _lost(run: CellRun) -> bool:
    return run.score < run.points - EPS


def _essential_failed(run: CellRun) -> bool:
    return any(r.get("essential") and not r.get("ok") for r in run.records)


def _hint(runs: Iterable[CellRun]) -> str:
    names, notes = [], []
    for run in runs:
        if not _lost(run):
            continue
        for record in run.records:
            if not record.get("ok") and record.get("mistake") and record["mistake"] not in names:
                names.append(record["mistake"])
        if run.timed_out:
            notes.append("超时")
        elif run.error:
            notes.append(f"单元出错：{run.error.split(':')[0]}")
        elif run.stderr:
            notes.append("有 stderr 输出")
    if names:
        return "、".join(names)
    return "只有观察" + (f"（{'；'.join(dict.fromkeys(notes))}）" if notes else "")


def judge(mutant: Mutant, tests: list, visible: dict, full: dict, equivalents: dict) -> Verdict:
    """Classify one graded mutant (see :class:`Verdict`)."""
    verdict = Verdict(mutant, tests, visible, full)
    seen_visible = any(_lost(visible[t]) for t in tests)
    seen_full = any(_lost(full[t]) for t in tests)
    declared = equivalents.get(mutant.id)
    if seen_visible:
        verdict.outcome = "visible"
    elif seen_full:
        verdict.outcome = "hidden"
    else:
        verdict.outcome = "equivalent" if declared else "survived"
    broken = [t for t in tests if _essential_failed(full[t])]
    verdict.breaks_point = bool(broken)
    verdict.capped = any(full[t].score <= full[t].points * CAP + EPS for t in tests)
    verdict.visibly_essential = any(_essential_failed(visible[t]) or visible[t].score <= EPS for t in tests)
    verdict.hint = "" if verdict.outcome in ("survived", "equivalent") else _hint(
        (visible if seen_visible else full)[t] for t in tests)
    if declared:
        verdict.reason = declared
    if verdict.outcome == "survived":
        verdict.problem = "存活：没有任何检查发现它，也没有声明为等价"
    elif verdict.outcome == "equivalent":
        pass
    elif declared:
        verdict.problem = "声明为等价，却被检查发现了：删掉 grading/audit/ 里的这条声明"
    elif verdict.breaks_point:
        uncapped = [t for t in broken if full[t].score > full[t].points * CAP + EPS]
        if uncapped:
            verdict.problem = f"破坏了要点却没有封顶：{'、'.join(uncapped)} 的得分超过三分之一"
        elif not verdict.visibly_essential:
            verdict.problem = "破坏了要点，但可见的要点检查没有发现它（只有隐藏测试发现）"
    return verdict


@dataclasses.dataclass
class Report:
    """An audit of one assignment."""

    assignment: str
    verdicts: list
    cells: dict  # answer cell -> {"tests": [...], "mutants": n generated}
    errors: list  # Chinese lines: the reference itself failing, unknown declarations
    budget: int | None = None
    total: int = 0
    seconds: float = 0.0

    @property
    def problems(self) -> list:
        return [v for v in self.verdicts if v.problem]

    @property
    def ok(self) -> bool:
        return not self.problems and not [e for e in self.errors if not e.startswith("提醒")]

    def counts(self, cell: str | None = None) -> dict:
        chosen = [v for v in self.verdicts if cell is None or v.mutant.cell == cell]
        caught = [v for v in chosen if v.outcome in ("visible", "hidden")]
        return {
            "mutants": len(chosen),
            "visible": sum(v.outcome == "visible" for v in chosen),
            "hidden": sum(v.outcome == "hidden" for v in chosen),
            "survived": sum(v.outcome == "survived" for v in chosen),
            "equivalent": sum(v.outcome == "equivalent" for v in chosen),
            "breaks_point": sum(v.breaks_point for v in chosen),
            "capped": sum(v.capped for v in caught),
            "not_capped": sum(not v.capped for v in caught),
            "named": sum(not v.hint.startswith("只有观察") for v in caught),
            "problems": sum(bool(v.problem) for v in chosen),
        }


def read_equivalents(assignment: str, folder: pathlib.Path = EQUIVALENTS) -> dict[str, str]:
    """``{mutant id: reason}`` declared in ``grading/audit/<assignment>.toml`` (empty when there is none)."""
    path = folder / f"{assignment}.toml"
    if not path.exists():
        return {}
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    found = {}
    for key, entry in data.get("equivalent", {}).items():
        reason = entry.get("reason", "").strip() if isinstance(entry, dict) else ""
        if not reason:
            raise ValueError(f"{path}：等价变异体 {key} 没有写理由（reason）")
        found[key] = reason
    return found


def audit(assignment: str, nb=None, *, budget: int | None = None, timeout: float | None = None,
          equivalents: dict | None = None, progress: Callable[[int, int], None] | None = None,
          select: Callable[[Mutant], bool] | None = None) -> Report:
    """Generate, grade and classify the mutants of ``assignment`` (``nb``: its source notebook, read if None).

    Parameters
    ----------
    budget : int, optional
        Grade at most this many mutants, sampled across cells and operators (:func:`sample`).
    timeout : float, optional
        Seconds a cell may run under a mutant; default: :data:`MIN_TIMEOUT`, or 20 times the reference's
        slowest run when that is more.
    equivalents : dict, optional
        ``{id: reason}``; default: :func:`read_equivalents`.
    progress : callable, optional
        Called as ``progress(done, total)`` after each mutant.
    select : callable, optional
        Grade only the mutants for which ``select(mutant)`` is true (before the budget's sample).
    """
    from grading.runner import source_notebook

    started = time.perf_counter()
    nb = source_notebook(assignment) if nb is None else nb
    equivalents = read_equivalents(assignment) if equivalents is None else equivalents
    layout = plan(nb)
    found = all_mutants(nb)
    chosen = sample([m for m in found if layout[m.cell]["tests"] and (select is None or select(m))], budget,
                    seed=assignment)
    errors = [] if found else ["提醒：没有可以变异的代码答案（答案单元里没有 ### BEGIN SOLUTION 之间的代码，"
                               "或只有字符串，例如测验的选项字母）"]
    slowest, broken = 0.0, set()
    references: dict[tuple, tuple] = {}
    wanted = {m.cell for m in chosen}
    for cell, info in layout.items():
        if not info["tests"]:
            errors.append(f"提醒：没有测试单元按名字用到答案单元 {cell} 定义的名字（例如测验从 globals() 读答案），"
                          "它的变异体没有评")
        if cell not in wanted:
            continue
        key = tuple(info["cells"])
        if key not in references:  # the reference answer, as the mutants will be run
            t0 = time.perf_counter()
            full = grade(nb, hidden=True, only=info["cells"], split=True)
            slowest = max(slowest, time.perf_counter() - t0)
            twins = {t: r.visible for t, r in full.items()}
            visible = twins if None not in twins.values() else grade(nb, hidden=False, only=info["cells"])
            references[key] = (visible, full)
        visible, full = references[key]
        bad = {t: runs[t] for runs in (visible, full) for t in info["tests"] if _lost(runs[t])}
        if bad:
            whole = grade(nb)
            if any(_lost(whole[t]) for t in info["tests"]):
                errors.append(f"{cell}：参考答案本身没有得满分（" + "，".join(
                    f"{t} 得 {r.score:g}/{r.points:g}" + (f"，{r.error}" if r.error else "")
                    for t, r in bad.items()) + "），它的变异体没有评")
                broken.add(cell)
            else:  # the cells chosen by name missed something: run them all for this cell
                info["cells"] = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    limit = timeout or max(MIN_TIMEOUT, 20 * slowest)
    generated = {m.id for m in found}
    for key in sorted(set(equivalents) - generated):
        errors.append(f"提醒：grading/audit/{assignment}.toml 声明的等价变异体 {key} 已不存在（答案改过了？）")
    verdicts = []
    todo = [m for m in chosen if m.cell not in broken]
    for done, mutant in enumerate(todo, 1):
        info = layout[mutant.cell]
        replace = {mutant.cell: mutant.source}
        full = grade(nb, replace=replace, hidden=True, only=info["cells"], timeout=limit, split=True)
        if all(full[t].visible is not None for t in info["tests"]):
            visible = {t: full[t].visible for t in info["tests"]}
        else:
            visible = grade(nb, replace=replace, hidden=False, only=info["cells"], timeout=limit)
        verdicts.append(judge(mutant, info["tests"], visible, full, equivalents))
        if progress:
            progress(done, len(todo))
    cells = {c: {"tests": layout[c]["tests"], "mutants": sum(m.cell == c for m in found)} for c in layout}
    return Report(assignment, verdicts, cells, errors, budget, len(found), time.perf_counter() - started)


# --------------------------------------------------------------------------- output

OUTCOMES = {"visible": "可见检查", "hidden": "只有隐藏检查", "survived": "存活", "equivalent": "等价（已声明）"}
COLUMNS = [("mutants", "变异体"), ("visible", "可见检查抓住"), ("hidden", "只被隐藏检查抓住"), ("survived", "存活"),
           ("equivalent", "等价"), ("breaks_point", "破坏要点"), ("capped", "封顶"), ("not_capped", "未封顶"),
           ("named", "提示点名错误")]


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _table(rows: list[list[str]]) -> str:
    widths = [max(_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c + " " * (w - _width(c)) if i == 0 else " " * (w - _width(c)) + c
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _scores(runs: dict, tests: list) -> str:
    return "，".join(f"{runs[t].score:.3g}/{runs[t].points:g}" for t in tests) or "—"


def summary(report: Report) -> str:
    """The terminal's Chinese summary: one row per answer cell, the problems, a verdict line."""
    rows = [["答案单元", *(label for _, label in COLUMNS)]]
    for cell in report.cells:
        counts = report.counts(cell)
        rows.append([cell, *(str(counts[k]) for k, _ in COLUMNS)])
    total = report.counts()
    rows.append(["合计", *(str(total[k]) for k, _ in COLUMNS)])
    sampled = (f"，按预算抽取了 {total['mutants']} 个" if report.budget is not None and report.budget < report.total
               else "")
    lines = [f"{report.assignment}：共生成 {report.total} 个变异体{sampled}，用时 {report.seconds:.1f} 秒", "",
             _table(rows), ""]
    for error in report.errors:
        lines.append(("" if error.startswith("提醒") else "错误：") + error)
    if report.problems:
        lines.append(f"需要处理的变异体（{len(report.problems)} 个）：")
        for v in report.problems:
            lines.append(f"  {v.mutant.id}  {v.mutant.change}")
            lines.append(f"      {v.problem}；得分 可见 {_scores(v.visible, v.tests)}，全部 {_scores(v.full, v.tests)}")
    lines.append("")
    lines.append("结论：通过" if report.ok else "结论：没有通过（见上）")
    return "\n".join(lines) + "\n"


_CSS = """
body { font-family: "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; }
code { font-family: "DejaVu Sans Mono", monospace; font-size: 0.9em; }
tr.problem td { background: #fde8e8; }
tr.survived td, tr.hidden td { background: #fff6dd; }
tr.equivalent td { color: #666; }
.ok { color: #1a7f37; } .bad { color: #b42318; }
"""


def page(report: Report) -> str:
    """The audit as one offline HTML page (no script, no remote asset)."""
    e = html.escape
    total = report.counts()
    out = ["<!DOCTYPE html>", '<html lang="zh-CN"><head><meta charset="utf-8">',
           f"<title>{e(report.assignment)} 的变异分析</title><style>{_CSS}</style></head><body>",
           f"<h1>{e(report.assignment)} 的变异分析（make audit）</h1>",
           f"<p>共生成 {report.total} 个变异体，评了 {total['mutants']} 个"
           + (f"（预算 {report.budget}，按答案单元和算子均匀抽取）" if report.budget is not None else "")
           + f"，用时 {report.seconds:.1f} 秒。每个变异体先只用可见测试评分（学生点 Validate 时看到的），"
           "再连同隐藏测试评分（最终成绩）。</p>",
           f'<p class="{"ok" if report.ok else "bad"}"><strong>结论：{"通过" if report.ok else "没有通过"}</strong>'
           f"（{len(report.problems)} 个变异体需要处理）</p>"]
    for error in report.errors:
        out.append(f"<p class=\"{'ok' if error.startswith('提醒') else 'bad'}\">{e(error)}</p>")
    out.append("<h2>各答案单元</h2><table><tr><th>答案单元</th><th>测试单元</th>"
               + "".join(f"<th>{e(label)}</th>" for _, label in COLUMNS) + "</tr>")
    for cell, info in report.cells.items():
        counts = report.counts(cell)
        out.append(f"<tr><td><code>{e(cell)}</code></td><td>{e('、'.join(info['tests']) or '—')}</td>"
                   + "".join(f'<td class="num">{counts[k]}</td>' for k, _ in COLUMNS) + "</tr>")
    out.append("<tr><th>合计</th><td></td>" + "".join(f'<td class="num">{total[k]}</td>' for k, _ in COLUMNS)
               + "</tr></table>")
    out.append("<h2>逐个变异体</h2>")
    for cell in report.cells:
        chosen = [v for v in report.verdicts if v.mutant.cell == cell]
        if not chosen:
            continue
        out.append(f"<h3><code>{e(cell)}</code></h3><table><tr><th>编号</th><th>算子</th><th>变异</th><th>结果</th>"
                   "<th>得分（可见）</th><th>得分（全部）</th><th>破坏要点</th><th>封顶</th><th>提示</th>"
                   "<th>问题或理由</th></tr>")
        for v in chosen:
            m = v.mutant
            klass = "problem" if v.problem else v.outcome
            out.append(
                f'<tr class="{klass}"><td><code>{e(m.id)}</code></td><td>{e(OPERATORS[m.operator])}</td>'
                f"<td>第 {m.line} 行：<code>{e(m.before)}</code> → <code>{e(m.after)}</code></td>"
                f"<td>{e(OUTCOMES[v.outcome])}</td><td>{e(_scores(v.visible, v.tests))}</td>"
                f"<td>{e(_scores(v.full, v.tests))}</td><td>{'是' if v.breaks_point else '否'}</td>"
                f"<td>{'是' if v.capped else '否'}</td><td>{e(v.hint or '—')}</td>"
                f"<td>{e(v.problem or v.reason or '')}</td></tr>")
        out.append("</table>")
    out.append("<h2>怎样读这一页</h2><ul>"
               "<li><strong>可见检查</strong>：只用可见测试评分时就丢了分，学生点 Validate 就能发现。"
               "<strong>只有隐藏检查</strong>：只在最终评分时丢分。<strong>存活</strong>：哪一项检查都没有发现，"
               "要么补一项检查，要么它确实不改变行为，在 <code>grading/audit/&lt;作业&gt;.toml</code> "
               "里声明为等价并写明理由。</li>"
               "<li><strong>破坏要点</strong>：全部测试下有一项【要点】检查没有通过；这样的变异体必须封顶"
               "（这个单元最多得三分之一），并且只用可见测试时就有【要点】检查没有通过。</li>"
               "<li><strong>提示</strong>：没有通过的检查点名的错误模型（Mistake 的名字）；"
               "“只有观察”表示反馈只说了看到的结果（哪个下标、期望与实际），没有点名是哪一种错误。</li></ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
