"""The published book: ``_build/html`` served from a sub-path by a real static web server, every page in Chromium.

GitHub Pages serves a project's site at ``https://OWNER.github.io/REPO/``, a plain static server with no rewrite
rules.  Here the deployment workflow's own build command (``make pdf``, taken from ``.github/workflows/pages.yml``
by ``tests/test_workflow.build_command``; ``tests/test_browser.py`` has usually run it already in the suite's one
build of the book, ``built_book()``, and then it is not run again) leaves ``_build/html`` with the whole-book PDF,
and Debian's nginx serves that folder at ``/attention-zh/`` on a loopback port (nothing else on the server).  The
system's Chromium opens every page of the book from there, with every request that does not go to that server
refused and recorded:

* no page, script, style sheet, font, image or the PDF answers an error (404), and no request fails;
* every link of every page to the site (pages, the PDF, the exercise notebooks) stays under the sub-path and answers
  200; the download menu's "全书 PDF" is the PDF ``make pdf`` wrote;
* the search page at the sub-path finds Chinese words, its results linking into the sub-path;
* no request leaves the machine (the book's offline promise, also under a web server);
* without a configured base URL there is no canonical link, and without a class hub no hub link.

``make test`` installs nginx as root (``scripts/provision.py``); elsewhere this module skips with the command that
installs it.  nginx and Chromium are started once for the module.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urldefrag, urlsplit

import pytest
import test_workflow
from test_book import _SHELL_ENV, _tail, built_book
from test_browser import TYPESET, _book_pages

from conftest import provision

pytestmark = [pytest.mark.browser, pytest.mark.book, pytest.mark.cjk_font, pytest.mark.slow,
              pytest.mark.skipif(provision.find_nginx() is None, reason=provision.NO_NGINX)]

#: Where the book is served, as on GitHub Pages for a repository named attention-zh.
SUBPATH = "/attention-zh/"
NO_PROXIES = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def nginx(html_dir: Path, tmp: Path, subpath: str = SUBPATH):
    """Debian's nginx serving ``html_dir`` at ``subpath`` on a free loopback port (nothing at ``/``); yields the
    server's origin.  Its pid file, logs and temporary folders are in ``tmp``; always stopped."""
    port = _free_port()
    empty = tmp / "empty"
    empty.mkdir()
    temp = {name: tmp / name for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    user = "user root;" if os.geteuid() == 0 else ""  # as root, workers would otherwise be nobody: the build is 0700
    conf = tmp / "nginx.conf"
    conf.write_text(f"""{user}
worker_processes 1;
daemon off;
pid {tmp / "nginx.pid"};
error_log {tmp / "error.log"} warn;
events {{ worker_connections 64; }}
http {{
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log {tmp / "access.log"};
  {" ".join(f"{name}_temp_path {path};" for name, path in temp.items())}
  server {{
    listen 127.0.0.1:{port};
    root {empty};
    location {subpath} {{ alias {html_dir}/; }}
  }}
}}
""", encoding="utf-8")
    process = subprocess.Popen([provision.find_nginx(), "-p", str(tmp), "-e", str(tmp / "error.log"), "-c", str(conf)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert process.poll() is None, f"nginx 没有启动：{process.stderr.read().decode(errors='replace')}"
            assert time.monotonic() < deadline, "nginx 30 秒内没有开始监听"
            time.sleep(0.1)
        yield origin
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stderr.close()


def _get(url: str) -> tuple[int, str, bytes]:
    """Status, content type and body of a GET (error statuses too)."""
    try:
        with NO_PROXIES.open(url, timeout=30) as reply:
            return reply.status, reply.headers.get("Content-Type", ""), reply.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, "", b""


#: Resolves once every font the page uses has loaded (MathJax's and the icons' web fonts come after "load").
FONTS = "async () => { await document.fonts.ready; return document.fonts.status; }"
#: After a page has loaded: every link on it, resolved by the browser.
LINKS = "() => Array.from(document.querySelectorAll('a[href]'), (a) => a.href)"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The build of the workflow's command, served from :data:`SUBPATH`; every page opened in Chromium."""
    from playwright.sync_api import sync_playwright

    result = built_book()
    assert result.returncode == 0, f"书的构建失败 (book build failed):\n{_tail(result.log)}"
    html_dir = result.html_dir
    pdf = html_dir / "_downloads" / "attention-zh.pdf"
    command = test_workflow.build_command()
    if not pdf.is_file():  # tests/test_browser.py runs `make pdf` in this copy; run alone, this module does
        run = subprocess.run(["bash", "-c", command], cwd=html_dir.parents[1], env=_SHELL_ENV, capture_output=True,
                             text=True, timeout=900, check=False)
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    pages = [p.relative_to(html_dir).as_posix() for p in _book_pages(html_dir)]
    tmp = tmp_path_factory.mktemp("nginx")
    seen = {"pages": {}, "outside": [], "bad": [], "failed": [], "links": set(), "errors": []}
    with nginx(html_dir, tmp) as origin, sync_playwright() as playwright:
        base = origin + SUBPATH
        browser = playwright.chromium.launch(executable_path=provision.find_chromium(), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-extensions",
                                                   "--disable-background-networking", "--disable-component-update"])
        try:
            context = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 900})

            def only_this_server(route):
                url = route.request.url
                if url.startswith((origin + "/", "data:", "blob:", "about:")):
                    route.continue_()
                else:
                    seen["outside"].append(url)
                    route.abort()

            context.route("**/*", only_this_server)
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.on("response", lambda r: r.status >= 400 and seen["bad"].append(f"{r.status} {r.url}"))
            page.on("requestfailed", lambda r: r.url.startswith(origin) and seen["failed"].append(
                f"{r.url}: {r.failure}"))
            page.on("pageerror", lambda e: seen["errors"].append(str(e)))
            page.goto(base, wait_until="load")
            page.wait_for_url("**/book/intro.html")
            seen["root"] = page.url
            for name in pages:
                page.goto(base + name, wait_until="load")
                page.evaluate(TYPESET)
                page.evaluate(FONTS)
                seen["pages"][name] = page.content()
                seen["links"].update(urldefrag(link)[0] for link in page.evaluate(LINKS))
            for word in ("掩码", "注意力"):
                page.goto(f"{base}search.html?q={quote(word)}", wait_until="load")
                page.wait_for_function(
                    "() => (document.querySelector('#search-results .search-summary') || {}).innerText")
                seen[f"search {word}"] = page.evaluate(
                    "() => Array.from(document.querySelectorAll('#search-results ul.search a'), (a) => a.href)")
        finally:
            browser.close()
        inside = sorted(link for link in seen["links"] if link.startswith(origin))
        seen["answers"] = {link: _get(link)[:2] for link in inside}
        seen["pdf"] = _get(base + "_downloads/attention-zh.pdf")
    seen.update(origin=origin, base=base, html_dir=html_dir, pdf_file=pdf, command=command,
                access=(tmp / "access.log").read_text(encoding="utf-8", errors="replace"))
    return seen


def test_the_served_build_is_the_workflows_command(served):
    assert served["command"] == "make pdf"
    assert served["pdf_file"].is_file() and len(served["pages"]) >= 20, sorted(served["pages"])
    assert served["root"] == served["base"] + "book/intro.html", served["root"]  # the root's index redirects


def test_no_page_script_style_font_image_or_pdf_fails_under_the_sub_path(served):
    assert not served["bad"], f"这些请求在子路径下得到错误状态：{served['bad'][:20]}"
    assert not served["failed"], f"这些请求失败了：{served['failed'][:20]}"
    assert not served["errors"], f"页面抛出了脚本错误：{served['errors'][:5]}"
    kinds = {urlsplit(line.split('"')[1].split()[1]).path.rsplit(".", 1)[-1]
             for line in served["access"].splitlines() if '"GET ' in line}
    for kind in ("html", "js", "css", "woff2", "png"):
        assert kind in kinds, f"没有请求过 .{kind} 文件：服务器日志里是 {sorted(kinds)}"


def test_every_link_to_the_site_stays_under_the_sub_path_and_answers(served):
    origin, base = served["origin"], served["base"]
    outside = sorted(link for link in served["answers"] if not link.startswith(base))
    assert not outside, f"这些链接离开了子路径（在 GitHub Pages 上会 404）：{outside[:10]}"
    broken = {link: status for link, (status, _) in served["answers"].items() if status != 200}
    assert not broken, f"这些链接打不开：{broken}"
    pages = {link for link in served["answers"] if link.endswith(".html")}
    assert len(pages) >= 20 and any(link.endswith(".ipynb") for link in served["answers"])
    assert origin + SUBPATH + "_downloads/attention-zh.pdf" in served["answers"]


def test_the_pdf_in_the_download_menu_is_the_whole_book(served):
    status, kind, body = served["pdf"]
    assert status == 200 and kind == "application/pdf", (status, kind)
    assert body == served["pdf_file"].read_bytes()
    page = served["pages"]["book/ch05-softmax.html"]
    assert re.search(r'href="\.\./_downloads/attention-zh\.pdf"[^>]*btn-download-book-pdf-button', page), \
        "下载菜单里的“全书 PDF”应当是相对链接"


@pytest.mark.parametrize("word", ["掩码", "注意力"])
def test_search_under_the_sub_path_returns_chinese_results(served, word):
    hits = served[f"search {word}"]
    assert hits, f"在子路径下搜索“{word}”没有结果"
    assert all(hit.startswith(served["base"]) for hit in hits), hits[:5]
    assert served["base"] + "book/ch05-softmax.html" in {urldefrag(hit)[0] for hit in hits}, hits[:10]


def test_nothing_leaves_the_machine(served):
    assert not served["outside"], f"这些请求要离开本机（已拦下）：{sorted(set(served['outside']))[:10]}"


def test_no_canonical_link_or_hub_link_unless_configured(served):
    """``_config.yml`` sets neither ``html.baseurl`` nor ``class_hub``: no page names an address of its own."""
    for name, page in served["pages"].items():
        assert 'rel="canonical"' not in page, name
        assert not re.search(r'class="[^"]*hub-link|href="[^"]*/git-pull\?', page), name  # (the guides name it)
