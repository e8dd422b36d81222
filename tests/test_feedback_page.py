"""The feedback page a student receives: items named as in the notebook, light, math typeset offline.

The pages come from the instructor's chain on the kept samples (``scripts/grade_samples.py``: generate,
autograde, ``nbgrader generate_feedback`` with the course's ``nbgrader_config.py``), for a chapter
(``练习 1`` …) and a quiz (``第 1 题`` …).  One page is then opened in the system Chromium through
Playwright (``tests/jupyter_servers.chromium``): Chinese labels, every formula drawn, no request leaving
the machine, no hidden test in what the student reads.  Without Chromium the browser test is skipped
with the command that installs it (tests/conftest.py).
"""

from __future__ import annotations

import html
import re
import shutil

import jupyter_servers
import pytest
from assignments import hidden_lines

from conftest import load_script

grade_samples = load_script("grade_samples")
pytestmark = pytest.mark.grading

CHAPTER, QUIZ = "ch05-softmax", "quiz-sdpa"
#: A page used to weigh about 2.2 MB, nearly all of it MathJax's tex-svg.js inlined in every page.
MAX_BYTES = 400_000


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return grade_samples.run_chain(tmp_path_factory.mktemp("course"), [CHAPTER, QUIZ], timeout=5)


def page(report, assignment: str, student: str) -> str:
    (path,) = report.feedback(assignment, student)
    return path.read_text(encoding="utf-8")


def text_of(raw: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<(style|script|svg)\b.*?</\1>", "", raw, flags=re.S)))


def test_items_are_named_as_the_student_sees_them_in_the_notebook(report):
    chapter = text_of(page(report, CHAPTER, "partial"))
    assert "测试单元 练习 1（得分：1.0 / 3.0）" in chapter
    assert "书面作答 练习 4（得分：待人工批改，满分 2.0）" in chapter
    assert "测试单元：练习 2" in chapter
    assert not re.search(r"test_softmax_\w+|test_masked_softmax|written_shift", chapter)
    quiz = text_of(page(report, QUIZ, "all-correct"))
    assert "测试单元 第 1 题（得分：1.0 / 1.0）" in quiz and "测试单元：第 10 题" in quiz
    assert not re.search(r"\bq\d\d_test\b", quiz)


def test_no_empty_out_prompt_after_a_test_cell(report):
    for assignment, student in ((CHAPTER, "partial"), (QUIZ, "mixed-formats")):
        raw = page(report, assignment, student)
        assert not re.search(r'output_prompt">Out\[\d+\]:</div>\s*<div class="[^"]*output_execute_result"></div>',
                             raw), assignment
        assert "output_execute_result" not in raw, assignment


def test_pages_are_light_and_their_math_is_typeset_when_generated(report):
    for assignment in (CHAPTER, QUIZ):
        for path in sorted((report.root / "feedback").glob(f"*/{assignment}/*.html")):
            raw = path.read_text(encoding="utf-8")
            assert len(raw.encode()) < MAX_BYTES, (path, len(raw.encode()))
            assert "<script" not in raw, path  # nothing to run: no MathJax in the page
    raw = page(report, CHAPTER, "partial")
    assert raw.count("<mjx-container") >= 15 and 'display="true"' in raw
    assert 'id="MJX-SVG-global-cache"' in raw and "merror" not in raw.replace('data-mml-node="merror"] ', "")
    assert "\\mathrm" not in text_of(raw) and not re.search(r"\$[^$\n]{1,80}\$", text_of(raw))


def test_without_node_the_page_still_typesets_offline_with_the_inlined_bundle(monkeypatch):
    from grading import nbgrader_feedback

    monkeypatch.setattr(nbgrader_feedback.shutil, "which", lambda name: None)
    out = nbgrader_feedback.offline_math("<p>$x^2$</p>")
    assert out.startswith("<p>$x^2$</p>") and "window.MathJax" in out and len(out) > 1_000_000
    assert not re.search(r"<script\b[^>]*\bsrc=", out)


@pytest.mark.browser
@pytest.mark.cjk_font
@pytest.mark.skipif(shutil.which("node") is None and shutil.which("nodejs") is None,
                    reason="没有 Node.js：反馈页里的公式改由内嵌的 MathJax 在浏览器里排版（见上一条测试）")
def test_a_feedback_page_in_chromium(report):
    (path,) = report.feedback(CHAPTER, "partial")
    requests, blocked = [], []
    with jupyter_servers.chromium() as browser_page:
        browser_page.on("request", lambda request: requests.append(request.url))
        browser_page.route(re.compile(r"^(https?|wss?|ftp)://"),
                           lambda route: (blocked.append(route.request.url), route.abort()))
        browser_page.goto(path.as_uri(), wait_until="load")
        seen = browser_page.inner_text("body")
        math = browser_page.evaluate("""() => {
          const svgs = [...document.querySelectorAll("mjx-container > svg")];
          const uses = [...document.querySelectorAll("mjx-container use")];
          const href = (u) => (u.getAttribute("xlink:href") || u.getAttribute("href") || "").slice(1);
          return {drawn: svgs.filter((s) => s.getBoundingClientRect().width > 2).length, total: svgs.length,
                  display: document.querySelectorAll('mjx-container[display="true"]').length,
                  uses: uses.length, dangling: uses.filter((u) => !document.getElementById(href(u))).length,
                  errors: document.querySelectorAll('[data-mml-node="merror"]').length};
        }""")
        title = browser_page.title()
    assert title == f"{CHAPTER} 的批改反馈"
    assert "测试单元 练习 1（得分：1.0 / 3.0）" in seen and "测试单元：练习 3" in seen and "你的答案" in seen
    assert "test_softmax_stable" not in seen and "Out[" not in seen
    assert math["total"] >= 15 and math["drawn"] == math["total"] and math["display"] >= 1, math
    assert math["uses"] > 50 and math["dangling"] == 0 and math["errors"] == 0, math
    assert not re.search(r"\$[^$\n]{1,80}\$|\\(frac|mathrm|exp)\b", seen), "raw TeX left on the page"
    hidden = hidden_lines(CHAPTER)
    assert len(hidden) > 10 and not [line for line in hidden if line in seen]
    assert "HIDDEN TESTS" not in seen
    assert not blocked, f"反馈页向外发出了请求：{blocked}"
    assert all(url.startswith(("file:", "data:", "about:")) for url in requests), requests
