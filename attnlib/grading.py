"""Helpers for the visible and hidden test cells of the course's nbgrader assignments.

A test cell builds one :class:`Checks` collector, runs the student's function
through it, records several checks and ends with ``checks.score()``::

    from attnlib.grading import Checks
    checks = Checks(points=3, forbid="softmax")
    out = checks.call(softmax_stable, x, axis=0)
    checks.close(out, expected, "axis=0 时的结果")
    checks.score()          # last expression: nbgrader reads it as partial credit

Why each piece exists (nbgrader 0.9 behaviour):

* a test cell's ``execute_result`` that parses as a number is its score, so
  ``score()`` returns ``points * passed / total`` instead of raising;
* any ``stderr`` output (a warning!) in a test cell zeroes it, so the student's
  code runs inside :func:`capture_stderr`, and the checks themselves never warn;
* a student's function must not just call the attnlib reference: while it runs,
  :func:`forbid_reference` turns the reference functions into tripwires, and
  :func:`uses_reference` inspects the function's code for the same names.

Essential checks.  Each exercise exists to teach one point (the mask is
honoured, the tiles never hold more than a block of scores, ...).  A check of
that point is marked ``essential=True``; when one fails, the cell earns at
most a third of its points, however many edge checks pass, and the summary
names the first essential check that failed.

Hints from mistake models.  A failed check always says what it observed (which
output, at which index, expected against got).  It names a *cause* only through
a :class:`Mistake`: a plausible mistake with a name, a model that computes what
that mistake returns on the check's own input, and one Chinese sentence.  The
sentence is shown only when the student's result equals the model's (within the
check's tolerance), never because a check failed::

    mistakes = [Mistake("wrong_axis", lambda: anp.softmax(s, axis=-2), "softmax 沿列做了：……")]
    checks.close(w, want, "权重逐行归一化", essential=True, mistakes=mistakes)

The inputs of a check are chosen so that the expected result and every model
give pairwise different results; with ``ATTNLIB_GRADING_STRICT=1`` in the
environment every model is evaluated on every check and a coincidence (or a
model that fails) raises :class:`MistakeModelError` (``tests/test_wrong_solutions.py``
runs every assignment so).

Messages are Chinese (learners read them); code and docstrings are English.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import importlib
import inspect
import io
import os
import sys
import tempfile
import types
import warnings
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "ESSENTIAL_CAP", "FAILED", "STRICT_ENV", "Captured", "Checks", "Mistake", "MistakeModelError", "ReferenceCallError",
    "Score", "capture_stderr", "forbid_reference", "quiet_call", "reference_classes", "reference_functions", "same",
    "show", "uses_reference",
]

_BACKENDS = ("attnlib.numpy", "attnlib.torch")


class _NoResult:
    """The result of a call that raised: every check on it fails."""

    def __repr__(self):
        return "<无结果>"


FAILED = _NoResult()


class ReferenceCallError(RuntimeError):
    """Raised by a tripwire when graded code calls an attnlib reference function."""


# --------------------------------------------------------------------------- stderr

@dataclass
class Captured:
    """What a quiet call produced.

    Attributes
    ----------
    result : object
        The return value, or :data:`FAILED` when the call raised.
    error : Exception or None
        The exception the call raised.
    stderr : str
        What was written to stderr during the call (the first 10,000 characters).
    warnings : list of warnings.WarningMessage
        The warnings raised during the call (the first 50); none of them was printed.
    """

    result: object = FAILED
    error: Exception | None = None
    stderr: str = ""
    warnings: list = field(default_factory=list)


_KEEP_CHARS = 10_000
_KEEP_WARNINGS = 50


class _Sink(io.TextIOBase):
    """A text stream that keeps only the first ``_KEEP_CHARS`` characters (an endless loop may write forever)."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        if self.size < _KEEP_CHARS:
            self.parts.append(text[: _KEEP_CHARS - self.size])
        self.size += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


@contextlib.contextmanager
def capture_stderr():
    """Swallow everything written to stderr inside the block, and every warning.

    Covers ``warnings.warn`` (and NumPy's RuntimeWarnings), ``sys.stderr.write``,
    ``print(..., file=sys.stderr)``, ``logging``, a handler holding the old
    ``sys.stderr`` object, and writes to file descriptor 2 (C code,
    ``sys.__stderr__``).  Only the first few thousand characters and the first
    50 warnings are kept.

    Yields
    ------
    Captured
        Filled in when the block ends: ``stderr`` text and ``warnings`` list.
    """
    captured = Captured(result=None)
    sink = _Sink()
    caught: list = []

    def keep(message, category, filename, lineno, file=None, line=None):
        if len(caught) < _KEEP_WARNINGS:
            caught.append(warnings.WarningMessage(message, category, filename, lineno, file, line))

    held = sys.stderr
    with warnings.catch_warnings(), _capture_fd2() as fd_text, _patched_write(held, sink), \
            contextlib.redirect_stderr(sink):
        warnings.simplefilter("always")
        warnings.showwarning = keep
        yield captured
    captured.warnings = caught
    captured.stderr = sink.getvalue() + fd_text.getvalue()


@contextlib.contextmanager
def _patched_write(stream, sink: _Sink):
    """Route ``stream.write`` into ``sink`` when the stream allows it (best effort)."""
    try:
        stream.write = sink.write
    except (AttributeError, TypeError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(AttributeError, TypeError):
            del stream.write


@contextlib.contextmanager
def _capture_fd2():
    """Point file descriptor 2 at a temporary file; yield a StringIO filled afterwards."""
    text = io.StringIO()
    try:
        saved = os.dup(2)
    except OSError:
        yield text
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        _flush_stderr()
        os.dup2(tmp.fileno(), 2)
        try:
            yield text
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text.write(tmp.read(_KEEP_CHARS).decode("utf-8", "replace"))


def _flush_stderr() -> None:
    with contextlib.suppress(Exception):
        if sys.__stderr__ is not None:
            sys.__stderr__.flush()


def quiet_call(func, *args, **kwargs) -> Captured:
    """Call ``func(*args, **kwargs)`` with stderr and warnings captured.

    An ``Exception`` is caught and returned in ``error``; ``KeyboardInterrupt``
    (nbgrader's per-cell timeout) and other ``BaseException`` pass through.

    Returns
    -------
    Captured
    """
    with capture_stderr() as captured:
        try:
            captured.result = func(*args, **kwargs)
        except Exception as exc:  # the student's bug is reported, not raised
            captured.result, captured.error = FAILED, exc
    return captured


# --------------------------------------------------------------------------- reference guard

def reference_functions(name: str) -> list:
    """The attnlib reference implementation of ``name``, in every loaded backend.

    For each backend already imported (``attnlib.numpy`` always; ``attnlib.torch``
    only if loaded, so grading never pays for importing torch), this is the
    public function plus the helpers defined in the same module that the
    backend does not export (e.g. ``softmax_``).  Other public functions of
    that module stay allowed: forbidding ``cosine_scores`` must not forbid
    ``attention_scores``, which lives beside it and which a student may use.
    A public class (``KVCache``) stands for every function it defines: its
    methods, including ``__init__``, and the getters of its properties.

    Parameters
    ----------
    name : str
        Public attnlib function or class name, e.g. ``"softmax"``.

    Returns
    -------
    list of function
    """
    importlib.import_module(_BACKENDS[0])
    found = []
    for backend in _BACKENDS:
        module = sys.modules.get(backend)
        func = getattr(module, name, None) if module is not None else None
        if inspect.isclass(func):
            found += _methods(func)
            continue
        if not inspect.isfunction(func):
            continue
        home = sys.modules[func.__module__]
        public = set(getattr(module, "__all__", ())) - {name}
        found += [f for f in vars(home).values()
                  if inspect.isfunction(f) and f.__module__ == home.__name__ and f.__name__ not in public]
    if not found:
        raise ValueError(f"attnlib 中没有名为 {name!r} 的参考函数 (no attnlib reference function {name!r})。")
    return found


def reference_classes(name: str) -> list:
    """The public attnlib classes called ``name`` in every loaded backend (empty for a function name)."""
    importlib.import_module(_BACKENDS[0])
    found = (getattr(sys.modules.get(b), name, None) for b in _BACKENDS if b in sys.modules)
    return [c for c in found if inspect.isclass(c)]


def _methods(cls) -> list:
    """The functions a class defines itself: methods, static and class methods, property accessors."""
    found = []
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            found += [f for f in (value.fget, value.fset, value.fdel) if inspect.isfunction(f)]
        elif inspect.isfunction(value):
            found.append(value)
    return found


def _tripwire(*args, **kwargs):
    """Replacement body of a forbidden reference function: record and refuse."""
    grading = __import__("attnlib.grading", fromlist=["ReferenceCallError"])
    grading._TRIPPED.append(True)
    raise grading.ReferenceCallError("调用了 attnlib 的参考实现 (called the attnlib reference)")


_TRIPPED: list = []


@contextlib.contextmanager
def forbid_reference(functions):
    """Turn ``functions`` into tripwires inside the block.

    The code object of each function is swapped, so the trap fires however the
    student bound the name (``anp.softmax``, ``from attnlib.numpy import
    softmax``, an alias, a helper of theirs).

    Parameters
    ----------
    functions : iterable of function

    Yields
    ------
    list
        Non-empty after the block if any tripwire fired (even if the student
        caught the exception).
    """
    saved = [(f, f.__code__) for f in functions]
    fired: list = []
    _TRIPPED.clear()
    try:
        for func, code in saved:  # a method that calls super() has a free variable (__class__): keep its count
            func.__code__ = _tripwire.__code__.replace(co_freevars=code.co_freevars)
        yield fired
    finally:
        for func, code in saved:
            func.__code__ = code
        fired.extend(_TRIPPED)
        _TRIPPED.clear()


def uses_reference(func, name: str) -> bool:
    """Whether ``func``'s own code refers to attnlib's ``name`` (a static check).

    True when the code (nested functions included) loads a global that is one
    of :func:`reference_functions` or :func:`reference_classes`, or reaches an
    attnlib module (a global bound to one, or an ``import`` inside the function)
    and takes an attribute or imports a name called ``name`` from it.  A
    student's own helper that happens to be called ``softmax`` (or a class of
    their own called ``KVCache``) is not flagged.

    Parameters
    ----------
    func : callable
    name : str

    Returns
    -------
    bool
    """
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    scope = getattr(func, "__globals__", {})
    refs = {id(f) for f in reference_functions(name)} | {id(c) for c in reference_classes(name)}
    reaches_attnlib = named = False
    for opname, argval in _names(code):
        value = scope.get(argval) if opname in ("LOAD_GLOBAL", "LOAD_NAME") else None
        if value is not None and id(value) in refs:
            return True
        if isinstance(value, types.ModuleType) and value.__name__.startswith("attnlib"):
            reaches_attnlib = True
        if opname == "IMPORT_NAME" and argval.startswith("attnlib"):
            reaches_attnlib = True
        if opname in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM") and argval == name:
            named = True
    return reaches_attnlib and named


_NAME_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "IMPORT_NAME", "LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM"})


@functools.lru_cache(maxsize=4096)
def _names(code: types.CodeType) -> tuple:
    """``(opname, name)`` of every instruction of ``code`` (nested functions and classes included) that loads or
    imports a name: what :func:`uses_reference` reads.  Cached per code object, since a test cell checks the same
    function once per call it makes."""
    return tuple((ins.opname, str(ins.argval)) for ins in _instructions(code) if ins.opname in _NAME_OPS)


def _instructions(code: types.CodeType):
    """Bytecode instructions of ``code`` and of every function or class nested in it."""
    yield from dis.get_instructions(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _instructions(const)


# --------------------------------------------------------------------------- checks

def show(value, limit: int = 300) -> str:
    """A short, one-line, readable rendering of a value for a message."""
    if value is FAILED:
        return repr(value)
    array = _as_array(value)
    if isinstance(array, np.ndarray) and array.ndim == 0:
        text = repr(array.item())
    elif isinstance(array, np.ndarray) and array.dtype.kind in "biufc":
        # one line, whatever the rank: a message names a value inline, and a matrix broken over lines
        # inside "f([[1. 2.]\n [3. 4.]])" reads as two messages
        text = np.array2string(array, precision=6, threshold=30, max_line_width=1_000_000, separator=", ")
        text = " ".join(row.strip() for row in text.splitlines())
        if array.ndim > 1:
            text = f"{text}（形状 {array.shape}）"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + " …"


def _as_array(value):
    """``value`` as a NumPy array when it is array-like (torch tensors included), else unchanged."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    if isinstance(value, (np.ndarray, np.generic, list, tuple, int, float)) and not isinstance(value, bool):
        try:
            return np.asarray(value)
        except ValueError:
            return value
    return value


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return "函数还没有实现（NotImplementedError）：请先完成上面的代码单元"
    if isinstance(exc, ReferenceCallError):
        return "函数调用了 attnlib 的参考实现；本题要求你自己实现"
    return f"调用时抛出了异常 {type(exc).__name__}: {exc}"


STRICT_ENV = "ATTNLIB_GRADING_STRICT"
"""Environment variable: when ``"1"``, every check evaluates all its mistake models and refuses coincidences."""


class MistakeModelError(AssertionError):
    """An assignment's author error: a mistake model fails, or two results of one check coincide."""


@dataclass(frozen=True)
class Mistake:
    """One plausible mistake of an exercise, as a check can recognise it.

    Attributes
    ----------
    name : str
        A short identifier (English, ``snake_case``), recorded in :attr:`Checks.records` and by ``make audit``.
    model : callable
        ``model()`` returns what a function making this mistake returns on the check's own input
        (the same kind of value the check compares: an array, a number, a list ...).
    says : str
        One Chinese sentence naming the mistake, shown only when the student's result equals ``model()``.
    """

    name: str
    model: object
    says: str

    def output(self):
        """``model()``, quietly (no warning or NumPy floating-point message reaches stderr)."""
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return self.model()


def _strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


def same(a, b, *, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Whether two results are the same: numeric arrays within tolerances (as :meth:`Checks.close`), else ``==``.

    :data:`FAILED` is the same as nothing.  Containers (tuples, lists, dicts) of arrays are compared
    element by element.
    """
    if a is FAILED or b is FAILED:
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol=rtol, atol=atol) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and not _numeric(a) and not _numeric(b):
        return len(a) == len(b) and all(same(x, y, rtol=rtol, atol=atol) for x, y in zip(a, b, strict=True))
    if _numeric(a) and _numeric(b):
        return _compare(a, b, rtol, atol) is None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bool(a == b)
    except Exception:  # ambiguous or incomparable values are not the same
        return False


def _numeric(value) -> bool:
    """Whether ``value`` is a numeric array-like (a tensor, an array, a number, a rectangular list of numbers)."""
    if isinstance(value, bool):
        return False
    array = _as_array(value)
    return isinstance(array, np.ndarray) and array.dtype.kind in "biuf"


ESSENTIAL_CAP = 1 / 3
"""The share of a cell's points kept when one of its essential checks fails."""


class Score(float):
    """The points a test cell earned: a float that nbgrader reads and a notebook does not show.

    nbgrader takes a test cell's partial credit from the ``text/plain`` form of
    its last expression, so the cell must end with the number.  Printed bare
    it reads as noise after the Chinese summary line (``1.3333333333333333``
    under "得分 1.33 / 2").  Notebook front ends show the richest form of a
    result, and this one's HTML form is empty: nbgrader still reads the
    number, the student sees only the summary line.
    """

    def _repr_html_(self) -> str:
        return ""


class Checks:
    """Collect several checks in one test cell and turn them into partial credit.

    Parameters
    ----------
    points : float
        The cell's points in nbgrader (``score()`` never returns more).
    forbid : str or sequence of str, optional
        attnlib function or class names the student's code must not call
        (see :func:`reference_functions`; a class stands for its methods).
    title : str, optional
        Printed before the first message.
    """

    def __init__(self, points: float, *, forbid=(), title: str = ""):
        if not points > 0:
            raise ValueError(f"points 必须大于 0，收到 {points!r}。")
        self.points = float(points)
        self.forbid = (forbid,) if isinstance(forbid, str) else tuple(forbid)
        self.passed = 0
        self.total = 0
        self.messages: list[str] = []
        self.essential_failed: list[str] = []  # what each failed essential check checked, in order
        self.records: list[dict] = []  # one per check: what, ok, essential, the matched mistake's name (or None)
        if title:
            print(title)

    # -- running the student's code

    def call(self, func, *args, **kwargs):
        """Run the student's ``func(*args, **kwargs)`` quietly and under the reference guard.

        Returns
        -------
        object
            The result, or :data:`FAILED` when the call raised or used a
            forbidden reference (a message says why; the checks on it fail).
        """
        captured = self._guarded(func, args, kwargs)
        if captured.error is not None:
            self._note(f"✗ {_call_text(func, args, kwargs)}：{_describe_error(captured.error)}")
        return captured.result

    def _guarded(self, func, args, kwargs) -> Captured:
        name = getattr(func, "__name__", repr(func))
        static = [n for n in self.forbid if uses_reference(func, n)]
        if static:
            error = ReferenceCallError(f"{name} 用到了 attnlib 的 {', '.join(static)}")
            return Captured(result=FAILED, error=error)
        refs = [f for n in self.forbid for f in reference_functions(n)]
        with forbid_reference(refs) as fired:
            captured = quiet_call(func, *args, **kwargs)
        if fired and not isinstance(captured.error, ReferenceCallError):
            captured.result, captured.error = FAILED, ReferenceCallError(name)
        return captured

    # -- checks

    def check(self, ok: bool, what: str, *, expected=None, got=None, mistakes=(), needs=None,
              essential: bool = False) -> bool:
        """Record one check.

        Parameters
        ----------
        ok : bool
        what : str
            What is checked, on which input, in Chinese (e.g. ``"4 个词元、窗口 2：每行之和为 1"``).
        expected, got : object, optional
            Shown in the failure message when given.
        mistakes : sequence of Mistake, optional
            Plausible mistakes of this check: a failure names the one whose model returns ``got``
            (compared with :func:`same`).  Needs ``expected``.
        needs : object, optional
            A result of :meth:`call` this check depends on: when it is
            :data:`FAILED` the check fails whatever ``ok`` says.
        essential : bool, optional
            The check tests the exercise's point (本题要点): when it fails the
            cell earns at most :data:`ESSENTIAL_CAP` of its points.
        """
        return self._record(ok, what, expected=expected, got=got, mistakes=mistakes, needs=needs,
                            essential=essential, match=same)

    def close(self, got, expected, what: str, *, rtol: float = 1e-6, atol: float = 1e-9, mistakes=(),
              essential: bool = False) -> bool:
        """Check that ``got`` equals the array ``expected`` within tolerances (NaN never equal).

        A failure says where and by how much the result differs; ``mistakes`` and ``essential`` as in
        :meth:`check` (a mistake is matched within the same tolerances).
        """
        problem = _compare(got, expected, rtol, atol)

        def match(a, b):
            return a is not FAILED and b is not FAILED and _compare(a, b, rtol, atol) is None

        return self._record(problem is None, what, expected=expected, got=got, mistakes=mistakes,
                            essential=essential, match=match, observed=problem)

    def _record(self, ok, what, *, expected, got, mistakes, essential, match, needs=None, observed=None) -> bool:
        mistakes = tuple(mistakes)
        if mistakes and expected is None:
            raise TypeError(f"检查“{what}”给了 mistakes，却没有给 expected：错误模型要与正确结果比较")
        if needs is FAILED:
            ok, observed = False, "函数调用失败（原因见上方），无法检查这一项"
        elif not ok and observed is None and _numeric(expected) and _numeric(got) \
                and np.shape(_as_array(expected)) == np.shape(_as_array(got)) and np.size(_as_array(got)) > 1:
            observed = _compare(got, expected, 1e-6, 1e-9)  # where two arrays differ: a long one is shown cut short
        if _strict() and mistakes:
            self._audit_models(what, expected, mistakes, match)
        matched = None
        if not ok and got is not FAILED and needs is not FAILED:
            matched = _which_mistake(got, mistakes, match)
        self.records.append({"what": what, "ok": bool(ok), "essential": essential,
                             "mistake": matched.name if matched else None})
        self.total += 1
        label = f"【要点】{what}" if essential else what
        if ok:
            self.passed += 1
            self._note(f"✓ {label}")
            return True
        if essential:
            self.essential_failed.append(what)
        parts = [f"✗ {label}：未通过"]
        if expected is not None:
            parts.append(f"\n    期望：{show(expected)}")
        if got is not None:
            parts.append(f"\n    实际：{show(got)}")
        if observed:
            parts.append(f"\n    {observed}")
        if matched is not None:
            parts.append(f"\n    提示：你的结果与下面这种错误在这组输入上的结果相同：{matched.says}")
        self._note("".join(parts))
        return False

    @staticmethod
    def _audit_models(what, expected, mistakes, match) -> None:
        """Strict mode: every model runs, and no two of (expected, models...) give the same result."""
        results = [("正确结果", expected)]
        for mistake in mistakes:
            try:
                results.append((mistake.name, mistake.output()))
            except Exception as exc:
                raise MistakeModelError(f"检查“{what}”：错误模型 {mistake.name} 自身出错：{type(exc).__name__}: {exc}"
                                        ) from exc
        for i, (name_a, a) in enumerate(results):
            for name_b, b in results[i + 1:]:
                if match(b, a) or match(a, b):
                    raise MistakeModelError(f"检查“{what}”：{name_a} 与 {name_b} 在这组输入上结果相同，"
                                            "提示无法区分它们：换一组输入")

    def raises(self, error, func, *args, what: str, essential: bool = False, **kwargs) -> bool:
        """Check that the student's ``func(*args, **kwargs)`` raises ``error`` (an exception class)."""
        captured = self._guarded(func, args, kwargs)
        exc = captured.error
        if isinstance(exc, error) and not isinstance(exc, ReferenceCallError):
            return self.check(True, what, essential=essential)
        if exc is None:
            came = f"没有抛出异常，返回了 {show(captured.result, 120)}"
        elif isinstance(exc, (NotImplementedError, ReferenceCallError)):
            came = _describe_error(exc)
        else:
            came = f"抛出的是 {type(exc).__name__}: {exc}"
        return self._record(False, what, expected=None, got=None, mistakes=(), essential=essential, match=same,
                            observed=f"应当抛出 {error.__name__}，实际{came}")

    # -- result

    def score(self) -> Score:
        """Print the summary and return the points earned as a :class:`Score`.

        The points are ``points * passed / total``, capped at
        ``points * ESSENTIAL_CAP`` when an essential check failed; the summary
        then names the first essential check that failed.
        """
        if self.total == 0:
            print("本单元没有任何检查。")
            return Score(0.0)
        earned = self.points * self.passed / self.total
        summary = f"本单元：{self.passed}/{self.total} 项检查通过"
        if self.essential_failed:
            earned = min(earned, self.points * ESSENTIAL_CAP)
            summary += (f"；本题要点没有做到（首先未通过的要点检查：{self.essential_failed[0]}），"
                        f"得分最多为本题分值的三分之一")
        print(f"{summary}，得分 {points_text(earned)} / {points_text(self.points)}")
        return Score(earned)

    def _note(self, message: str) -> None:
        self.messages.append(message)
        print(message)


def points_text(x: float) -> str:
    """A score as the course prints it everywhere: ``1.0 -> "1"``, ``2/3 -> "0.67"``, never ``"-0"``."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _which_mistake(got, mistakes, match):
    """The one mistake whose model returns ``got``; None when none does, or more than one (then none is named)."""
    found = []
    for mistake in mistakes:
        try:
            if match(got, mistake.output()):
                found.append(mistake)
        except Exception:  # a model that does not apply to this input names nothing
            continue
    return found[0] if len(found) == 1 else None


def _call_text(func, args, kwargs) -> str:
    name = getattr(func, "__name__", "函数")
    shown = [show(a, 60) for a in args] + [f"{k}={show(v, 60)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"


def _compare(got, expected, rtol: float, atol: float) -> str | None:
    """What differs between ``got`` and ``expected``, observed and in Chinese, or None when they match.

    The message names no cause: the kind of value, the shape, or the first place where the values differ
    most (its index, the expected and the returned value there) and how many entries differ.
    """
    if got is FAILED:
        return "没有结果可比较：函数调用失败（原因见上方）"
    if got is None:
        return "函数返回的是 None（没有返回值）"
    want = np.asarray(expected)
    array = _as_array(got)
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        return f"应返回数值数组，实际返回的是 {type(got).__name__}"
    if array.shape != want.shape:
        return f"形状不对：期望 {want.shape}，实际 {array.shape}"
    if array.dtype.kind == "f" and array.dtype.itemsize < 8:
        # an answer computed in float32 (or float16) is right within its own precision
        eps = float(np.finfo(array.dtype).eps)
        finite = np.abs(want[np.isfinite(want)]) if want.dtype.kind in "biuf" else np.zeros(0)
        rtol, atol = max(rtol, 100 * eps), max(atol, 100 * eps * float(np.max(finite, initial=1.0)))
    with np.errstate(all="ignore"):
        a, w = array.astype(float), want.astype(float)
        wrong = ~np.isclose(a, w, rtol=rtol, atol=atol)
        if not wrong.any():
            return None
        nan = np.isnan(a) & ~np.isnan(w)
        if nan.any():
            where = _index(np.argwhere(nan)[0])
            return (f"结果中有 {int(nan.sum())} 个 NaN（期望里没有），第一个在下标 {where}："
                    f"期望 {show(w[tuple(np.argwhere(nan)[0])], 40)}")
        gap = np.where(wrong, np.abs(a - w), -1.0)
        gap = np.where(np.isnan(gap), np.inf, gap)
        worst = np.unravel_index(int(np.argmax(gap)), gap.shape)
        differ = f"期望 {_number(w[worst])}，实际 {_number(a[worst])}（相差 {_number(abs(a[worst] - w[worst]))}）"
        if wrong.size == 1:
            return f"数值不一致：{differ}"
        return f"{int(wrong.sum())} / {wrong.size} 个数不一致，相差最大的在下标 {_index(worst)} 处：{differ}"


def _index(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ")" if len(idx) != 1 else f"[{int(idx[0])}]"


def _number(x) -> str:
    return f"{float(x):.4g}"
