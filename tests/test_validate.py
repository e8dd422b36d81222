"""Validate, as a student meets it: ``nbgrader validate`` and JupyterLab's Validate button say in Chinese what failed.

Both run nbgrader's validator on a real notebook in a real kernel, with the
course's ``nbgrader_config.py`` (found from the repository root, as ``make lab``
and the 学生指南's command use it).  The button's server handler is called
the way the Jupyter server calls it, without a browser.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest
from lessons import ROOT

from attnlib import quiz
from grading import nbgrader_validate

pytestmark = pytest.mark.grading

NBGRADER = [sys.executable, "-m", "nbgrader"]
CH05 = ROOT / "notebooks" / "ch05-softmax" / "ch05-softmax.ipynb"
QUIZ = ROOT / "notebooks" / "quiz-sdpa" / "quiz-sdpa.ipynb"


def _validate(path) -> str:
    run = subprocess.run([*NBGRADER, "validate", str(path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _with_answer(tmp_path, grade_id: str, source: str):
    nb = nbformat.read(QUIZ, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    cell.source = source
    path = tmp_path / QUIZ.name
    nbformat.write(nb, path)
    return path


def test_the_wrapper_keeps_every_character_and_fits_the_width():
    line = "    ✗ 二维输入按最后一维（每一行）归一化：未通过，期望 [[0.090031, 0.244728, 0.665241]]" * 3
    pieces = nbgrader_validate.wrap(line, 90, "      ")
    assert "".join(p.removeprefix("      ") if i else p for i, p in enumerate(pieces)) == line
    assert all(nbgrader_validate.display_width(p) <= 90 for p in pieces) and len(pieces) >= 3


def test_an_unanswered_chapter_says_in_chinese_which_checks_failed(tmp_path):
    shutil.copy(CH05, tmp_path)
    out = _validate(tmp_path / CH05.name)
    assert "Partial credit" not in out and "The error was" not in out and "VALIDATION FAILED" not in out
    assert "有 4 个计分的单元还没有拿到满分" in out and out.count("没有拿到满分：") == 4
    assert "练习 1 的测试单元没有拿到满分：" in out and "练习 4 的书面回答没有拿到满分：" in out
    assert "from attnlib" not in out and "checks = " not in out, "the test cells' source is not shown"
    assert out.count("没有通过的检查") == 3 and "这里还没有你的回答：双击这个单元" in out  # 3 tests, 1 written
    assert "得分 0 / 3。没有通过的检查：" in out and "函数还没有实现" in out
    assert "✗ 【要点】一维输入 [1, 2, 3]：未通过" in out
    assert not any(line.endswith("...") for line in out.splitlines()), "no line is cut off"
    assert max(nbgrader_validate.display_width(line) for line in out.splitlines()) <= 90


def test_an_invalid_quiz_answer_is_explained_and_a_full_notebook_passes(tmp_path, capsys):
    out = _validate(_with_answer(tmp_path, "q01", 'answer = "Z"'))
    quiz.check_format("Z", "ABCD")
    reason = capsys.readouterr().out.strip()  # what the quiz's own check says about "Z"
    assert reason.startswith("格式检查未通过") and reason in out
    answered = tmp_path / "answered"
    answered.mkdir()
    nb = nbformat.read(QUIZ, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source = 'answer = "AB"' if "多选" in cell.source else 'answer = "A"'
    nbformat.write(nb, answered / QUIZ.name)
    out = _validate(answered / QUIZ.name)
    assert nbgrader_validate.QUIZ_READABLE in out.replace("\n", "") and "全部通过" not in out  # format, not answers


def test_the_command_line_says_nothing_in_english(tmp_path):
    shutil.copy(CH05, tmp_path)
    run = subprocess.run([*NBGRADER, "validate", str(tmp_path / CH05.name)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Validating" not in run.stderr and "Kernel is running over TCP" not in run.stderr, run.stderr
    assert not run.stderr.strip(), run.stderr


def test_the_lab_button_gets_the_same_chinese_explanation(tmp_path, monkeypatch):
    from nbgrader.server_extensions.validate_assignment import handlers

    shutil.copy(CH05, tmp_path)
    monkeypatch.chdir(ROOT)  # the server runs where `make lab` was started: the course's config is found there
    monkeypatch.setattr(handlers, "Validator", handlers.Validator)  # whatever install() changes is undone after

    class Server:  # what validate_notebook uses of its handler: the root folder, the config loader, a log
        root_dir = str(tmp_path)
        load_config = handlers.ValidateAssignmentHandler.load_config

        class log:
            error = staticmethod(print)

    reply = handlers.ValidateAssignmentHandler.validate_notebook(Server(), CH05.name)
    assert handlers.Validator is nbgrader_validate.ChineseValidator
    assert reply["success"] is True
    failed = reply["value"]["failed"]
    assert len(failed) == 4 and sum("没有通过的检查" in cell["error"] for cell in failed) == 3
    assert [cell["source"] for cell in failed] == [
        "练习 1 的测试单元", "练习 2 的测试单元", "练习 3 的测试单元", "练习 4 的书面回答"]  # no test source
    assert "得分 0 / 3。没有通过的检查：" in failed[0]["error"] and "函数还没有实现" in failed[0]["error"]
    assert "Partial credit" not in json.dumps(reply["value"], ensure_ascii=False)
    assert "&lt;无结果&gt;" in failed[0]["error"]  # shown as text in the dialog (it sets innerHTML)


def test_the_lab_button_on_an_answered_quiz_carries_the_format_only_message(tmp_path, monkeypatch):
    from nbgrader.server_extensions.validate_assignment import handlers

    nb = nbformat.read(QUIZ, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source = 'answer = "A"'
    nbformat.write(nb, tmp_path / QUIZ.name)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(handlers, "Validator", handlers.Validator)

    class Server:
        root_dir = str(tmp_path)
        load_config = handlers.ValidateAssignmentHandler.load_config

        class log:
            error = staticmethod(print)

    reply = handlers.ValidateAssignmentHandler.validate_notebook(Server(), QUIZ.name)
    assert reply["success"] is True and reply["value"] == {"message": nbgrader_validate.QUIZ_READABLE}


def test_cells_are_named_by_their_section():
    labels = nbgrader_validate.cell_labels(nbformat.read(QUIZ, as_version=4))
    assert labels["q01_test"] == "第 1 题" and labels["q10_test"] == "第 10 题"
    labels = nbgrader_validate.cell_labels(nbformat.read(CH05, as_version=4))
    assert labels["test_softmax_stable"] == "练习 1" and labels["test_masked_softmax"] == "练习 3"
    assert nbgrader_validate.is_quiz(nbformat.read(QUIZ, as_version=4))
    assert not nbgrader_validate.is_quiz(nbformat.read(CH05, as_version=4))
