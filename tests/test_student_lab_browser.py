"""The student's JupyterLab as ``make lab`` serves it, in a real Chromium driven by Playwright.

One JupyterLab (``scripts/lab.py``'s command, environment and Chinese nbgrader plugin) on a copy of released
notebooks; the system's Chromium (Debian's ``chromium``, nothing downloaded) opens it as a student would:

* the menus are Chinese (the pinned ``jupyterlab-language-pack-zh-cn`` is the student's default);
* Validate's dialog on an unanswered chapter names each failing cell (练习 1 …) and shows its Chinese
  explanation, never the test's source; on a fully answered quiz it says that only the format was checked;
* the Assignment List says once, in Chinese, that there is no class exchange here, with no
  ``Error fetching courses!``, and the server's terminal shows no exchange traceback.

``make test`` installs Chromium when it runs as root; elsewhere these tests are skipped with the command that
installs it (tests/conftest.py).
"""

from __future__ import annotations

import shutil

import jupyter_servers
import nbformat
import pytest
from lessons import ROOT

from conftest import load_script
from grading import nbgrader_lab, nbgrader_validate

lab = load_script("lab")
pytestmark = [pytest.mark.browser, pytest.mark.grading]

TOKEN = "student-lab-browser"
CH05 = "ch05-softmax/ch05-softmax.ipynb"
QUIZ = "quiz-sdpa/quiz-sdpa.ipynb"
ANSWERED = "answered/quiz-sdpa.ipynb"


def _answered_quiz(path):
    nb = nbformat.read(ROOT / "notebooks" / QUIZ, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source = 'answer = "A"'
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """``(base URL, Playwright page, server log path)`` of the student's lab with three notebooks."""
    tmp = tmp_path_factory.mktemp("student-lab")
    work = tmp / "work"
    for path in (CH05, QUIZ):
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "notebooks" / path, work / path)
    _answered_quiz(work / ANSWERED)
    with jupyter_servers.lab_server(work, tmp, lab.student_environment(), TOKEN) as base, \
            jupyter_servers.chromium() as page:
        yield base, page, tmp / "server.log"


def _open(student, path):
    base, page, _ = student
    page.goto(f"{base}/lab/tree/{path}?reset&token={TOKEN}")  # reset: no earlier notebook is restored
    name = path.rsplit("/", 1)[-1]
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text=name).wait_for(timeout=120_000)
    page.wait_for_selector(".jp-NotebookPanel:visible .jp-Notebook", timeout=120_000)
    return page


def _validate(student, path) -> str:
    page = _open(student, path)
    page.locator(".jp-NotebookPanel:visible .validate-button").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("#validation-message").wait_for(timeout=240_000)
    text = dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    return text


def test_jupyterlab_menus_are_chinese(student):
    page = _open(student, CH05)
    menus = page.locator("#jp-menu-panel .lm-MenuBar-itemLabel").all_inner_texts()
    assert {"文件", "编辑", "运行"} <= set(menus), menus
    assert "File" not in menus and "Edit" not in menus


def test_validate_shows_the_chinese_explanation_and_no_test_source(student):
    text = _validate(student, CH05)
    assert text.startswith("自查结果"), text[:200]
    assert "The following" not in text and "Validation Results" not in text
    assert "from attnlib" not in text and "checks = " not in text and '"""' not in text, "test source shown"
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines.index("练习 1 的测试单元")
    assert lines[first + 1] == "得分 0 / 3。没有通过的检查：", lines[first:first + 3]
    assert "函数还没有实现" in text and "练习 4 的书面回答" in text


def test_validate_on_an_answered_quiz_says_only_the_format_was_checked(student):
    text = _validate(student, ANSWERED)
    assert nbgrader_validate.QUIZ_READABLE in text, text
    assert "Success" not in text and "全部通过" not in text


def test_assignment_list_says_once_in_chinese_that_there_is_no_exchange(student):
    _, page, log = student
    _open(student, CH05)
    page.locator("#jp-menu-panel .lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    panel = page.locator("#assignments")
    panel.get_by_text(nbgrader_lab.NO_EXCHANGE).wait_for(timeout=60_000)
    page.wait_for_timeout(1000)  # every list has answered
    text = panel.inner_text()
    assert text.count(nbgrader_lab.NO_EXCHANGE) == 1, text
    assert "Error fetching courses" not in text and "exchange directory does not exist" not in text
    assert "Released assignments" not in text and "已发布的作业" in text
    server_log = log.read_text(encoding="utf-8")
    assert "Traceback" not in server_log and "ExchangeError" not in server_log, server_log[-3000:]
