"""The student's JupyterLab as ``make lab`` serves it, in a real Chromium driven by Playwright.

One JupyterLab (``scripts/lab.py``'s command, environment and Chinese nbgrader plugin) on a copy of released
notebooks; the system's Chromium (Debian's ``chromium``, nothing downloaded) opens it as a student would:

* the menus are Chinese (the pinned ``jupyterlab-language-pack-zh-cn`` is the student's default);
* Validate's dialog on an unanswered chapter names each failing cell (练习 1 …) and shows its Chinese
  explanation, never the test's source; on a fully answered quiz it says that only the format was checked;
* the Assignment List says once, in Chinese, that there is no class exchange here, with no
  ``Error fetching courses!``, and the server's terminal shows no exchange traceback.
* a test cell's score (an execute_result with an empty HTML form, which nbgrader needs) shows no lone
  ``[n]:`` prompt under the cell; an ordinary result (``6 * 7``) keeps its prompt.

``make test`` installs Chromium when it runs as root; elsewhere these tests are skipped with the command that
installs it (tests/conftest.py).
"""

from __future__ import annotations

import re
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
OUTPUTS = "outputs/ch05-softmax.ipynb"  # ch05 with one more cell, after exercise 1's test: ``6 * 7``


def _answered_quiz(path):
    nb = nbformat.read(ROOT / "notebooks" / QUIZ, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source = 'answer = "A"'
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _with_a_plain_result(path):
    """ch05's release with a cell ``6 * 7`` right after exercise 1's test cell (an ordinary execute_result)."""
    nb = nbformat.read(ROOT / "notebooks" / CH05, as_version=4)
    test = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id")
                == "test_softmax_stable")
    nb.cells.insert(test + 1, nbformat.v4.new_code_cell("6 * 7"))
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
    _with_a_plain_result(work / OUTPUTS)
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
    # the exchange's traceback must not reach the terminal; jupyter_server's own transient errors (a kernel
    # websocket opened while the kernel is still starting answers 500 with a traceback) are not the exchange's
    tracebacks = [t.split("\n[")[0] for t in server_log.split("Traceback")[1:]]  # each up to the next record
    exchange = [t[:1500] for t in tracebacks if "nbgrader" in t or "exchange" in t.lower()]
    assert not exchange and "ExchangeError" not in server_log, exchange or server_log[-3000:]


def test_a_test_cells_score_shows_no_empty_prompt_and_other_results_keep_theirs(student):
    """A test cell ends with its score (``attnlib.grading.Score``): nbgrader reads partial credit from that
    execute_result, whose HTML form is empty.  JupyterLab would show a lone ``[n]:`` under the cell's Chinese
    summary; the rule in the plugin's copy (grading/nbgrader_lab.py) hides an output that shows nothing.
    """
    page = _open(student, OUTPUTS)
    cells = page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")
    # JupyterLab renders a long notebook's cells a few at a time after the panel appears (slower on a busy machine)
    cells.locator(".jp-InputArea", has_text="练习 1 的测试").first.wait_for(timeout=120_000)
    first = next(i for i in range(cells.count()) if "import numpy" in cells.nth(i).inner_text())
    test = next(i for i in range(cells.count())
                if "练习 1 的测试" in cells.nth(i).locator(".jp-InputArea").inner_text())
    cells.nth(first).locator(".jp-InputPrompt").click()  # command mode on the first code cell
    for _ in range(first, test + 2):  # run it and every cell down to ``6 * 7``, as Shift+Enter does
        page.keyboard.press("Shift+Enter")
    plain = cells.nth(test + 1)
    plain.locator(".jp-OutputArea-output", has_text="42").wait_for(timeout=180_000)
    scored = cells.nth(test)
    scored.locator(".jp-OutputArea-output", has_text="得分 0 / 3").wait_for(timeout=60_000)
    prompts = [t.strip() for t in scored.locator(".jp-OutputArea-prompt:visible").all_inner_texts()]
    assert not [t for t in prompts if re.fullmatch(r"\[\d+\]:", t)], prompts
    result = scored.locator(".jp-OutputArea-child.jp-OutputArea-executeResult")
    assert result.count() == 1 and not result.is_visible(), "the score is still in the notebook, not shown"
    shown = [t.strip() for t in plain.locator(".jp-OutputArea-prompt:visible").all_inner_texts()]
    assert len(shown) == 1 and re.fullmatch(r"\[\d+\]:", shown[0]), shown
