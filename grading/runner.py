"""Run an nbgrader source notebook in this process and grade each test cell as nbgrader would.

Used by ``make audit`` (``grading/audit.py``: every mutant of a reference answer
graded twice), by the tests that hold the kept wrong and right solutions
(``grading/wrong/``, ``grading/right/``: through ``tests/nbrun.py``) and by the
noisy sheets (``tests/test_noisy_answers.py``).  Solution cells can be replaced,
the hidden tests kept or cut out (what a student sees before grading), a subset
of the cells executed, and each test cell is scored by nbgrader's own rule
(``nbgrader.utils.determine_grade``):

* a cell that raises scores 0;
* **any output on stderr scores 0**: what the cell writes to ``sys.stderr``
  (``print(..., file=sys.stderr)``, ``logging``) and every warning the kernel
  would show (Python's default filters, as in a kernel: ``DeprecationWarning``
  only from ``__main__``), which a kernel sends to the notebook as a ``stderr``
  stream; and what reaches file descriptor 2 (``os.write(2, ...)``, C code),
  which the kernel forwards from a thread, so that in nbgrader it lands in the
  cell or just after it, by chance: the runner counts it, so no test cell
  relies on that luck;
* otherwise the value of the cell's last expression, read as a number, is the
  partial credit (``checks.score()``); a cell without one, or whose value is
  not a number, earns full points, as in nbgrader.

``tests/test_noisy_answers.py`` holds the rule against a real ``nbgrader
autograde`` of one notebook.  Running in-process is much faster than a kernel
(milliseconds a cell); the scores are the numbers nbgrader reads.

Each test cell's checks are kept too: ``Checks.records`` (``{"what", "ok",
"essential", "mistake"}``) of the collector the cell built, for the audit.  A
time limit per cell (``timeout``, seconds; main thread only, by ``SIGALRM``)
interrupts a cell that does not end, as nbgrader's ``Execute.timeout`` does:
the cell scores 0 and the next ones run.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import io
import logging
import os
import pathlib
import re
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import nbformat

from attnlib.grading import _KEEP_CHARS, _Sink  # a text stream keeping the first _KEEP_CHARS characters

ROOT = pathlib.Path(__file__).resolve().parents[1]
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[^\n]*\n.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.S | re.M)
SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION[^\n]*$", re.S | re.M)
CELL_MARK = re.compile(r"^# %% (\S+)[^\n]*\n", re.M)


def source_notebook(assignment: str) -> nbformat.NotebookNode:
    """The instructor's source notebook ``solutions/<assignment>/<assignment>.ipynb``."""
    path = ROOT / "solutions" / assignment / f"{assignment}.ipynb"
    if not path.exists():
        known = "、".join(sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()))
        raise FileNotFoundError(f"没有名为 {assignment} 的作业（{path} 不存在）。已有的作业：{known}")
    return nbformat.read(path, as_version=4)


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def is_test_cell(cell) -> bool:
    """An autograded test cell: graded, code, not a solution."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


def is_answer_cell(cell) -> bool:
    """An autograded answer cell: a code cell the student fills (``solution``), graded through test cells."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("solution", False) and not meta.get("grade", False)


def points(cell) -> float:
    return float(cell.get("metadata", {}).get("nbgrader", {}).get("points", 0) or 0)


# --------------------------------------------------------------------------- kept solutions

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


# --------------------------------------------------------------------------- running

class CellTimeout(BaseException):  # noqa: N818 - like KeyboardInterrupt, which nbgrader sends on a timeout
    """Raised in a cell that ran past the time limit (a BaseException, so no ``except Exception`` swallows it)."""


@dataclass
class CellRun:
    """One executed test cell, graded as nbgrader grades it.

    Attributes
    ----------
    id : str
        The cell's grade id.
    points : float
        Its points in nbgrader.
    score : float
        What nbgrader would give it (0 after an error, a timeout or any stderr output).
    output : str
        What it printed on stdout (and the error, when it raised).
    stderr : str
        What reached stderr while it ran (warnings as a kernel shows them); non-empty means a score of 0.
    error : str or None
        ``"Type: message"`` of the exception that ended it.
    timed_out : bool
        It ran past the time limit.
    records : list of dict
        ``Checks.records`` of the collector this cell built (empty when it built none).
    visible : CellRun or None
        With ``grade(..., split=True)``: the same cell graded with its visible tests only, read at the start of
        its hidden tests (None where the cell cannot be split so).
    """

    id: str
    points: float
    score: float = 0.0
    output: str = ""
    stderr: str = ""
    error: str | None = None
    timed_out: bool = False
    records: list = field(default_factory=list)
    visible: CellRun | None = None


def run(nb, *, replace: dict[str, str] | None = None, hidden: bool = True) -> dict[str, float]:
    """Execute the code cells of ``nb`` in one fresh namespace; return ``{test cell id: score}``.

    ``replace`` swaps the source of cells by grade id; with ``hidden=False`` the
    hidden tests are cut out first.  A test cell that raises or writes to stderr scores 0, as in nbgrader.
    """
    return execute(nb, replace=replace, hidden=hidden)[0]


def execute(nb, *, replace: dict[str, str] | None = None, hidden: bool = True
            ) -> tuple[dict[str, float], dict[str, str]]:
    """Like :func:`run`, and also return what each test cell printed: ``({id: score}, {id: stdout})``.

    The printed text ends with what the cell wrote to stderr, if anything (that is why it scored 0).
    """
    cells = grade(nb, replace=replace, hidden=hidden)
    printed = {k: c.output + (f"\n[stderr] {c.stderr}" if c.stderr else "") for k, c in cells.items()}
    return {k: c.score for k, c in cells.items()}, printed


def grade(nb, *, replace: dict[str, str] | None = None, hidden: bool = True, only: Iterable[int] | None = None,
          timeout: float | None = None, split: bool = False) -> dict[str, CellRun]:
    """Execute the code cells of ``nb`` in one fresh namespace and grade every test cell that ran.

    Parameters
    ----------
    nb : NotebookNode
    replace : dict, optional
        ``{grade id: source}`` of cells to run instead of the notebook's.
    hidden : bool
        Keep the hidden tests (grading); ``False`` cuts them out (Validate).
    only : iterable of int, optional
        Indices (in ``nb.cells``) of the cells to execute; the others are skipped.
    timeout : float, optional
        Seconds each cell may run (main thread only; elsewhere no limit).
    split : bool
        With ``hidden=True``: also grade each test cell whose hidden tests are its tail (followed by nothing but
        ``checks.score()``) as the visible tests alone would, in the same run (``CellRun.visible``): the cell's
        state when its hidden tests begin is what the visible-only cell ends with.  Halves the audit's runs.

    Returns
    -------
    dict
        ``{test cell id: CellRun}`` in notebook order.
    """
    replace = dict(replace or {})
    unknown = set(replace) - {grade_id(c) for c in nb.cells}
    if unknown:
        raise KeyError(f"no cells {sorted(unknown)} in the notebook")
    chosen = None if only is None else set(only)
    namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    results: dict[str, CellRun] = {}
    with _kernel_streams() as stderr:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or (chosen is not None and index not in chosen):
                continue
            source = replace.get(grade_id(cell), cell.source)
            if not hidden:
                source = HIDDEN.sub("", source)
            before = namespace.get("checks")
            marked = _split_source(source) if split and hidden and is_test_cell(cell) else None
            result = _run_cell(marked or source, namespace, stderr, timeout, before if marked else _NO_SPLIT)
            if not is_test_cell(cell):
                continue
            result.id, result.points = grade_id(cell), points(cell)
            checks = namespace.get("checks")
            if checks is not None and checks is not before:
                result.records = [dict(r) for r in getattr(checks, "records", [])]
            result.score = _score(result)
            if marked:
                seen = result.visible
                if seen is None:  # it ended before its hidden tests: the visible-only cell ends the same way
                    seen = CellRun(result.id, result.points, None, result.output, result.stderr, result.error,
                                   result.timed_out, list(result.records))
                seen.id, seen.points = result.id, result.points
                seen.score = _score(seen)
                result.visible = seen
            results[result.id] = result
    return results


_NO_SPLIT = object()
_SPLIT_CALL = "__runner_visible_ends_here__"
_HIDDEN_TAIL = re.compile(r"^([ \t]*)### BEGIN HIDDEN TESTS[^\n]*\n(?:.*?)^[ \t]*### END HIDDEN TESTS[^\n]*\n"
                          r"(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]*checks\.score\(\)[ \t]*\n?\s*\Z", re.S | re.M)


def _split_source(source: str) -> str | None:
    """``source`` with a call marking where its visible tests end, or None when its hidden tests are not its tail."""
    if source.count("### BEGIN HIDDEN TESTS") != 1:
        return None
    found = _HIDDEN_TAIL.search(source)
    if not found or found.group(1):
        return None
    start = found.start()
    end = source.index("\n", start) + 1
    return source[:start] + f"{_SPLIT_CALL}()\n" + source[end:]


def _score(result: CellRun) -> float:
    """nbgrader's ``determine_grade`` for a code cell, from what the cell did."""
    if result.error is not None or result.timed_out or result.stderr:
        return 0.0
    value = result.score  # the cell's last value, parked here by _run_cell
    if value is None:
        return result.points
    try:
        grade = float(repr(value))  # nbgrader reads the text/plain form of the execute_result
    except (TypeError, ValueError):
        return result.points
    if grade < 0:
        return result.points
    if grade > result.points:  # nbgrader refuses it ("partial credit cannot be greater than maximum points")
        result.error = f"ValueError: 部分得分 {grade} 大于本单元的分值 {result.points}"
        return 0.0
    return grade


def _run_cell(source: str, namespace: dict, stderr: _Stderr, timeout: float | None, split_from=_NO_SPLIT) -> CellRun:
    """Run one cell's ``source`` in ``namespace``; stdout, stderr, the error and the last value are kept.

    With ``split_from`` (the ``checks`` bound before the cell), the cell's call to the split marker records the
    visible-only result in ``result.visible`` (its score field holding the value ``checks.score()`` returns).
    """
    result = CellRun(id="", points=0.0, score=None)
    out = io.StringIO()
    with stderr.cell() as err, contextlib.redirect_stdout(out), _time_limit(timeout):
        if split_from is not _NO_SPLIT:
            namespace[_SPLIT_CALL] = lambda: _visible_part(result, namespace, split_from, out, err)
        try:
            result.score = _exec(source, namespace)
        except CellTimeout:
            result.timed_out, result.error = True, f"CellTimeout: 单元运行超过 {timeout:g} 秒，被中断"
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: the cell failed, as in a kernel
            result.error = f"{type(exc).__name__}: {exc}"
    namespace.pop(_SPLIT_CALL, None)
    result.output = out.getvalue() + (f"\n{result.error}\n" if result.error else "")
    result.stderr = err.text
    return result


def _visible_part(result: CellRun, namespace: dict, before, out: io.StringIO, err) -> None:
    """At the start of the hidden tests: what the visible-only cell would end with (its ``checks.score()``)."""
    checks = namespace.get("checks")
    seen = CellRun(id="", points=0.0, score=None, stderr=err.so_far())
    if checks is None or checks is before:  # the cell built no collector: the visible cell would fail on its last line
        seen.error = "NameError: 本单元没有建立 checks"
    else:
        seen.records = [dict(r) for r in getattr(checks, "records", [])]
        try:
            twin = copy.deepcopy(checks)
        except Exception:  # noqa: BLE001 - a collector that cannot be deep-copied: a shallow copy, score() only reads
            twin = copy.copy(checks)
        summary = io.StringIO()
        try:
            with contextlib.redirect_stdout(summary):
                seen.score = twin.score()
        except Exception as exc:  # noqa: BLE001 - as the visible cell's last line would raise it
            seen.error = f"{type(exc).__name__}: {exc}"
        seen.output = out.getvalue() + summary.getvalue()
    seen.stderr = err.so_far()
    result.visible = seen


def _exec(source: str, namespace: dict):
    """Run ``source``; return the value of its last line when that is an expression (as Jupyter shows it)."""
    body, last = _compiled(source)
    exec(body, namespace)  # noqa: S102 - the course's own notebooks
    if last is not None:
        return eval(last, namespace)  # noqa: S307
    return None


@functools.lru_cache(maxsize=256)
def _compiled(source: str):
    """``(code of all but the last line, code of the last line if it is an expression, else None)``.

    Cached: the audit runs the same test cells once per mutant.
    """
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = compile(tree, "<cell>", "exec")
    return body, None if last is None else compile(ast.Expression(last.value), "<cell>", "eval")


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raise :class:`CellTimeout` in the block after ``seconds`` (only in the main thread; else no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CellTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Stderr(io.TextIOBase):
    """``sys.stderr`` for a whole run, as a kernel's: one stream object whose text goes to the running cell.

    A logging handler made in one cell (``logging.warning`` calls ``basicConfig``, which binds the current
    ``sys.stderr``) still writes into the cell that logs later, as in a kernel.
    """

    encoding = "utf-8"

    def __init__(self):
        super().__init__()
        self.target = _Sink()
        self.fd_file = None

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        return self.target.write(text)

    def so_far(self) -> str:
        """What the running cell wrote to stderr up to now (``sys.stderr`` and fd 2)."""
        _flush_stderr()
        raw = os.pread(self.fd_file.fileno(), _KEEP_CHARS, 0) if self.fd_file is not None else b""
        return self.target.getvalue() + raw.decode("utf-8", "replace")

    @contextlib.contextmanager
    def cell(self):
        """Collect one cell's stderr; yields this stream (``so_far()``), whose ``text`` is set afterwards."""
        self.target = _Sink()
        with tempfile.TemporaryFile(mode="w+b") as tmp:
            self.fd_file = tmp
            saved = _redirect_fd2(tmp)
            try:
                yield self
            finally:
                _flush_stderr()
                if saved is not None:
                    os.dup2(saved, 2)
                    os.close(saved)
                self.text = self.so_far()
                self.fd_file = None


@contextlib.contextmanager
def _kernel_streams():
    """stderr, warnings and logging as in a fresh kernel, for one run; yields the run's :class:`_Stderr`.

    Warning filters are Python's defaults and a shown warning is written to ``sys.stderr``; the root logger
    starts without a handler (a test runner's capture handler is set aside), so a logged warning reaches
    ``logging.lastResort`` or the handler ``basicConfig`` binds to ``sys.stderr``.  The stream that was
    ``sys.stderr`` before (a handler may hold it) writes into the run's too.
    """
    stream = _Stderr()

    def show(message, category, filename, lineno, file=None, line=None):
        with contextlib.suppress(Exception):
            (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))

    held, patched = sys.stderr, False
    with contextlib.suppress(AttributeError, TypeError):
        held.write = stream.write
        patched = True
    handlers = logging.root.handlers[:]
    logging.root.handlers.clear()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(stream):
            warnings.resetwarnings()
            for action, category, module in (("ignore", ResourceWarning, ""), ("ignore", ImportWarning, ""),
                                             ("ignore", PendingDeprecationWarning, ""),
                                             ("ignore", DeprecationWarning, ""),
                                             ("default", DeprecationWarning, "__main__")):
                warnings.filterwarnings(action, category=category, module=module)
            warnings.showwarning = show
            yield stream
    finally:
        for handler in logging.root.handlers[:]:  # those the run made (basicConfig) write to its stream: close
            if handler not in handlers:
                logging.root.removeHandler(handler)
        logging.root.handlers[:] = handlers
        if patched:
            with contextlib.suppress(AttributeError, TypeError):
                del held.write


def _flush_stderr() -> None:
    with contextlib.suppress(Exception):
        sys.__stderr__.flush()


def _redirect_fd2(tmp) -> int | None:
    try:
        saved = os.dup(2)
    except OSError:
        return None
    _flush_stderr()
    os.dup2(tmp.fileno(), 2)
    return saved


# --------------------------------------------------------------------------- adversarial sheets

SHEETS = ("noisy", "chatty", "reseed")
"""Kinds of correct answers that must keep full marks (the grading contract), built by :func:`sheet`."""

_NOISE = {
    # every call warns, prints to sys.stderr, writes to fd 2 and logs a warning (logging writes to stderr)
    "noisy": ("import logging as _noise_logging, os as _noise_os, sys as _noise_sys, warnings as _noise_warnings",
              "_noise_warnings.warn('调试：进入 {name}', UserWarning, stacklevel=2)",
              "print('调试：进入 {name}', file=_noise_sys.stderr)",
              "_noise_os.write(2, '调试：{name}（fd 2）\\n'.encode())",
              "_noise_logging.warning('调试：{name}（logging）')"),
    # every call prints a few lines on stdout
    "chatty": ("print('调试：进入 {name}')", "print('-' * 40)"),
    # every call reseeds NumPy's and (when loaded) PyTorch's global random generators
    "reseed": ("import numpy as _noise_np, sys as _noise_sys",
               "_noise_np.random.seed(12345)",
               "_noise_sys.modules['torch'].manual_seed(12345) if 'torch' in _noise_sys.modules else None"),
}


def sheet(nb, kind: str = "noisy") -> nbformat.NotebookNode:
    """A copy of ``nb`` whose answer cells are still correct but misbehave on every call of their functions.

    ``noisy``: each function and method the answer cells define warns (``warnings.warn``), prints to
    ``sys.stderr``, writes to file descriptor 2 and logs a warning, every time it is called, and each answer
    cell does the same once at its top level.  ``chatty``: the same on stdout.  ``reseed``: each call reseeds
    NumPy's and PyTorch's global random generators.  The grading contract says every one of these keeps full
    marks; nbgrader zeroes a test cell with any stderr output, so a test cell must run the student's code
    through ``checks.call`` (``tests/test_noisy_answers.py``).  The statements go first in each function's body
    (after its docstring); the rest of the cell is kept as written.
    """
    if kind not in _NOISE:
        raise ValueError(f"没有这种答卷：{kind!r}（可选 {', '.join(SHEETS)}）")
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if is_answer_cell(cell):
            cell.source = misbehave(cell.source, kind)
    return nb


def misbehave(source: str, kind: str = "noisy") -> str:
    """``source`` with the statements of ``kind`` (see :func:`sheet`) first in every function and at the top."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    inserts = []  # (line index, indentation, name)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[1] if (len(body) > 1 and isinstance(body[0], ast.Expr)
                                and isinstance(body[0].value, ast.Constant)
                                and isinstance(body[0].value.value, str)) else body[0]
            if first.lineno == node.lineno or (body[0] is not first and body[0].end_lineno == first.lineno):
                return _misbehave_rewritten(tree, kind)  # a one-line def: no line to insert before
            inserts.append((first.lineno - 1, " " * first.col_offset, node.name))
    for index, indent, name in sorted(inserts, reverse=True):
        lines[index:index] = [f"{indent}{line.format(name=name)}\n" for line in _NOISE[kind]]
    top = "".join(f"{line.format(name='answer cell')}\n" for line in _NOISE[kind])
    return top + "".join(lines)


def _misbehave_rewritten(tree: ast.Module, kind: str) -> str:
    """:func:`misbehave` by rewriting the tree (comments are lost): for code where lines cannot be inserted."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = (isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
                   and isinstance(node.body[0].value.value, str))
            noise = ast.parse("\n".join(line.format(name=node.name) for line in _NOISE[kind])).body
            node.body[1 if doc else 0:1 if doc else 0] = noise
    top = "".join(f"{line.format(name='answer cell')}\n" for line in _NOISE[kind])
    return top + ast.unparse(tree) + "\n"
