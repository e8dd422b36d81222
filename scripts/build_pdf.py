"""Print the whole course book as one PDF (``make pdf``), offline, with the system's Chromium.

``make pdf`` first runs ``make book`` (the executed HTML book; nothing is done when it is up to date).  Then:

1. Jupyter Book's ``singlehtml`` builder puts every page of ``_toc.yml`` into one HTML page,
   ``_build/singlehtml/book/intro.html`` (printed from a copy one folder up, where its relative links
   resolve).  It shares the HTML build's execution cache and Sphinx environment, so no lesson runs
   again: the PDF shows the same executed outputs as the HTML book.
2. The system's Chromium (driven by Playwright, pointed at the installed executable: nothing is
   downloaded) opens that page with every request that is not a local file refused, waits for the
   book's bundled MathJax to typeset the formulas and for every figure to load, and arranges the page
   for print (:data:`ARRANGE`): a title page, a 目录 listing the parts and chapters (links into the
   PDF), each part a level-1 heading and each chapter a level-2 heading titled as in the table of
   contents ("5. Softmax 归一化"), each chapter starting on a new page.
3. Chromium prints it (A4, page numbers): text stays text (Chinese selectable; every font is embedded as
   a subset, some -- bold Chinese, for one -- as Type 3 glyphs drawn inside the PDF), and the headings
   become the PDF's bookmarks (``outline``) and structure tags (``tagged``).
4. The PDF is written to :data:`PDF` (``_build/pdf/attention-zh.pdf``; its title inside is the book's) and
   copied into the HTML book (``_build/html/_downloads/attention-zh.pdf``), where the download menu of
   every page links to it (book/_ext/layout.py).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_book  # noqa: E402  (a neighbour script: the font check, the Jupyter Book command)
import provision  # noqa: E402  (where Chromium is)

ROOT = build_book.ROOT
NAME = "attention-zh.pdf"
#: Where the PDF lands, relative to the folder that holds ``_build/``.
PDF = Path("_build") / "pdf" / NAME
#: Its copy inside the HTML book (the download menu's "全书 PDF", book/_ext/layout.py's BOOK_PDF).
IN_HTML = Path("_build") / "html" / "_downloads" / NAME
SINGLE_DIR = Path("_build") / "singlehtml"
#: The page Jupyter Book's singlehtml builder writes (named after the book's root page, ``book/intro``) ...
SINGLE_PAGE = SINGLE_DIR / "book" / "intro.html"
#: ... and where it is printed from: its links (``_static/``, ``_images/``) are relative to the builder's output
#: folder, as if the page stood there.
PRINTED_PAGE = SINGLE_DIR / "attention-zh.html"

NO_CHROMIUM = ("找不到 Chromium，无法打印 PDF。以 root 安装：apt-get install -y --no-install-recommends chromium\n"
               "(Chromium not found: it prints the PDF.)")

#: Resolves once MathJax has typeset the page (the book's bundled copy) and every image has loaded.
READY = """async () => {
  const deadline = Date.now() + 120000;
  const formulas = document.querySelector("script[src*='mathjax' i]");  // the page loads MathJax
  while (formulas && !(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const images = Array.from(document.images);
  images.forEach((img) => { img.loading = "eager"; });
  await Promise.all(images.map((img) => img.complete ? null : new Promise((resolve) => {
    img.addEventListener("load", resolve); img.addEventListener("error", resolve);
  })));
  return {
    math: document.querySelectorAll("mjx-container").length,
    errors: document.querySelectorAll("mjx-merror, [data-mjx-error]").length,
    images: images.length,
    broken: images.filter((img) => !img.naturalWidth).map((img) => img.getAttribute("src").slice(0, 80)),
  };
}"""

#: Rearranges the one-page book for print; the argument is :func:`book_plan`'s dictionary.
ARRANGE = r"""(plan) => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const make = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const marker = (doc) => document.getElementById("document-" + doc);
  // the first heading after a page's marker: its title in the one-page book
  const heading = (doc) => {
    const start = marker(doc);
    let node = start && start.nextElementSibling;
    while (node && !/^H[1-6]$/.test(node.tagName)) node = node.querySelector("h1, h2, h3") || node.nextElementSibling;
    return node;
  };
  article.querySelectorAll(".headerlink, .copybtn, .selfcheck-check, .toggle-button").forEach((e) => e.remove());
  // A formula in a heading is drawn by MathJax's fonts, which Chromium leaves out of the bookmark: write the
  // simple ones in headings (\sqrt{d_k}, X, n) as text, so that the bookmark reads "除以 √dk".
  const plain = (tex) => {
    let out = tex.trim().replace(/\\sqrt\s*\{([^{}]*)\}/g, "√$1");
    if (/[^A-Za-z0-9_{}√ ]/.test(out)) return null;
    out = out.replace(/_\{([^{}]*)\}|_([A-Za-z0-9])/g, (m, a, b) => "<sub>" + (a || b) + "</sub>");
    if (/[{}_]/.test(out)) return null;
    return out.replace(/([A-Za-z])(?![^<]*>)/g, "<i>$1</i>");
  };
  const typeset = window.MathJax && MathJax.startup && MathJax.startup.document;
  const headings = article.querySelectorAll("h1, h2, h3, h4, h5, h6");
  for (const item of typeset ? typeset.getMathItemsWithin(headings) : []) {
    const html = plain(item.math);
    if (html === null || !item.typesetRoot) continue;
    const span = make("span", "print-math");
    span.innerHTML = html;
    item.typesetRoot.replaceWith(span);
  }
  // links between the book's pages point into the one page: keep only their fragment (a link inside the PDF)
  article.querySelectorAll("a[href]").forEach((a) => {
    const href = a.getAttribute("href");
    if (href.startsWith(plan.page + "#")) a.setAttribute("href", href.slice(plan.page.length));
  });

  const title = make("section", "print-title-page");
  title.append(make("p", "print-title", plan.title), make("p", "print-author", plan.author),
               make("p", "print-note", plan.note));
  const toc = make("nav", "print-toc");
  toc.setAttribute("aria-label", "目录");
  toc.append(make("h1", "print-toc-title", "目录"));
  const list = make("ol", "print-toc-list");
  const entry = (doc, text, cls) => {
    const li = make("li", cls);
    const a = make("a", "", text);
    a.href = "#document-" + doc;
    li.append(a);
    return li;
  };
  list.append(entry("front", plan.root_title, "print-toc-front"));
  for (const part of plan.parts) {
    const li = make("li", "print-toc-part", "");
    li.append(make("span", "print-toc-caption", part.caption));
    const chapters = make("ol");
    for (const chapter of part.chapters) chapters.append(entry(chapter.doc, chapter.title, "print-toc-chapter"));
    li.append(chapters);
    list.append(li);
  }
  toc.append(list);

  const missing = [];
  for (const part of plan.parts) {
    const first = marker(part.chapters[0].doc);
    if (!first) { missing.push(part.chapters[0].doc); continue; }
    const h = make("h1", "print-part", part.caption);
    first.before(h);
    for (const chapter of part.chapters) {
      const h2 = heading(chapter.doc);
      if (!h2 || h2.tagName !== "H2") { missing.push(chapter.doc); continue; }
      h2.textContent = chapter.title;
      h2.classList.add("print-chapter");
    }
  }
  const frontTitle = article.querySelector("h1");
  if (frontTitle) {
    frontTitle.textContent = plan.root_title;
    frontTitle.classList.add("print-front");
    frontTitle.id = "document-front";  // the root page has no marker of its own: the 目录's first link lands here
  }

  // the book alone: no sidebars, header, footer or scripts' widgets around it
  const book = make("div", "print-book");
  book.append(title, toc, ...Array.from(article.childNodes));
  document.body.replaceChildren(book);
  document.title = plan.title;
  document.documentElement.lang = "zh-CN";
  const style = make("style");
  style.textContent = plan.css;
  document.head.append(style);
  return {missing, headings: document.querySelectorAll("h1.print-part, h2.print-chapter").length};
}"""

#: Print style of the arranged book.
PRINT_CSS = """
@page { size: A4; margin: 18mm 16mm 20mm 16mm; }
html, body { background: white !important; }
body { margin: 0; padding: 0; font-size: 10.5pt; line-height: 1.6; font-variant-ligatures: none; }
.print-book { max-width: none; }
.print-title-page { height: 240mm; display: flex; flex-direction: column; justify-content: center;
                    text-align: center; }
.print-title { font-size: 28pt; font-weight: bold; margin: 0 0 1.2em; }
.print-author { font-size: 14pt; margin: 0 0 3em; }
.print-note { font-size: 10pt; color: #555; }
.print-toc { break-before: page; }
.print-toc-list, .print-toc-list ol { list-style: none; padding-left: 0; }
.print-toc-list ol { padding-left: 2em; margin: 0.2em 0 0.8em; }
.print-toc-caption { font-weight: bold; }
.print-toc a { text-decoration: none; color: inherit; }
h1.print-part { break-before: page; font-size: 24pt; text-align: center; padding-top: 30%; }
.print-front { break-before: page; }
h2.print-chapter { break-before: page; font-size: 20pt; }
h1, h2, h3, h4 { break-after: avoid; }
/* the theme's screen sizes (42 px, 34 px) are too large on paper; its line height (1.15) is less than the CJK font's
   glyphs need, and then Chromium 156 wrote some headings twice into the bookmarks ("目录目录") */
h1 { font-size: 22pt; } h2 { font-size: 16pt; } h3 { font-size: 13pt; } h4, h5, h6 { font-size: 11pt; }
h1, h2, h3, h4, h5, h6 { line-height: 1.3; }
img, figure, .cell_output, mjx-container[display="true"], table { break-inside: avoid; }
img { max-width: 100% !important; height: auto; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere; overflow: visible !important;
      max-height: none !important; }
.highlight, div.cell_output, .output { overflow: visible !important; }
a { color: inherit; }
.selfcheck-why, .selfcheck-feedback { display: none !important; }
"""

#: Footer of every page: the page number (Chromium fills the span).
FOOTER = ('<div style="width:100%;font-size:8pt;color:#666;text-align:center;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


class PdfBuildError(RuntimeError):
    """The PDF could not be made (the book did not build, Chromium is missing, the page did not load)."""


@dataclass
class PdfResult:
    """What one ``make pdf`` did."""

    pdf: Path
    headings: int  # parts and chapters arranged as headings
    math: int
    images: int
    seconds: float


def book_plan(source: Path) -> dict:
    """The parts and chapters of ``_toc.yml`` and the book's title, as :data:`ARRANGE` takes them."""
    toc = yaml.safe_load((source / "_toc.yml").read_text(encoding="utf-8"))
    config = yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))
    parts = []
    for part in toc["parts"]:
        chapters = []
        for entry in part["chapters"]:
            doc = entry["file"]
            title = entry.get("title") or _page_title(source / f"{doc}.md")
            chapters.append({"doc": doc, "title": title})
        parts.append({"caption": part["caption"], "chapters": chapters})
    root = toc["root"]
    return {"title": config["title"], "author": config["author"], "root": root, "page": f"{root}.html",
            "root_title": _page_title(source / f"{root}.md"), "parts": parts, "css": PRINT_CSS,
            "note": "全书 PDF，由 make pdf 从执行过的书生成；代码输出、图与公式与网页版相同。"}


def _page_title(path: Path) -> str:
    """The first ``# `` heading of a MyST page."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise PdfBuildError(f"{path} 没有一级标题（# ……），无法给它在 PDF 目录里的条目命名。")


def single_page(source: Path, path_output: Path) -> Path:
    """Build the one-page book with Jupyter Book's ``singlehtml`` builder; return the page."""
    build_dir = path_output / "_build"
    command = build_book.jupyter_book_command(source, path_output, "singlehtml")
    proc = subprocess.run(command, cwd=str(source), env=build_book.build_environment(build_dir), check=False,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    page = path_output / SINGLE_PAGE
    if proc.returncode != 0 or not page.is_file():
        raise PdfBuildError("单页版的书（singlehtml）构建失败 (the one-page build failed):\n"
                            + "\n".join(proc.stdout.splitlines()[-40:]))
    shutil.copyfile(page, path_output / PRINTED_PAGE)
    return path_output / PRINTED_PAGE


def print_pdf(page: Path, pdf: Path, plan: dict) -> dict:
    """Open ``page`` in the system's Chromium, offline, arrange it with ``plan`` and print it to ``pdf``."""
    from playwright.sync_api import sync_playwright

    chromium = provision.find_chromium()
    if not chromium:
        raise PdfBuildError(NO_CHROMIUM)
    refused: list[str] = []

    def local_only(route):
        if route.request.url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    pdf.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-extensions"])
        try:
            tab = browser.new_page(locale="zh-CN")
            tab.set_default_timeout(180_000)
            tab.route("**/*", local_only)
            tab.goto(page.as_uri(), wait_until="load")
            ready = tab.evaluate(READY)
            if refused:
                raise PdfBuildError(f"书页想从网络载入这些地址（PDF 必须离线生成）：{refused[:5]}")
            if ready["errors"] or ready["broken"]:
                raise PdfBuildError(f"页面没有完整显示：MathJax 报错 {ready['errors']} 处，"
                                    f"未能载入的图片 {ready['broken']}")
            arranged = tab.evaluate(ARRANGE, plan)
            if arranged["missing"]:
                raise PdfBuildError(f"单页版的书里找不到这些页面：{arranged['missing']}")
            tab.emulate_media(media="print")
            tab.pdf(path=str(pdf), format="A4", print_background=True, prefer_css_page_size=True,
                    display_header_footer=True, header_template="<span></span>", footer_template=FOOTER,
                    outline=True, tagged=True)
        finally:
            browser.close()
    return {**ready, **arranged}


def build(path_output: str | Path = ROOT, *, source: str | Path = ROOT) -> PdfResult:
    """The one-page book, printed to ``<path_output>/_build/pdf/attention-zh.pdf`` and copied into the HTML book.

    The HTML book must have been built into the same ``path_output`` first (``make pdf`` runs ``make book``).

    Raises
    ------
    PdfBuildError
        The one-page build failed, Chromium is missing, or the page did not load completely.
    """
    build_book.ensure_cjk_font()
    source, path_output = Path(source).resolve(), Path(path_output).resolve()
    start = time.perf_counter()
    page = single_page(source, path_output)
    plan = book_plan(source)
    pdf = path_output / PDF
    shown = print_pdf(page, pdf, plan)
    if (path_output / "_build" / "html").is_dir():
        (path_output / IN_HTML).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pdf, path_output / IN_HTML)
    return PdfResult(pdf, shown["headings"], shown["math"], shown["images"], time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="把整本书打印成一个 PDF (print the whole book as one PDF).")
    parser.add_argument("--path-output", default=str(ROOT), help="放置 _build/ 的目录 (where _build/ is)")
    args = parser.parse_args(argv)
    try:
        result = build(args.path_output)
    except (PdfBuildError, build_book.BookBuildError) as exc:
        print(exc, file=sys.stderr)
        return 2
    size = result.pdf.stat().st_size / 2**20
    print(f"全书 PDF 已生成，用时 {result.seconds:.1f} 秒（{size:.1f} MB，{result.math} 处公式，"
          f"{result.images} 张图）：\n"
          f"    {result.pdf}\n"
          f"网页版的“下载”菜单里的“全书 PDF”也指向它的副本。 (The whole book as one PDF.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
