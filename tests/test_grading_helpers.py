"""Unit tests of attnlib.grading: partial credit, Chinese messages, stderr capture, reference detection."""

from __future__ import annotations

import logging
import os
import sys
import warnings

import nbformat
import numpy as np
import pytest

import attnlib.numpy as anp
from attnlib import grading
from attnlib.grading import (
    FAILED,
    Checks,
    Mistake,
    ReferenceCallError,
    capture_stderr,
    quiet_call,
    show,
    uses_reference,
)
from attnlib.numpy import softmax as aliased_reference


def own_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ----------------------------------------------------------------- partial credit and messages

def test_partial_credit_is_points_times_passed_fraction(capsys):
    checks = Checks(points=3)
    checks.check(True, "第一项")
    checks.check(False, "第二项", expected=1, got=2)
    checks.close(np.array([0.5, 0.5]), [0.5, 0.5], "第三项")
    checks.close(np.array([1.0, 0.0]), [0.5, 0.5], "第四项")
    assert checks.score() == pytest.approx(1.5)
    out = capsys.readouterr().out
    assert "✗ 第二项：未通过" in out and "期望：1" in out and "实际：2" in out
    assert "2/4 项检查通过，得分 1.5 / 3" in out


def test_full_marks_never_exceed_points():
    checks = Checks(points=2)
    for i in range(7):
        checks.check(True, f"第 {i} 项")
    assert checks.score() == 2.0


def test_a_failed_essential_check_caps_the_cell_at_a_third_and_is_named(capsys):
    checks = Checks(points=3)
    for i in range(8):
        checks.check(True, f"边界 {i}")
    checks.check(False, "掩码起作用", essential=True)
    checks.close(np.array([1.0, 0.0]), [0.5, 0.5], "权重逐行归一化", essential=True)
    assert checks.score() == pytest.approx(1.0)  # 8/10 of 3 = 2.4, capped at 3/3
    out = capsys.readouterr().out
    assert "✗ 【要点】掩码起作用：未通过" in out
    assert "2 / 2 个数不一致，相差最大的在下标 [0] 处：期望 0.5，实际 1（相差 0.5）" in out
    assert "首先未通过的要点检查：掩码起作用" in out and "得分 1 / 3" in out


def test_an_essential_failure_keeps_a_lower_partial_score_and_passes_cost_nothing():
    checks = Checks(points=3)
    checks.check(False, "a", essential=True)
    checks.check(False, "b")
    checks.check(False, "c")
    assert checks.score() == pytest.approx(0.0)
    passing = Checks(points=3)
    passing.check(True, "a", essential=True)
    passing.check(False, "b")
    assert passing.score() == pytest.approx(1.5)
    raised = Checks(points=3)
    raised.raises(ValueError, lambda: 1, what="抛出 ValueError", essential=True)
    raised.check(True, "x")
    assert raised.score() == pytest.approx(1.0) and raised.essential_failed == ["抛出 ValueError"]


def test_a_mistake_is_named_only_when_the_result_equals_its_model(capsys):
    s = np.array([[0.0, 1.0], [2.0, 0.5]])
    want = anp.softmax(s, axis=-1)
    mistakes = [Mistake("columns", lambda: anp.softmax(s, axis=0), "softmax 沿列做了"),
                Mistake("no_exp", lambda: s / s.sum(axis=-1, keepdims=True), "没有取指数")]
    checks = Checks(points=2)
    checks.close(anp.softmax(s, axis=0), want, "沿列", mistakes=mistakes, essential=True)
    checks.close(want + 0.01, want, "差一点", mistakes=mistakes)
    checks.close(FAILED, want, "失败", mistakes=mistakes)
    checks.check(False, "计数", expected=3, got=4, mistakes=[Mistake("plus_one", lambda: 4, "多数了一个")])
    out = capsys.readouterr().out
    assert out.count("softmax 沿列做了") == 1 and "没有取指数" not in out
    assert "结果相同：多数了一个" in out
    assert [r["mistake"] for r in checks.records] == ["columns", None, None, "plus_one"]


def test_two_mistakes_that_both_match_name_neither():
    same_output = [Mistake("a", lambda: np.ones(2), "甲"), Mistake("b", lambda: np.ones(2), "乙")]
    checks = Checks(points=1)
    checks.close(np.ones(2), np.zeros(2), "两个模型相同", mistakes=same_output)
    assert checks.records[0]["mistake"] is None


def test_strict_mode_refuses_coinciding_or_failing_models(monkeypatch):
    monkeypatch.setenv(grading.STRICT_ENV, "1")
    want = np.array([1.0, 2.0])
    with pytest.raises(grading.MistakeModelError, match="正确结果 与 doubled"):
        Checks(points=1).close(want, want, "x", mistakes=[Mistake("doubled", lambda: want * 1.0, "乘了 2")])
    with pytest.raises(grading.MistakeModelError, match="a 与 b"):
        Checks(points=1).close(want, want, "x", mistakes=[Mistake("a", lambda: want + 1, "甲"),
                                                          Mistake("b", lambda: want + 1, "乙")])
    with pytest.raises(grading.MistakeModelError, match="自身出错"):
        Checks(points=1).close(want, want, "x", mistakes=[Mistake("broken", lambda: 1 / 0, "甲")])
    ok = Checks(points=1)
    ok.close(want, want, "x", mistakes=[Mistake("a", lambda: want + 1, "甲")])
    assert ok.score() == 1.0
    with pytest.raises(TypeError, match="expected"):
        Checks(points=1).check(False, "x", got=1, mistakes=[Mistake("a", lambda: 2, "甲")])


def test_float32_answers_are_right_within_their_precision():
    want = np.random.default_rng(0).normal(size=(50, 50)) @ np.random.default_rng(1).normal(size=(50, 50))
    got = want.astype(np.float32)
    checks = Checks(points=1)
    assert checks.close(got, want, "float32")
    assert not checks.close((want + 1e-3).astype(np.float32), want, "off by 1e-3")


def test_no_checks_scores_zero_and_bad_points_refused():
    assert Checks(points=1).score() == 0.0
    with pytest.raises(ValueError, match="points"):
        Checks(points=0)


@pytest.mark.parametrize(("got", "expected", "phrase"), [
    (np.zeros((2, 3)), np.zeros((3, 2)), "形状不对"),
    (None, [1.0], "返回的是 None"),
    (np.array([np.nan, 1.0]), [0.0, 1.0], "1 个 NaN"),
    (np.array([0.2, 0.8]), [0.5, 0.5], "2 / 2 个数不一致"),
    ("abc", [1.0], "数值数组"),
    (FAILED, [1.0], "调用失败"),
])
def test_close_explains_each_failure_in_chinese(got, expected, phrase, capsys):
    checks = Checks(points=1)
    assert not checks.close(got, expected, "比较")
    assert phrase in capsys.readouterr().out
    assert checks.score() == 0.0


def test_close_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    checks = Checks(points=1)
    assert checks.close(torch.tensor([0.25, 0.75], dtype=torch.float64), [0.25, 0.75], "张量")


def test_failed_call_reports_the_exception_and_fails_dependent_checks(capsys):
    def broken(x):
        raise IndexError("越界了")

    checks = Checks(points=2)
    out = checks.call(broken, np.ones(3))
    assert out is FAILED
    checks.check(True, "依赖调用结果的一项", needs=out)
    assert checks.score() == 0.0
    text = capsys.readouterr().out
    assert "IndexError: 越界了" in text and "broken(" in text


def test_unimplemented_function_gets_a_friendly_message(capsys):
    def stub(x):
        raise NotImplementedError()

    checks = Checks(points=1)
    checks.close(checks.call(stub, 1.0), 1.0, "结果")
    assert "还没有实现" in capsys.readouterr().out


def test_raises_passes_and_fails_with_reasons(capsys):
    def strict(t):
        if t <= 0:
            raise ValueError("t 必须为正")
        return t

    checks = Checks(points=2)
    assert checks.raises(ValueError, strict, 0.0, what="t=0 抛出 ValueError")
    assert not checks.raises(ValueError, strict, 1.0, what="t=1 抛出 ValueError")
    assert not checks.raises(TypeError, strict, -1.0, what="t=-1 抛出 TypeError")
    text = capsys.readouterr().out
    assert "没有抛出异常，返回了 1.0" in text and "抛出的是 ValueError" in text
    assert checks.score() == pytest.approx(2 / 3)


# ----------------------------------------------------------------- stderr

def noisy(x):
    warnings.warn("一个警告", UserWarning, stacklevel=2)
    warnings.warn("旧接口", DeprecationWarning, stacklevel=2)
    with np.errstate(divide="warn"):
        np.log(np.zeros(1))  # numpy's RuntimeWarning
    print("print 到 stderr", file=sys.stderr)
    sys.stderr.write("直接写 stderr\n")
    sys.__stderr__.write("写到 sys.__stderr__\n")
    os.write(2, b"fd 2 bytes\n")
    logging.getLogger("student").warning("logging 的警告")
    return x + 1


def test_capture_stderr_swallows_every_kind_of_stderr(capfd):
    captured = quiet_call(noisy, 1)
    assert captured.result == 2 and captured.error is None
    # (logging goes to pytest's log capture here; a StreamHandler case is tested below)
    for text in ("print 到 stderr", "直接写 stderr", "写到 sys.__stderr__", "fd 2 bytes"):
        assert text in captured.stderr
    categories = {w.category for w in captured.warnings}
    assert {UserWarning, DeprecationWarning, RuntimeWarning} <= categories
    assert capfd.readouterr().err == ""
    # and stderr works normally again afterwards
    print("之后", file=sys.stderr)
    assert capfd.readouterr().err == "之后\n"


def test_capture_stderr_catches_a_handler_holding_the_old_stream(capfd):
    handler = logging.StreamHandler(sys.stderr)  # bound before the capture starts
    log = logging.getLogger("holder")
    log.addHandler(handler)
    log.propagate = False
    try:
        with capture_stderr() as captured:
            log.warning("旧的 stderr 对象")
    finally:
        log.removeHandler(handler)
    assert "旧的 stderr 对象" in captured.stderr
    assert capfd.readouterr().err == ""


def test_capture_keeps_only_a_bounded_amount():
    def endless_writer():
        for _ in range(5000):
            sys.stderr.write("x" * 100)
            warnings.warn("重复", UserWarning, stacklevel=1)

    captured = quiet_call(endless_writer)
    assert len(captured.stderr) <= 10_000
    assert len(captured.warnings) <= 50


def test_keyboard_interrupt_passes_through_and_restores_stderr():
    real = sys.stderr

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        quiet_call(interrupted)
    assert sys.stderr is real and "write" not in vars(real)


def test_correct_but_noisy_answer_keeps_full_marks(capfd):
    checks = Checks(points=2, forbid="softmax")
    out = checks.call(lambda x: noisy(0) and own_softmax(x), np.array([0.0, 0.0]))
    checks.close(out, [0.5, 0.5], "结果")
    assert checks.score() == 2.0
    assert capfd.readouterr().err == ""


# ----------------------------------------------------------------- reference detection

def via_module(x, axis=-1):
    return anp.softmax(x, axis=axis)


def via_alias(x, axis=-1):
    return aliased_reference(x, axis=axis)


def via_import_inside(x, axis=-1):
    from attnlib.numpy import softmax

    return softmax(x, axis=axis)


def _hidden_helper(x):
    return anp.softmax(x)


def via_helper_swallowing(x, axis=-1):
    try:
        return _hidden_helper(x)
    except Exception:
        return own_softmax(x, axis)


def via_torch(x, axis=-1):
    import torch

    from attnlib import torch as att

    return att.softmax(torch.as_tensor(x), axis=axis).numpy()


def softmax(x, axis=-1):  # a student's own function that happens to share the name
    return own_softmax(x, axis)


def own_named_softmax(x, axis=-1):
    return softmax(x, axis)


@pytest.mark.parametrize("cheat", [via_module, via_alias, via_import_inside, via_helper_swallowing, via_torch])
def test_calling_the_reference_fails(cheat, capsys):
    checks = Checks(points=1, forbid="softmax")
    x = np.array([1.0, 2.0])
    out = checks.call(cheat, x)
    assert out is FAILED
    checks.close(out, anp.softmax(x), "结果")
    assert checks.score() == 0.0
    assert "attnlib 的参考实现" in capsys.readouterr().out


def test_static_check_sees_the_names_a_function_uses():
    assert uses_reference(via_module, "softmax")
    assert uses_reference(via_alias, "softmax")
    assert uses_reference(via_import_inside, "softmax")
    assert not uses_reference(own_named_softmax, "softmax")
    assert not uses_reference(via_helper_swallowing, "softmax")  # only the runtime tripwire sees this one


def test_own_work_passes_and_the_reference_is_restored():
    checks = Checks(points=1, forbid="softmax")
    x = np.array([[1.0, 2.0, 3.0]])
    checks.close(checks.call(own_named_softmax, x), anp.softmax(x), "自己实现的 softmax")
    assert checks.score() == 1.0
    assert np.allclose(anp.softmax(x).sum(), 1.0)  # the tripwires are gone
    assert grading._TRIPPED == []


def test_tripwire_fires_for_every_reference_function_of_the_module():
    funcs = grading.reference_functions("softmax")
    names = {f.__name__ for f in funcs}
    assert {"softmax", "softmax_", "exp_shifted_"} <= names
    with grading.forbid_reference(funcs) as fired, pytest.raises(ReferenceCallError):
        anp.softmax(np.zeros(2))
    assert fired
    with pytest.raises(ValueError, match="nope"):
        grading.reference_functions("nope")


def test_forbidding_one_public_function_leaves_its_public_neighbours_allowed():
    """cosine_scores and attention_scores share a module; a student's cosine may call attention_scores."""
    names = {f.__name__ for f in grading.reference_functions("cosine_scores")}
    assert "cosine_scores" in names and "attention_scores" not in names

    def cosine_via_scores(q, k):
        unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
        return anp.attention_scores(unit(q), unit(k), scale=False)

    checks = Checks(points=1, forbid="cosine_scores")
    q, k = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [3.0, 3.0]])
    checks.close(checks.call(cosine_via_scores, q, k), [[1.0, 2 ** -0.5]], "余弦")
    assert checks.score() == 1.0
    cheat = Checks(points=1, forbid="cosine_scores")
    cheat.close(cheat.call(lambda q, k: anp.cosine_scores(q, k), q, k), [[1.0, 2 ** -0.5]], "余弦")
    assert cheat.score() == 0.0


# ----------------------------------------------------------------- what nbgrader reads

def test_nbgrader_reads_the_returned_number_as_partial_credit():
    from nbgrader import utils

    cell = nbformat.v4.new_code_cell("checks.score()")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 3, "grade_id": "t", "locked": True}
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="本单元：6/8 项检查通过\n"),
                    nbformat.v4.new_output("execute_result", data={"text/plain": repr(3 * 6 / 8)},
                                           execution_count=1)]
    assert utils.determine_grade(cell) == (2.25, 3.0)
    cell.outputs.insert(0, nbformat.v4.new_output("stream", name="stderr", text="UserWarning\n"))
    assert utils.determine_grade(cell) == (0, 3.0)  # the trap the stderr capture avoids


@pytest.mark.grading
def test_in_a_real_kernel_the_test_cell_has_no_stderr_and_returns_its_score():
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            "import sys, warnings, numpy as np\n"
            "def f(x):\n"
            "    warnings.warn('student warning')\n"
            "    print('to stderr', file=sys.stderr)\n"
            "    sys.stderr.write('raw\\n')\n"
            "    return np.asarray(x) * 2\n"),
        nbformat.v4.new_code_cell(
            "from attnlib.grading import Checks\n"
            "checks = Checks(points=2)\n"
            "checks.close(checks.call(f, [1.0]), [2.0], 'doubles')\n"
            "checks.close(checks.call(f, [1.0]), [3.0], 'wrong on purpose')\n"
            "checks.score()"),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    outputs = nb.cells[1].outputs
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    result = [o for o in outputs if o.output_type == "execute_result"]
    assert result[0].data["text/plain"] == "1.0"  # what nbgrader reads as partial credit
    assert result[0].data["text/html"] == ""  # what JupyterLab shows: nothing after the summary line


def test_a_score_is_the_number_for_nbgrader_and_nothing_to_see_in_a_notebook(capsys):
    from IPython.core.formatters import DisplayFormatter
    from nbgrader.utils import get_partial_grade

    from attnlib import quiz

    checks = Checks(points=2)
    checks.check(True, "一")
    checks.check(False, "二")
    checks.check(False, "三")
    earned = checks.score()
    invalid = quiz.grade("Z", key="B", explanations={"A": "甲", "B": "乙"}, points=1)
    for value, expected in ((earned, 2 / 3), (invalid, 0.0)):
        data, _ = DisplayFormatter().format(value)
        assert data["text/html"] == ""
        assert get_partial_grade({"data": data}, 2) == pytest.approx(expected)
    assert "得分 0.67 / 2" in capsys.readouterr().out


class KVCache:  # a student's own class that happens to share the reference's name
    def __init__(self, n_layers, n_heads, d_head):
        self.keys = [None] * n_layers

    def append(self, layer, k, v):
        self.keys[layer] = k
        return k, v


def own_cache(n):
    cache = KVCache(1, 1, 2)
    return cache.append(0, np.zeros((1, n, 2)), np.zeros((1, n, 2)))[0].shape[-2]


def cache_via_module(n):
    cache = anp.KVCache(1, 1, 2)
    return cache.append(0, np.zeros((1, n, 2)), np.zeros((1, n, 2)))[0].shape[-2]


class Inherited(anp.KVCache):  # delegation by inheritance: only the tripwires can see it
    pass


def cache_via_subclass(n):
    return Inherited(1, 1, 2).append(0, np.zeros((1, n, 2)), np.zeros((1, n, 2)))[0].shape[-2]


def nbytes_via_reference(n):
    cache = anp.KVCache.__new__(anp.KVCache)  # no __init__: only the property's getter runs
    return cache.nbytes


def test_forbidding_a_class_forbids_its_methods_and_properties(capsys):
    """forbid="KVCache": building, appending to or reading the reference cache fails; a class of one's own passes."""
    names = {f.__name__ for f in grading.reference_functions("KVCache")}
    assert {"__init__", "append", "read", "length", "nbytes"} <= names
    assert grading.reference_classes("KVCache") and not grading.reference_classes("softmax")
    assert uses_reference(cache_via_module, "KVCache") and not uses_reference(own_cache, "KVCache")
    checks = Checks(points=1, forbid="KVCache")
    checks.check(checks.call(own_cache, 3) == 3, "自己的 KVCache")
    assert checks.score() == 1.0
    for cheat in (cache_via_module, cache_via_subclass, nbytes_via_reference):
        checks = Checks(points=1, forbid="KVCache")
        assert checks.call(cheat, 3) is FAILED, cheat.__name__
    assert "attnlib 的参考实现" in capsys.readouterr().out
    assert anp.KVCache(1, 1, 2).append(0, np.ones((1, 2, 2)), np.ones((1, 2, 2)))[0].shape == (1, 2, 2)  # restored


def test_show_puts_a_matrix_on_one_line():
    text = show(np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 5.0]]))
    assert "\n" not in text and text == "[[ 1.,  2.,  3.], [-1.,  0.,  5.]]（形状 (2, 3)）"
    assert "\n" not in show(np.arange(400.0).reshape(20, 20)) and show(np.arange(3.0)) == "[0., 1., 2.]"
