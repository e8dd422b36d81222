"""A real browser (headless Chromium) opens the built pilot chapter: math typeset, Chinese title, screenshot.

The screenshot lands in ``_build/screenshots/ch05-softmax.png`` for people to look at.
``make test`` installs Debian's ``chromium`` when it runs as root; where Chromium is
missing, these tests are skipped with the command that installs it (tests/conftest.py).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import tempfile
from urllib.parse import quote, urlparse
from urllib.request import url2pathname

import pytest
from test_book import PILOT, ROOT, _tail, built_book

from conftest import provision

pytestmark = [pytest.mark.browser, pytest.mark.book, pytest.mark.cjk_font]

SCREENSHOT = ROOT / "_build" / "screenshots" / f"{PILOT}.png"


def _run_chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Headless Chromium, isolated profile, no network chatter, with a virtual time budget for scripts."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        command = [
            provision.find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def page_url() -> str:
    result = built_book()
    assert result.returncode == 0, f"书的构建失败 (book build failed):\n{_tail(result.log)}"
    return (result.html_dir / "book" / f"{PILOT}.html").as_uri()


@pytest.fixture(scope="module")
def dom(page_url) -> str:
    run = _run_chromium("--dump-dom", page_url)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_math_is_typeset_by_the_bundled_mathjax(dom):
    containers = re.findall(r"<mjx-container[^>]*>", dom)
    assert len(containers) >= 20, f"MathJax did not typeset the page ({len(containers)} mjx-container elements)"
    assert any('display="true"' in c for c in containers), "display equations should be typeset too"
    assert "<mjx-merror" not in dom and "data-mjx-error" not in dom, "MathJax reported a TeX error"
    body = dom[dom.index("<article"):]
    assert "\\(" not in body and "\\[" not in body, "raw TeX delimiters left untypeset"


def test_chinese_title_and_text_are_present(dom):
    title = re.search(r"<h1>(.*?)<", dom, re.S)
    assert title and title.group(1).strip() == "Softmax 归一化", title
    assert "<title>Softmax 归一化" in dom
    assert "注意力机制：从原理到实现" in dom
    assert "下载本章练习笔记本" in dom


@pytest.mark.parametrize("word", ["掩码", "注意力"])
def test_offline_search_finds_the_pilot_by_a_chinese_word(page_url, word):
    search = page_url.replace(f"book/{PILOT}.html", "search.html") + "?q=" + quote(word)
    run = _run_chromium("--dump-dom", search)
    assert run.returncode == 0, run.stderr[-3000:]
    results = re.search(r'<ul class="search">(.*?)</ul>', run.stdout, re.S)
    assert results, "the search page showed no result list"
    assert f'href="book/{PILOT}.html' in results.group(1), results.group(1)[:500]


def test_screenshot_is_saved(page_url):
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    run = _run_chromium(f"--screenshot={SCREENSHOT}", "--window-size=1280,2000", "--hide-scrollbars", page_url)
    assert run.returncode == 0, run.stderr[-3000:]
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000, len(data)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)


def test_exercise_previews_wrap_long_lines_at_1100px(page_url, tmp_path):
    """The test cells' long Chinese messages wrap: no code box of the exercises preview scrolls sideways."""
    page = pathlib.Path(url2pathname(urlparse(page_url).path))
    probe = page.with_name(f"{PILOT}.probe.html")  # beside the page, so its CSS and scripts load
    script = """<script>window.addEventListener("load", () => {
      const boxes = Array.from(document.querySelectorAll("div.exercises pre"));
      const wide = boxes.filter(b => b.scrollWidth > b.clientWidth + 1);
      const long = boxes.filter(b => b.textContent.split("\\n").some(line => line.length > 100));
      document.title = "boxes:" + boxes.length + " long:" + long.length + " wide:" + wide.length;
    });</script></body>"""
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script), encoding="utf-8")
    try:
        run = _run_chromium("--window-size=1100,900", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    title = re.search(r"<title>boxes:(\d+) long:(\d+) wide:(\d+)</title>", run.stdout)
    assert title, run.stderr[-2000:]
    boxes, long, wide = map(int, title.groups())
    assert boxes >= 5 and long >= 1, "the preview shows the test cells, some with long lines"
    assert wide == 0, f"{wide} 个代码框在 1100 像素宽的窗口里需要横向滚动"
