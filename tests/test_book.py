"""The Jupyter Book: builds with -W, offline, Chinese search and figures, cached execution, exercises shown.

The whole book is built once per test session by ``make book``, typed as written
in a throw-away copy of the checkout (``built_book()``, shared with
tests/test_browser.py and tests/test_ch01.py); the extension tests build tiny
Sphinx projects of their own.
"""

from __future__ import annotations

import atexit
import functools
import html.parser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
import yaml
from checkout_copy import copy_checkout
from lessons import code_cells

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
PILOT = "ch05-softmax"
RELEASE_NB = ROOT / "notebooks" / PILOT / f"{PILOT}.ipynb"

pytestmark = [pytest.mark.book, pytest.mark.cjk_font]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


build_book = load_script("build_book")
exercises_ext = _load("exercises_ext", ROOT / "book" / "_ext" / "exercises.py")
fignumbers_ext = _load("fignumbers_ext", ROOT / "book" / "_ext" / "fignumbers.py")


#: A login shell's environment (no virtual environment on PATH): ``make`` sets up its own, as for a reader.
_SHELL_ENV = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
              "PATH": "/usr/local/bin:/usr/bin:/bin"}


@functools.cache
def built_book():
    """``make book``, typed as the README writes it, in a throw-away copy of the checkout; return a BuildResult.

    Built once per process (the one full build of the suite; tests/test_browser.py and tests/test_ch01.py use
    it too).  The copy (tests/checkout_copy.py) keeps the checkout's own ``_build/`` untouched; the result is
    read from the copy's ``_build/html``, and ``log`` holds everything ``make book`` printed.
    """
    copy = copy_checkout(Path(tempfile.mkdtemp(prefix="attn-book-")) / "repo")
    atexit.register(shutil.rmtree, copy.parent, ignore_errors=True)
    start = time.perf_counter()
    run = subprocess.run(["bash", "-c", "make book"], cwd=copy, env=_SHELL_ENV, capture_output=True, text=True,
                         check=False)
    return build_book.BuildResult(run.returncode, time.perf_counter() - start, copy / "_build" / "html",
                                  run.stdout + run.stderr)


def _tail(log: str | None, n: int = 60) -> str:
    return "\n".join((log or "").splitlines()[-n:])


@pytest.fixture(scope="session")
def book():
    result = built_book()
    assert result.returncode == 0, f"书的构建失败 (book build failed):\n{_tail(result.log)}"
    return result


@pytest.fixture(scope="session")
def pilot_html(book) -> str:
    return (book.html_dir / "book" / f"{PILOT}.html").read_text(encoding="utf-8")


class _AssetParser(html.parser.HTMLParser):
    """Collects the URLs of scripts, stylesheets, fonts and images a page loads."""

    def __init__(self):
        super().__init__()
        self.loads: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "embed") and a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href") and set((a.get("rel") or "").split()) & {
            "stylesheet", "preload", "modulepreload", "prefetch", "icon"}:
            self.loads.append(a["href"])


# ---------------------------------------------------------------- the real book


def test_build_executes_the_pilot_and_passes_with_warnings_as_errors(book):
    """``make book`` as written (README, 前言): a clean build executes the lessons and ends with where to look."""
    assert "Executed notebook" in book.log, "a clean build must execute the lesson"
    assert "书已构建完成" in book.log and (book.html_dir / "index.html").as_uri() in book.log, _tail(book.log)
    assert "build succeeded." in book.log  # with -W, any warning would read "build finished with problems"
    assert (book.html_dir / "index.html").is_file()
    for page in ("intro", PILOT, "student-guide", "instructor-guide"):
        assert (book.html_dir / "book" / f"{page}.html").is_file(), page


def test_no_page_loads_anything_from_another_host(book):
    pages = sorted(book.html_dir.rglob("*.html"))
    assert len(pages) >= 5
    remote = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        parser = _AssetParser()
        parser.feed(text)
        remote += [f"{page.name}: {url}" for url in parser.loads if urlparse(url).scheme in ("http", "https", "")
                   and urlparse(url).netloc]
        remote += [f"{page.name}: {m}" for m in re.findall(r"https?://[^\s\"'<>]*mathjax[^\s\"'<>]*", text, re.I)]
    assert not remote, remote


def test_mathjax_is_bundled_and_loaded_locally(book, pilot_html):
    src = re.search(r'<script[^>]+src="([^"]*mathjax[^"]*)"', pilot_html)
    assert src, "the pilot page must load MathJax"
    local = (book.html_dir / "book" / src.group(1).split("?")[0]).resolve()
    assert local.is_file() and local.stat().st_size > 100_000, local
    assert (book.html_dir / "_static" / "mathjax" / "output" / "chtml" / "fonts").is_dir()
    assert pilot_html.count(r"\(") + pilot_html.count(r"\[") >= 20, "the page should hold TeX math for MathJax"


def _search_index(book) -> dict:
    text = (book.html_dir / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1: text.rindex(")")])


@pytest.mark.parametrize("word", ["掩码", "注意力", "归一化", "溢出", "雅可比矩阵"])
def test_search_index_finds_the_pilot_by_chinese_words(book, word):
    """Sphinx files a word under ``titleterms`` for pages whose headings hold it, else under ``terms``."""
    index = _search_index(book)
    pilot = index["docnames"].index(f"book/{PILOT}")
    docs = set()
    for table in ("terms", "titleterms"):
        hits = index[table].get(word, [])
        docs |= set(hits if isinstance(hits, list) else [hits])
    assert docs, f"{word!r} not in the search index (jieba installed? html_search_language: zh? user dict?)"
    assert pilot in docs, (word, [index["docnames"][d] for d in docs])


def test_search_language_is_chinese(book):
    options = (book.html_dir / "_static" / "documentation_options.js").read_text(encoding="utf-8")
    assert "LANGUAGE: 'zh-CN'" in options


def test_title_author_footer_and_ui_are_ours_and_chinese(book, pilot_html):
    assert '<html lang="zh-CN"' in pilot_html
    assert "注意力机制：从原理到实现" in pilot_html
    assert "注意力机制公开课编写组" in pilot_html
    assert "CC BY-SA 4.0" in pilot_html
    for default in ("Jupyter Book community", "Search this book", "Copyright 2023", "By The"):
        assert default not in pilot_html, default
    assert "搜索" in pilot_html and "目录" in pilot_html  # translated UI strings


def test_pilot_page_shows_executed_figures_and_outputs(book, pilot_html):
    assert "<h1>Softmax 归一化" in pilot_html
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', pilot_html)
    assert len(images) >= 2, images
    for src in images:
        assert (book.html_dir / "book" / src).resolve().is_file(), src
    assert "0.6857" in pilot_html, "the two-score example's computed weight should be on the page"
    executed = nbformat.read(book.html_dir.parent / "jupyter_execute" / "book" / f"{PILOT}.ipynb", as_version=4)
    streams = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"]
    assert streams and not [o for o in streams if o.name == "stderr"]


# ---------------------------------------------------------------- figures: described and numbered

#: An alt text that only says where the image is: a file name, an image folder, or a hash.
_NOT_A_DESCRIPTION = re.compile(r"\.(?:png|jpe?g|gif|svg|webp)\b|_images|[0-9a-f]{12,}", re.I)
_CHINESE = re.compile(r"[\u4e00-\u9fff]")


def _soup(page: Path):
    from bs4 import BeautifulSoup

    return BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")


def img_alt_problems(html_dir: Path) -> list[str]:
    """Every ``<img>`` of the built book whose alt text is no description: empty, a file name, a path or a hash.

    A description is Chinese (the book's language), so an alt text without a Chinese character counts too.
    """
    problems = []
    for page in sorted(html_dir.rglob("*.html")):
        for img in _soup(page).find_all("img"):
            alt = (img.get("alt") or "").strip()
            if not alt or _NOT_A_DESCRIPTION.search(alt) or not _CHINESE.search(alt):
                problems.append(f"{page.relative_to(html_dir)}: alt={alt!r} src={img.get('src', '')[:50]}")
    return problems


def figure_numbering(html_dir: Path) -> tuple[dict[str, list[str]], list[str]]:
    """The numbered figures of each chapter page, and what is wrong with them.

    Returns ``({page: [caption, ...]}, problems)``: every image of a chapter sits in a ``<figure>`` with an id
    (the name ``{numref}`` uses) and a caption "图 C.N 说明", C the chapter's number, N = 1, 2, … in order;
    every ``{numref}`` link of the page reads "图 C.N" for a figure the book has.
    """
    captions: dict[str, list[str]] = {}
    problems: list[str] = []
    numbers_in_book = set()
    pages = sorted((html_dir / "book").glob("ch[0-9][0-9]-*.html"))
    for page in pages:
        chapter, soup = int(page.name[2:4]), _soup(page)
        article = soup.find("article") or soup
        figures = []
        for img in article.find_all("img"):
            figure = img.find_parent("figure")
            if figure is None:
                src = img.get("src", "")[:50]
                problems.append(f"{page.name}: 图片不在带题注的 figure 里 (img outside a figure): {src}")
            elif figure not in figures:
                figures.append(figure)
        figures += [f for f in article.find_all("figure") if f not in figures]
        captions[page.name] = []
        for i, figure in enumerate(figures, start=1):
            number = figure.select_one("figcaption .caption-number")
            text = figure.select_one("figcaption .caption-text")
            number = number.get_text(" ", strip=True) if number else ""
            text = text.get_text(" ", strip=True) if text else ""
            captions[page.name].append(f"{number} {text}")
            numbers_in_book.add(number)
            if number != f"图 {chapter}.{i}":
                problems.append(f"{page.name}: 第 {i} 幅图的编号是 {number!r}，应为 '图 {chapter}.{i}'")
            if not _CHINESE.search(text):
                problems.append(f"{page.name}: {number} 没有中文题注 (no Chinese caption)")
            if not figure.get("id"):
                problems.append(f"{page.name}: {number} 没有名字，无法用 numref 引用 (figure without an id)")
    for page in pages:
        for ref in _soup(page).select("a.reference span.std-numref"):
            if ref.get_text(strip=True) not in numbers_in_book:
                problems.append(f"{page.name}: 引用 {ref.get_text(strip=True)!r} 不是书中任何一幅图的编号")
    return captions, problems


def test_every_image_is_described_in_chinese(book):
    """A screen reader reads the alt text: a description of what the figure shows, never its file name."""
    problems = img_alt_problems(book.html_dir)
    assert not problems, "\n".join(problems)


def test_every_figure_has_a_numbered_chinese_caption(book):
    captions, problems = figure_numbering(book.html_dir)
    assert not problems, "\n".join(problems)
    assert sum(len(c) for c in captions.values()) >= 36, captions


def test_the_figure_checks_catch_a_file_name_a_hash_and_a_missing_number(tmp_path):
    page = tmp_path / "book" / "ch05-softmax.html"
    page.parent.mkdir()
    figure = ('<figure id="fig-ch05-a"><img alt="{alt}" src="../_images/x.png"><figcaption><p>'
              '<span class="caption-number">{number} </span><span class="caption-text">温度</span></p></figcaption>'
              '</figure>')
    good = figure.format(alt="五种温度下同一行分数的 softmax 权重", number="图 5.1")
    page.write_text(f"<article>{good}<p><a class='reference'><span class='std-numref'>图 5.1</span></a></p>"
                    "</article>", encoding="utf-8")
    assert img_alt_problems(tmp_path) == [] and figure_numbering(tmp_path)[1] == []
    for alt in ("", "../_images/028ece52af70c5d9fa19f3a32e723.png", "028ece52af70c5d9fa19f3a32e7231aa", "figure"):
        page.write_text(f"<article>{figure.format(alt=alt, number='图 5.1')}</article>", encoding="utf-8")
        assert len(img_alt_problems(tmp_path)) == 1, alt
    for number in ("", "图 1", "图 5.2", "图 4.1"):
        page.write_text(f"<article>{figure.format(alt='权重', number=number)}</article>", encoding="utf-8")
        assert len(figure_numbering(tmp_path)[1]) == 1, number
    page.write_text('<article><p><img alt="权重" src="x.png"></p></article>', encoding="utf-8")
    assert "figure" in figure_numbering(tmp_path)[1][0]
    page.write_text(f"<article>{good}<a class='reference'><span class='std-numref'>图 5.7</span></a></article>",
                    encoding="utf-8")
    assert "图 5.7" in figure_numbering(tmp_path)[1][0]


def test_figures_are_numbered_by_chapter_in_page_order():
    """Sphinx counts through the book (toctree order); book/_ext/fignumbers.py restarts the count per page."""
    native = {"book/ch04-scaling": {"figure": {"fig-ch04-b": (5,), "fig-ch04-a": (4,)}},
              "book/ch05-softmax": {"figure": {"fig-ch05-x": (6,)}, "table": {"t": (2,)}},
              "book/glossary": {"figure": {"g": (7,)}}}
    assert fignumbers_ext.by_chapter(native) == {
        "book/ch04-scaling": {"figure": {"fig-ch04-a": (4, 1), "fig-ch04-b": (4, 2)}},
        "book/ch05-softmax": {"figure": {"fig-ch05-x": (5, 1)}, "table": {"t": (5, 1)}},
        "book/glossary": {"figure": {"g": (1,)}}}
    assert fignumbers_ext.chapter_of("book/ch16-gqa") == 16 and fignumbers_ext.chapter_of("book/intro") is None

def test_pilot_prose_length_is_within_the_plan():
    """1,500 to 3,500 Chinese characters of prose (code, math and front matter not counted)."""
    text = (ROOT / "book" / f"{PILOT}.md").read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    han = len(re.findall(r"[\u4e00-\u9fff]", text))
    assert 1500 <= han <= 3500, han


def test_pilot_exercises_are_shown_with_a_download_link(book, pilot_html):
    assert "下载本章练习笔记本" in pilot_html
    link = re.search(r'href="([^"]*_downloads/[^"]*/' + PILOT + r'\.ipynb)"', pilot_html)
    assert link, "download link to the release notebook"
    copied = (book.html_dir / "book" / link.group(1)).resolve()
    assert copied.read_bytes() == RELEASE_NB.read_bytes()
    release = nbformat.read(RELEASE_NB, as_version=4)
    first_code = next(c.source for c in release.cells if c.cell_type == "code" and c.source.strip())
    first_line = first_code.strip().splitlines()[0]
    assert html.escape(first_line, quote=False) in pilot_html or first_line.split()[0] in pilot_html
    for marker in ("BEGIN SOLUTION", "HIDDEN TESTS"):
        assert marker not in pilot_html


def test_rebuild_without_change_does_nothing_and_never_executes(book):
    out = book.html_dir.parent.parent  # the copy of the checkout that ``make book`` built
    again = subprocess.run(["bash", "-c", "make book"], cwd=out, env=_SHELL_ENV, capture_output=True, text=True,
                           timeout=300, check=False)
    assert again.returncode == 0 and "书的输入没有变化" in again.stdout, _tail(again.stdout + again.stderr)
    forced = build_book.build(out, source=out, capture=True, force=True)  # Jupyter Book itself, nothing changed
    assert forced.returncode == 0 and not forced.up_to_date, _tail(forced.log)
    assert "Executed notebook" not in forced.log and "Executing notebook" not in forced.log
    everything = build_book.build(out, source=out, capture=True, all_pages=True)  # every page re-read: cache hit
    assert everything.returncode == 0, _tail(everything.log)
    assert "Using cached notebook" in everything.log
    assert "Executed notebook" not in everything.log


def test_a_changed_library_reexecutes_the_lessons(tmp_path):
    """Cached outputs were computed by attnlib: when it changes, the cache is dropped and lessons run again.

    On a one-lesson book (the whole book takes minutes): a change of another page alone does not execute
    the lesson, a change of the library executes it again, cache or not.
    """
    src = _mini_book(tmp_path, "# 课文\n\n```{code-cell} ipython3\nprint(6 * 7)\n```\n")
    (src / "attnlib").mkdir()
    (src / "attnlib" / "__init__.py").write_text("VERSION = 1\n", encoding="utf-8")
    out = tmp_path / "out"
    first = build_book.build(out, source=src, capture=True)
    assert first.returncode == 0 and "Executed notebook" in first.log, _tail(first.log)
    (src / "book" / "intro.md").write_text("# 前言\n\n改过的前言。\n", encoding="utf-8")
    page_only = build_book.build(out, source=src, capture=True)
    assert page_only.returncode == 0, _tail(page_only.log)
    assert "Executed notebook" not in page_only.log, _tail(page_only.log)
    (src / "attnlib" / "__init__.py").write_text("VERSION = 2\n", encoding="utf-8")
    library = build_book.build(out, source=src, capture=True)
    assert library.returncode == 0, _tail(library.log)
    assert "Executed notebook" in library.log and "Using cached notebook" not in library.log
    state = json.loads((out / "_build" / build_book.STATE_FILE).read_text(encoding="utf-8"))
    assert state["library"] == build_book.inputs_digest(src, build_book.LIBRARY_INPUTS)


def test_inputs_digest_follows_content(tmp_path):
    (tmp_path / "book").mkdir()
    page = tmp_path / "book" / "a.md"
    page.write_text("一", encoding="utf-8")
    first = build_book.inputs_digest(tmp_path, ("book", "missing.yml"))
    assert build_book.inputs_digest(tmp_path, ("book",)) == first
    page.write_text("二", encoding="utf-8")
    assert build_book.inputs_digest(tmp_path, ("book",)) != first


def test_pilot_figures_have_no_missing_glyphs_and_use_a_cjk_font(monkeypatch):
    """Run the lesson's code cells here, with every warning recorded, and draw every figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    from attnlib import plots

    cells = code_cells(ROOT / "book" / f"{PILOT}.md")  # the code, without the cells' figure options
    assert len(cells) >= 8
    monkeypatch.chdir(ROOT / "book")
    namespace: dict = {"__name__": "__lesson__"}
    import numpy as np

    with np.printoptions(), matplotlib.rc_context(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for cell in cells:
            exec(compile(cell, PILOT, "exec"), namespace)  # noqa: S102 - our own lesson
        figures = [plt.figure(n) for n in plt.get_fignums()]
        for fig in figures:
            fig.canvas.draw()
        family = matplotlib.rcParams["font.sans-serif"][0]
        texts = [t.get_text() for fig in figures for t in fig.findobj(matplotlib.text.Text)]
        plt.close("all")
    glyph_warnings = [str(w.message) for w in caught if "glyph" in str(w.message).lower()
                      or "missing from font" in str(w.message).lower()]
    assert not glyph_warnings, glyph_warnings
    assert not caught, [f"{w.category.__name__}: {w.message}" for w in caught]
    assert len(figures) >= 2
    assert any(re.search(r"[\u4e00-\u9fff]", t) for t in texts), "the figures should carry Chinese labels"
    assert family == plots.setup()
    path = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
    assert plots._has_chinese_glyphs(path), (family, path)


def test_toc_lists_only_existing_pages_in_the_planned_parts():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    planned = ["第一部分 基础", "第二部分 完整的注意力", "第三部分 效率与推理", "第四部分 应用与复盘", "第五部分 进阶",
               "第六部分 前沿", "第七部分 实战：真实模型里的注意力", "附录"]
    captions = [part["caption"] for part in toc["parts"]]
    assert captions == [c for c in planned if c in captions], captions
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    assert len(files) == len(set(files))
    for file in files:
        assert (ROOT / f"{file}.md").is_file() or (ROOT / f"{file}.ipynb").is_file(), file
    for part in toc["parts"]:
        assert part["chapters"], f"empty part {part['caption']}"


def test_pilot_is_in_part_one():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第一部分 基础")
    assert {"file": f"book/{PILOT}", "title": "5. Softmax 归一化"} in part["chapters"]


# ------------------------------------------------- the build's own failure modes


def _mini_book(tmp_path: Path, page: str) -> Path:
    """A one-chapter book with the real _config.yml and extensions, whose chapter is ``page``."""
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", src / "_config.yml")
    shutil.copytree(ROOT / "book" / "_ext", src / "book" / "_ext")
    (src / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        "  - caption: 第一部分 基础\n    chapters:\n      - file: book/page\n", encoding="utf-8")
    (src / "book" / "intro.md").write_text("# 前言\n\n测试用的书。\n", encoding="utf-8")
    header = ("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
              "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n")
    (src / "book" / "page.md").write_text(header + textwrap.dedent(page), encoding="utf-8")
    return src


@pytest.mark.parametrize(("page", "expected"), [
    ("# 坏链接\n\n见 {doc}`no-such-page`。\n", "unknown document"),
    ("# 标准错误\n\n```{code-cell} ipython3\nimport sys\nprint('警告', file=sys.stderr)\n```\n", "stderr"),
    ("# 报错\n\n```{code-cell} ipython3\nraise ValueError('课文出错')\n```\n", "课文出错"),
], ids=["broken-reference", "stderr-in-a-cell", "lesson-raises"])
def test_build_fails_on_a_warning_stderr_or_a_failing_lesson(tmp_path, page, expected):
    src = _mini_book(tmp_path, page)
    result = build_book.build(tmp_path / "out", source=src, capture=True)
    assert result.returncode != 0, _tail(result.log)
    assert expected in result.log, _tail(result.log)


def test_build_script_refuses_without_a_cjk_font(monkeypatch):
    monkeypatch.setattr(build_book, "cjk_fonts", lambda: [])
    with pytest.raises(build_book.BookBuildError, match="fonts-wqy-microhei") as info:
        build_book.ensure_cjk_font(install=False)
    assert "中文字体" in str(info.value)


# --------------------------------------------------- the {exercises} directive


def _release_notebook(path: Path, extra_source: str = "") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("## 练习 1：稳定的 softmax\n\n实现 `stable_softmax(x, axis=-1)`。"),
        nbformat.v4.new_code_cell(
            "def stable_softmax(x, axis=-1):\n    # YOUR CODE HERE\n    raise NotImplementedError()" + extra_source,
            metadata={"nbgrader": {"grade": False, "solution": True, "locked": False, "grade_id": "softmax",
                                   "schema_version": 3}}),
        nbformat.v4.new_code_cell(
            "assert stable_softmax([0.0, 0.0]).tolist() == [0.5, 0.5]",
            metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "points": 2,
                                   "grade_id": "test_softmax", "schema_version": 3}}),
        nbformat.v4.new_markdown_cell(
            "YOUR ANSWER HERE",
            metadata={"nbgrader": {"grade": True, "solution": True, "locked": False, "points": 1,
                                   "grade_id": "why", "schema_version": 3}}),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _sphinx_project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
        extensions = ["myst_parser", "exercises"]
        language = "zh_CN"
        exercises_dir = "released"
        """), encoding="utf-8")
    (src / "index.md").write_text("# 第 0 章\n\n## 练习\n\n```{exercises} demo\n```\n", encoding="utf-8")
    return src


def _sphinx(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-b", "html", "-q", str(src), str(out)],
                          capture_output=True, text=True, check=False)


def test_exercises_directive_renders_the_student_notebook(tmp_path):
    src = _sphinx_project(tmp_path)
    nb = _release_notebook(src / "released" / "demo" / "demo.ipynb")
    run = _sphinx(src, tmp_path / "out")
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert '<h4 class="rubric"' in page and "练习 1：稳定的 softmax</h4>" in page  # "##" heading, 2 levels down
    assert "YOUR CODE HERE" in page and "NotImplementedError" in page
    assert "stable_softmax" in page and "highlight-python" in page
    assert "作答单元" in page and "测试单元（2 分）" in page and "书面作答（1 分）" in page
    link = re.search(r'href="(_downloads/[^"]+/demo\.ipynb)"', page)
    assert link, page
    assert (tmp_path / "out" / link.group(1)).read_bytes() == nb.read_bytes()
    assert (tmp_path / "out" / "_static" / "exercises.css").is_file()


def test_exercises_directive_fails_without_the_notebook(tmp_path):
    src = _sphinx_project(tmp_path)
    run = _sphinx(src, tmp_path / "out")
    assert run.returncode != 0
    assert "找不到练习 demo 的学生版笔记本" in run.stderr and "make release" in run.stderr


@pytest.mark.parametrize("leak", [
    "\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION",
    "\n### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS",
])
def test_exercises_directive_refuses_solutions_and_hidden_tests(tmp_path, leak):
    src = _sphinx_project(tmp_path)
    _release_notebook(src / "released" / "demo" / "demo.ipynb", extra_source=leak)
    run = _sphinx(src, tmp_path / "out")
    assert run.returncode != 0
    assert "含有答案或隐藏测试" in run.stderr, run.stderr
    assert not (tmp_path / "out" / "index.html").exists()


def test_exercises_directive_refuses_a_broken_notebook(tmp_path):
    src = _sphinx_project(tmp_path)
    broken = src / "released" / "demo" / "demo.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"cells": [', encoding="utf-8")
    run = _sphinx(src, tmp_path / "out")
    assert run.returncode != 0 and "无法读取练习笔记本" in run.stderr, run.stderr


def test_find_leaks_names_the_cells():
    nb = {"cells": [{"source": ["x = 1\n"]}, {"source": "### BEGIN SOLUTION\n"}, {"source": "### BEGIN HIDDEN TESTS"}]}
    assert exercises_ext.find_leaks(nb) == [(2, "BEGIN SOLUTION"), (3, "HIDDEN TESTS")]
    assert exercises_ext.find_leaks({"cells": [{"source": "# YOUR CODE HERE"}]}) == []
