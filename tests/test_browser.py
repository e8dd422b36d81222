"""A real browser (headless Chromium) opens the built pilot chapter: math typeset, Chinese title, screenshot.

Chapters 11 and 16's KV-cache memory calculator is driven there too; its checks live in tests/test_kvcalc.py.

The screenshot lands in ``_build/screenshots/ch05-softmax.png`` for people to look at.
The browser is the system's Chromium driven by Playwright (``tests/jupyter_servers.chromium``).
``make test`` installs Debian's ``chromium`` when it runs as root; where Chromium is
missing, these tests are skipped with the command that installs it (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import html
import re
import subprocess
import time
from urllib.parse import quote

import jupyter_servers
import pytest
import yaml
from test_book import _SHELL_ENV, PILOT, ROOT, _tail, built_book
from test_kvcalc import CH11, CH16, CONFIGS, check_calculator, check_fits_phone

pytestmark = [pytest.mark.browser, pytest.mark.book, pytest.mark.cjk_font]

SCREENSHOT = ROOT / "_build" / "screenshots" / f"{PILOT}.png"

#: Resolves once MathJax (the book's bundled copy) has typeset the page, or at once where the page has none.
TYPESET = """async () => {
  if (!document.querySelector("script[src*='mathjax' i]")) return true;  // a page without formulas
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
        # Sphinx's search finished: it lists the pages one by one, then writes the summary ("搜索完成，……")
        page.wait_for_function("() => (document.querySelector('#search-results .search-summary') || {}).innerText")
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
    """The test cells' long Chinese messages wrap: no code box of the exercises preview scrolls sideways (on
    chapter 10, whose test cells have lines of over 100 characters)."""
    with jupyter_servers.chromium(viewport=(1100, 900)) as page:
        _open(page, page_url.replace(f"{PILOT}.html", "ch10-efficiency.html"))
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


# ------------------------------------------------------------------ every page: accessibility and a phone's width

#: axe-core's impacts that fail the audit; "moderate" and "minor" ones are listed in the test output.
BLOCKING = ("critical", "serious")
#: A phone: 390 CSS px wide, touch, mobile layout (the page may widen the layout viewport, as on a real phone).
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "is_mobile": True, "has_touch": True}
#: Smallest comfortable touch target, in CSS px (a fingertip; WCAG 2.5.5).
TAP = 44

AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => n.target.join(" "))}));
}"""

#: The page's width at a phone's size, and what sticks out to the right (not inside something that scrolls itself).
WIDTH = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (e) => ["auto", "scroll", "hidden"].includes(getComputedStyle(e).overflowX);
  const out = [];
  for (const e of document.querySelectorAll("article *")) {
    const box = e.getBoundingClientRect();
    if (box.right <= width + 1 || !box.width) continue;
    let up = e.parentElement, inside = false;
    for (; up && up !== document.body; up = up.parentElement) {
      if (scrolls(up) && up.getBoundingClientRect().right <= width + 1) { inside = true; break; }
    }
    if (!inside) out.push(`${e.tagName.toLowerCase()}.${e.className}: ${(e.textContent || "").trim().slice(0, 50)}`);
  }
  return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, client: width,
          wide: out.slice(0, 5)};
}"""


def _book_pages(html_dir) -> list:
    """Every page of the built book a reader can open (the redirecting index.html aside)."""
    pages = [p for p in sorted(html_dir.rglob("*.html"))
             if not p.relative_to(html_dir).parts[0].startswith("_")]
    return [p for p in pages if 'http-equiv="Refresh"' not in p.read_text(encoding="utf-8")[:500]]


@pytest.fixture(scope="module")
def html_dir():
    result = built_book()
    assert result.returncode == 0, f"书的构建失败 (book build failed):\n{_tail(result.log)}"
    return result.html_dir


@contextlib.contextmanager
def _browser_page(**context):
    """A page of the system's Chromium in a browser context with ``context``'s options (viewport, touch, ...)."""
    from playwright.sync_api import sync_playwright

    from conftest import provision

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=provision.find_chromium(), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-extensions"])
        try:
            page = browser.new_context(locale="zh-CN", **context).new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def _audit(html_dir, context: dict, measure: bool = False) -> dict:
    """axe-core's violations (and, with ``measure``, the page's width) of every page of the book."""
    from conftest import provision

    pages = _book_pages(html_dir)
    assert len(pages) >= 20, pages
    found = {}
    with _browser_page(**context) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for path in pages:
            errors.clear()
            _open(page, path.as_uri())
            width = page.evaluate(WIDTH) if measure else None
            page.add_script_tag(path=provision.find_axe())
            found[path.relative_to(html_dir).as_posix()] = {"axe": page.evaluate(AXE), "width": width,
                                                            "errors": list(errors)}
    return found


@pytest.fixture(scope="module")
def desktop_audit(html_dir) -> dict:
    return _audit(html_dir, {"viewport": {"width": 1280, "height": 900}})


@pytest.fixture(scope="module")
def phone_audit(html_dir) -> dict:
    return _audit(html_dir, PHONE, measure=True)


def _report(audit: dict, where: str, capsys) -> None:
    """Fail on critical/serious violations; list the others in the test output."""
    blocking, listed = [], []
    for name, found in audit.items():
        for v in found["axe"]:
            line = f"{name}: {v['id']}（{v['impact']}，{len(v['nodes'])} 处）{v['help']}：{v['nodes'][:3]}"
            (blocking if v["impact"] in BLOCKING else listed).append(line)
    with capsys.disabled():
        print(f"\naxe-core {where}：{len(audit)} 页，严重违规 {len(blocking)} 条，其他 {len(listed)} 条"
              + "".join(f"\n  {line}" for line in listed))
    assert not blocking, f"axe-core 在{where}发现严重（critical/serious）的无障碍问题：\n" + "\n".join(blocking)


@pytest.mark.axe
def test_axe_finds_no_critical_or_serious_violation_on_any_page_at_desktop_width(desktop_audit, capsys):
    """Every built page, at 1280 px, against axe-core's default rules (none turned off)."""
    _report(desktop_audit, "桌面宽度（1280 像素）", capsys)


@pytest.mark.axe
def test_axe_finds_no_critical_or_serious_violation_on_any_page_on_a_phone(phone_audit, capsys):
    """The same at a phone's width, where the theme shows other controls (menu buttons instead of sidebars)."""
    _report(phone_audit, "手机宽度（390 像素）", capsys)


@pytest.mark.axe
def test_no_page_scrolls_sideways_on_a_390px_phone(phone_audit):
    """A page wider than the phone makes it shrink the whole text; code blocks and tables scroll inside themselves."""
    wide = {name: found["width"] for name, found in phone_audit.items()
            if found["width"]["scroll"] > 390 or found["width"]["inner"] != 390}
    assert not wide, f"这些页面在 390 像素宽的手机上要横向滚动（页面宽度与伸出去的元素）：{wide}"


@pytest.mark.axe
def test_no_page_throws_a_script_error(desktop_audit):
    """A reader with the browser's console open sees no error on any page (a script declared twice used to throw
    "Identifier 'THEBE_JS_URL' has already been declared" on every page)."""
    thrown = {name: found["errors"] for name, found in desktop_audit.items() if found["errors"]}
    assert not thrown, f"这些页面在浏览器里抛出了脚本错误：{thrown}"


def test_the_theme_buttons_name_what_they_show(html_dir):
    """The fix of axe's label-content-name-mismatch is in our templates (book/_ext/layout_templates), not a rule off."""
    html = (html_dir / "book" / f"{PILOT}.html").read_text(encoding="utf-8")
    search = re.findall(r'<button class="btn search-button-field[^>]*>', html)
    assert search and all("aria-label" not in b and 'aria-keyshortcuts="Control+K"' in b for b in search), search
    switch = re.search(r'<button[^>]*theme-switch-button[^>]*aria-label="([^"]*)"', html)
    assert switch and all(mode in switch.group(1) for mode in ("亮色", "暗色", "跟随系统")), switch
    assert '<nav class="bd-logo-nav" aria-label="本书首页">' in html
    # and the theme's other English names (book/_ext/layout_templates): the sidebar's contents and its two toggles
    assert '<nav class="bd-links bd-docs-nav" aria-label="全书目录">' in html
    for english in ('aria-label="Main"', "Toggle primary sidebar", "Toggle secondary sidebar", "Color mode"):
        assert english not in html, english


def test_the_step_player_and_self_check_work_by_touch_on_a_phone(html_dir):
    """Chapter 1 on a phone: every control is a fingertip's size, and taps step the player and answer a question."""
    url = (html_dir / "book" / "ch01-pipeline.html").as_uri()
    with _browser_page(**PHONE) as page:
        _open(page, url)
        sizes = page.evaluate("""() => Array.from(document.querySelectorAll(
            ".attn-player-controls button, .attn-player-slider, .selfcheck-option, .selfcheck-check")).map((e) => {
              const box = e.getBoundingClientRect();
              return [e.className || e.textContent.trim(), Math.round(box.width), Math.round(box.height)];
            })""")
        small = [s for s in sizes if min(s[1], s[2]) < TAP]
        assert len(sizes) >= 10 and not small, f"手机上这些控件小于 {TAP} 像素，不便用手指点：{small}"
        player = page.locator(".attn-player")
        player.locator("button[data-action='next']").tap()
        assert player.get_attribute("data-current") == "1"
        assert player.locator(".attn-player-caption").inner_text().startswith("2 / ")
        player.locator("button[data-action='last']").tap()
        frames = int(player.get_attribute("data-frames"))
        assert player.get_attribute("data-current") == str(frames - 1)
        question = page.locator(".selfcheck-question[data-multi='false']").first
        wrong = question.locator(".selfcheck-option[data-correct='false']").first
        wrong.tap()
        assert question.locator(".selfcheck-feedback").inner_text().startswith("✗")
        question.locator(".selfcheck-option[data-correct='true']").first.tap()
        assert question.locator(".selfcheck-feedback").inner_text().startswith("✓")



# ------------------------------------------------------------------ the whole book as one PDF (make pdf)

def _toc_titles() -> list[tuple[str, list[str]]]:
    """Each part's caption and its chapters' titles as the PDF's bookmarks must read them (the sidebar's)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))

    def title(entry):
        if entry.get("title"):
            return entry["title"]
        text = (ROOT / f"{entry['file']}.md").read_text(encoding="utf-8")
        return re.search(r"^# (.+)$", text, re.M).group(1).strip()
    return [(part["caption"], [title(entry) for entry in part["chapters"]]) for part in toc["parts"]]


def _fonts(reader) -> dict:
    """Every font the PDF's pages use: base name -> whether its glyphs are inside the PDF."""
    fonts = {}
    for page in reader.pages:
        for font in (page["/Resources"].get("/Font") or {}).values():
            font = font.get_object()
            if font["/Subtype"] == "/Type3":  # glyphs drawn by the PDF's own procedures
                fonts[f"Type3 {len(fonts)}"] = True
                continue
            described = font["/DescendantFonts"][0].get_object() if "/DescendantFonts" in font else font
            descriptor = described["/FontDescriptor"].get_object()
            fonts[str(font["/BaseFont"])] = any(k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3"))
    return fonts


@pytest.mark.slow
def test_make_pdf_as_written_prints_the_whole_book_with_bookmarks(html_dir, capsys):
    """README's ``make pdf``, typed in the copy ``make book`` built: the whole executed book, offline, as one PDF."""
    from pypdf import PdfReader

    from conftest import provision

    checkout = html_dir.parents[1]
    start = time.perf_counter()
    run = subprocess.run(["bash", "-c", "make pdf"], cwd=checkout, env=_SHELL_ENV, capture_output=True, text=True,
                         timeout=900, check=False)
    seconds = time.perf_counter() - start
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    pdf = checkout / "_build" / "pdf" / "attention-zh.pdf"
    assert "书的输入没有变化" in out, "make book 已经构建过这本书，make pdf 不应再构建一次"
    assert "全书 PDF 已生成" in out and str(pdf) in out, out[-2000:]
    formulas = int(re.search(r"(\d+) 处公式", out).group(1))
    assert formulas >= 1000, out[-2000:]  # MathJax typeset them (an error in any would have failed the command)
    reader = PdfReader(pdf)
    title = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
    with capsys.disabled():
        print(f"\nmake pdf：{seconds:.0f} 秒，{len(reader.pages)} 页，{pdf.stat().st_size / 2**20:.1f} MB，"
              f"{formulas} 处公式")
    assert reader.metadata.title == title and title in reader.pages[0].extract_text()
    assert len(reader.pages) >= 150, len(reader.pages)

    # bookmarks: 目录, 前言, then each part with its chapters, in the order of _toc.yml, each on a later page
    outline = reader.outline
    top = [item for item in outline if not isinstance(item, list)]
    parts = _toc_titles()
    assert [item.title for item in top] == ["目录", "前言", *[caption for caption, _ in parts]], [i.title for i in top]
    pages = []
    for caption, chapters in parts:
        part = next(i for i, item in enumerate(outline) if not isinstance(item, list) and item.title == caption)
        children = outline[part + 1]
        assert isinstance(children, list), caption
        # a chapter title that wraps onto two lines loses the space at the break in Chromium's bookmark
        # ("Gated DeltaNet" -> "GatedDeltaNet"): the titles are compared without their spaces
        marks = [re.sub(r"\s+", "", item.title) for item in children if not isinstance(item, list)]
        assert marks == [re.sub(r"\s+", "", chapter) for chapter in chapters], (caption, marks)
        for item, chapter in zip([c for c in children if not isinstance(c, list)], chapters, strict=True):
            number = reader.get_destination_page_number(item)
            # Chinese text is text: the chapter's page begins with its title (pypdf spaces out "、"; ignore spaces)
            text = re.sub(r"\s+", "", reader.pages[number].extract_text())
            assert text.startswith(re.sub(r"\s+", "", chapter)), (chapter, number, text[:80])
            pages.append(number)
    assert pages == sorted(pages) and len(set(pages)) == len(pages), pages
    toc_page = reader.pages[reader.get_destination_page_number(top[0])]
    links = [a.get_object() for a in toc_page.get("/Annots") or [] if a.get_object()["/Subtype"] == "/Link"]
    assert len(links) >= sum(len(chapters) for _, chapters in parts), "目录页的每一章都应链接到它在 PDF 里的位置"

    # every font embedded, the Chinese one included; no formula left as TeX
    fonts = _fonts(reader)
    assert fonts and all(fonts.values()), {name: inside for name, inside in fonts.items() if not inside}
    cjk = [family.replace(" ", "") for family in provision.cjk_fonts()]
    assert any(family in name for name in fonts for family in cjk), (sorted(fonts), cjk)
    text = re.sub(r"\s+", "", "".join(page.extract_text() for page in reader.pages))
    assert text.count("注意力") >= 500
    one_page = (checkout / "_build" / "singlehtml" / "attention-zh.html").read_text(encoding="utf-8")
    displays = [re.sub(r"\s+", "", html.unescape(tex)) for tex in re.findall(
        r'<div class="math notranslate nohighlight">\s*\\\[(.*?)\\\]\s*</div>', one_page, re.S)]
    assert len(displays) >= 30 and not [tex for tex in displays if tex in text], "有公式没有排版，以 TeX 原文印进了 PDF"

    # the figures: every executed figure of the HTML book, and chapter 1's step player (its first frame)
    figures = set()
    for page in (html_dir / "book").glob("*.html"):
        figures |= set(re.findall(r'<img[^>]*src="../_images/([^"]+)"', page.read_text(encoding="utf-8")))
    images = set()
    for page in reader.pages:
        for reference in (page["/Resources"].get("/XObject") or {}).values():
            if reference.get_object()["/Subtype"] == "/Image":
                images.add(reference.idnum)
    assert len(figures) >= 25 and len(images) >= len(figures) + 1, (len(images), len(figures))

    # the download menu of every page links to the copy make pdf put into the HTML book
    page = (html_dir / "book" / f"{PILOT}.html").read_text(encoding="utf-8")
    link = re.search(r'<a href="([^"]+)"[^>]*btn-download-book-pdf-button.*?全书 PDF', page, re.S)
    assert link, "下载菜单里没有“全书 PDF”"
    target = (html_dir / "book" / link.group(1)).resolve()
    assert target.read_bytes() == pdf.read_bytes(), target


def test_the_pdf_is_printed_offline_or_not_at_all(tmp_path):
    """A page that asks the network for anything is refused: ``make pdf`` fails and names the address."""
    from conftest import load_script

    build_pdf = load_script("build_pdf")
    page = tmp_path / "book.html"
    page.write_text('<!doctype html><html lang="zh-CN"><body><article class="bd-article"><h1>前言</h1>'
                    '<img src="https://example.org/figure.png" alt="远处的图"></article></body></html>',
                    encoding="utf-8")
    plan = {"title": "书", "author": "编写组", "note": "", "root": "book/intro", "page": "book/intro.html",
            "root_title": "前言", "parts": [], "css": ""}
    with pytest.raises(build_pdf.PdfBuildError, match="网络.*离线.*https://example.org/figure.png"):
        build_pdf.print_pdf(page, tmp_path / "book.pdf", plan)
    assert not (tmp_path / "book.pdf").exists()
