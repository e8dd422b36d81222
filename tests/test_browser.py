"""A real browser (headless Chromium) opens the built pilot chapter: math typeset, Chinese title, screenshot.

Chapters 11 and 16's KV-cache memory calculator is driven there too; its checks live in tests/test_kvcalc.py.

The screenshot lands in ``_build/screenshots/ch05-softmax.png`` for people to look at.
The browser is the system's Chromium driven by Playwright (``tests/jupyter_servers.chromium``).
``make test`` installs Debian's ``chromium`` when it runs as root; where Chromium is
missing, these tests are skipped with the command that installs it (tests/conftest.py).
"""

from __future__ import annotations

import re
from urllib.parse import quote

import jupyter_servers
import pytest
from test_book import PILOT, ROOT, _tail, built_book
from test_kvcalc import CH11, CH16, CONFIGS, check_calculator, check_fits_phone

pytestmark = [pytest.mark.browser, pytest.mark.book, pytest.mark.cjk_font]

SCREENSHOT = ROOT / "_build" / "screenshots" / f"{PILOT}.png"

#: Resolves once MathJax (the book's bundled copy) has typeset the page, or at once where the page has none.
TYPESET = """async () => {
  const deadline = Date.now() + 30000;
  while (!(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  return true;
}"""


def _open(page, url: str) -> None:
    """Load ``url`` in ``page`` and wait for its scripts (MathJax's typesetting) to finish."""
    page.goto(url, wait_until="load")
    page.evaluate(TYPESET)


@pytest.fixture(scope="module")
def page_url() -> str:
    result = built_book()
    assert result.returncode == 0, f"书的构建失败 (book build failed):\n{_tail(result.log)}"
    return (result.html_dir / "book" / f"{PILOT}.html").as_uri()


@pytest.fixture(scope="module")
def dom(page_url) -> str:
    with jupyter_servers.chromium() as page:
        _open(page, page_url)
        return page.content()


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
    with jupyter_servers.chromium() as page:
        _open(page, search)
        page.wait_for_selector("#search-results .search-summary", state="attached")  # Sphinx's search finished
        dom = page.content()
    results = re.search(r'<ul class="search">(.*?)</ul>', dom, re.S)
    assert results, "the search page showed no result list"
    assert f'href="book/{PILOT}.html' in results.group(1), results.group(1)[:500]


def test_screenshot_is_saved(page_url):
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    with jupyter_servers.chromium(viewport=(1280, 2000)) as page:
        _open(page, page_url)
        page.screenshot(path=str(SCREENSHOT))
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000, len(data)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)


def test_exercise_previews_wrap_long_lines_at_1100px(page_url):
    """The test cells' long Chinese messages wrap: no code box of the exercises preview scrolls sideways."""
    with jupyter_servers.chromium(viewport=(1100, 900)) as page:
        _open(page, page_url)
        boxes, long, wide = page.evaluate("""() => {
          const boxes = Array.from(document.querySelectorAll("div.exercises pre"));
          const wide = boxes.filter(b => b.scrollWidth > b.clientWidth + 1);
          const long = boxes.filter(b => b.textContent.split("\\n").some(line => line.length > 100));
          return [boxes.length, long.length, wide.length];
        }""")
    assert boxes >= 5 and long >= 1, "the preview shows the test cells, some with long lines"
    assert wide == 0, f"{wide} 个代码框在 1100 像素宽的窗口里需要横向滚动"


@pytest.mark.parametrize(("chapter", "defaults", "configs"), [("ch11-kv-cache", CH11, CONFIGS),
                                                               ("ch16-gqa", CH16, CONFIGS[:3])])
def test_kv_cache_calculator_shows_attnlib_s_numbers(page_url, chapter, defaults, configs):
    """The memory calculator of chapters 11 and 16 (book/_ext/kvcalc.py): typed configurations, invalid entries
    and the reset button, every shown number checked against ``KVCache.nbytes`` (tests/test_kvcalc.py)."""
    url = page_url.replace(f"{PILOT}.html", f"{chapter}.html")
    with jupyter_servers.chromium() as page:
        errors = []
        page.on("pageerror", lambda e: errors.append(e.stack or str(e)))
        _open(page, url)
        assert page.locator(".kvcalc").count() == 1
        check_calculator(page, ".kvcalc", defaults, configs)
        assert not [e for e in errors if "kvcalc" in e], errors  # the theme's own scripts are not tested here
    with jupyter_servers.chromium(viewport=(390, 844)) as page:
        _open(page, url)
        page.wait_for_selector(".kvcalc.kvcalc-ready")
        check_fits_phone(page, ".kvcalc")
