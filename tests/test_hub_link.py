"""From a chapter page of the book into the student's own server on the class's JupyterHub, through nbgitpuller.

With ``class_hub`` set (``_config.yml``; ``book/_ext/hublink.py``), a chapter page with exercises links to
``<hub>/hub/user-redirect/git-pull?...``.  End to end, on loopback only:

* the course is a git repository (the released ``ch05-softmax`` notebook in the course's layout) served by
  ``git daemon`` on a loopback port;
* the class's JupyterHub is ``tests/test_hub_exchange.py``'s (``grading/hub/jupyterhub_config.py`` on free ports,
  every process stopped and checked at the end), its single-user servers started from this environment, where
  nbgitpuller 1.3.0 is installed; ``student1``'s server is started;
* a book page is built with Sphinx from the book's own extensions (``exercises``, ``hublink``) and that setting;
* in Chromium, the student opens the page, follows "在 JupyterHub 上做本章练习", logs in on the hub's login page,
  and nbgitpuller clones the course into their home and opens the notebook in JupyterLab, whose menus are Chinese
  (the 学生指南's interface); the student types into an answer cell and saves;
* the course gains a commit upstream; the student follows the link again: the new file arrives, the edit is kept
  (nbgitpuller's merge rules, as the 学生指南 states them).  A screenshot of that second opening is saved in
  ``_build/screenshots/hub-link.png`` for people to look at.

The same settings without a hub give no link (and a half-set one stops the build), tested on small Sphinx builds
that need neither a browser nor a hub.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from test_hub_exchange import running_hub, start_servers

from conftest import ROOT


#: The journey's tests: Chromium and a JupyterHub (each skipped, with its install command, where missing).
def _on_the_hub(test):
    for mark in (pytest.mark.browser, pytest.mark.hub, pytest.mark.slow, pytest.mark.timeout(300)):
        test = mark(test)
    return test


sys.path.insert(0, str(ROOT / "book" / "_ext"))
import hublink  # noqa: E402

ASSIGNMENT = "ch05-softmax"
NOTEBOOK = f"notebooks/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
STUDENT = "student1"
MARK = "student-edit-kept"
SCREENSHOT = ROOT / "_build" / "screenshots" / "hub-link.png"
GIT = ["git", "-c", "user.name=课程", "-c", "user.email=course@example.edu", "-c", "init.defaultBranch=main"]


def _git(*args, cwd) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def course_repository(root: Path):
    """The course as a git repository behind ``git daemon`` on loopback; yields (its URL, a working copy)."""
    work, served = root / "upstream", root / "srv"
    (work / "notebooks" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy2(ROOT / NOTEBOOK, work / NOTEBOOK)
    (work / "README.md").write_text("# 注意力机制公开课\n", encoding="utf-8")
    _git("init", "-q", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "课程", cwd=work)
    served.mkdir()
    _git("clone", "-q", "--bare", str(work), str(served / "attention-zh.git"), cwd=root)
    _git("remote", "add", "origin", str(served / "attention-zh.git"), cwd=work)
    port = _free_port()
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                               f"--base-path={served}", "--export-all", "--informative-errors", str(served)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert daemon.poll() is None and time.monotonic() < deadline, "git daemon 没有启动"
            time.sleep(0.1)
        yield f"git://127.0.0.1:{port}/attention-zh.git", work
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)


def _book(root: Path, hub: dict) -> Path:
    """A two-page book built with the course's extensions and ``class_hub = hub``; returns the output folder."""
    src = root / "book-src"
    (src / "notebooks" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy2(ROOT / NOTEBOOK, src / NOTEBOOK)
    (src / "conf.py").write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
        extensions = ["myst_parser", "exercises", "hublink"]
        language = "zh_CN"
        exercises_dir = "notebooks"
        class_hub = {hub!r}
        """), encoding="utf-8")
    (src / "index.md").write_text("# 课程\n\n```{toctree}\nch05\nnotes\n```\n", encoding="utf-8")
    (src / "ch05.md").write_text(f"# Softmax 归一化\n\n## 练习\n\n```{{exercises}} {ASSIGNMENT}\n```\n",
                                 encoding="utf-8")
    (src / "notes.md").write_text("# 没有练习的一页\n\n正文。\n", encoding="utf-8")
    out = root / "book-html"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(src), str(out)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def _open_notebook(page) -> None:
    """Wait until JupyterLab shows the notebook's tab and cells."""
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text=f"{ASSIGNMENT}.ipynb").wait_for(timeout=120_000)
    page.wait_for_selector(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell", timeout=120_000)


def _follow_the_link(page, book_page: str) -> str:
    page.goto(book_page)
    link = page.get_by_role("link", name=hublink.LABEL)
    href = link.get_attribute("href")
    link.click()
    return href


@pytest.fixture(scope="module")
def journey(tmp_path_factory):
    """Everything the student does and sees, in order (module fixture: one hub, one browser)."""
    from playwright.sync_api import sync_playwright

    from conftest import provision

    root = tmp_path_factory.mktemp("hublink")
    workdir, homes, exchange = root / "hub", root / "hub" / "home", root / "hub" / "exchange"
    exchange.mkdir(parents=True)
    clone = homes / STUDENT / "attention-zh"
    seen = {}
    with course_repository(root) as (repo_url, upstream), running_hub(workdir, homes, exchange) as hub:
        out = _book(root, {"url": hub.url, "repository": repo_url, "branch": "main"})
        seen["pages"] = {name: (out / f"{name}.html").read_text(encoding="utf-8") for name in ("ch05", "notes")}
        start_servers(hub, [STUDENT])
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=provision.find_chromium(), headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--disable-extensions"])
            try:
                page = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 900}).new_page()
                page.set_default_timeout(60_000)
                visited = []  # every address the tab went to, redirects included
                page.on("framenavigated", lambda frame: frame == page.main_frame and visited.append(frame.url))
                book_page = (out / "ch05.html").as_uri()
                seen["href"] = _follow_the_link(page, book_page)
                page.wait_for_selector("#username_input")  # not logged in yet: the hub asks first
                seen["login_url"] = page.url
                page.fill("#username_input", STUDENT)
                page.fill("#password_input", "any password")
                page.click("#login_submit")
                _open_notebook(page)
                seen["first_url"] = page.url
                seen["first_visits"], visited[:] = list(visited), []
                seen["menus"] = page.locator("#jp-menu-panel .lm-MenuBar-itemLabel").all_inner_texts()
                seen["cloned"] = (clone / NOTEBOOK).is_file()
                answer = page.locator(".jp-NotebookPanel:visible .jp-CodeCell", has_text="YOUR CODE HERE").first
                answer.locator(".cm-content").click()
                page.keyboard.press("Control+End")
                page.keyboard.type(f"\n# {MARK}")
                page.keyboard.press("Control+s")
                deadline = time.monotonic() + 30
                while MARK not in (clone / NOTEBOOK).read_text(encoding="utf-8"):
                    assert time.monotonic() < deadline, "JupyterLab 没有保存学生的修改"
                    time.sleep(0.2)
                # the course moves on upstream: a new file and a changed README
                (upstream / "notebooks" / "更新说明.md").write_text("第二周的更新。\n", encoding="utf-8")
                (upstream / "README.md").write_text("# 注意力机制公开课\n\n第二周。\n", encoding="utf-8")
                _git("add", "-A", cwd=upstream)
                _git("commit", "-q", "-m", "第二周", cwd=upstream)
                _git("push", "-q", "origin", "main", cwd=upstream)
                seen["second_href"] = _follow_the_link(page, book_page)
                _open_notebook(page)
                seen["second_url"] = page.url
                seen["second_visits"] = list(visited)
                cells = page.locator(".jp-NotebookPanel:visible .jp-CodeCell", has_text=MARK)
                cells.first.wait_for(timeout=60_000)
                seen["shown"] = cells.count()
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOT))  # for people to look at: the notebook opened the second time
            finally:
                browser.close()
        seen["kept"] = MARK in (clone / NOTEBOOK).read_text(encoding="utf-8")
        seen["pulled"] = (clone / "notebooks" / "更新说明.md").is_file()
        seen["readme"] = (clone / "README.md").read_text(encoding="utf-8")
        seen["log"] = _git("log", "--format=%s", cwd=clone)
        seen["hub_url"] = hub.url
    seen["repo_url"] = repo_url
    return seen


@_on_the_hub
def test_the_chapter_page_links_to_its_notebook_through_nbgitpuller(journey):
    assert journey["href"] == journey["second_href"]
    parts = urlsplit(journey["href"])
    assert f"{parts.scheme}://{parts.netloc}" == journey["hub_url"] and parts.path == "/hub/user-redirect/git-pull"
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query == {"repo": journey["repo_url"], "branch": "main", "targetpath": "attention-zh",
                     "urlpath": f"lab/tree/attention-zh/{NOTEBOOK}"}
    assert hublink.LABEL in journey["pages"]["ch05"] and hublink.LABEL not in journey["pages"]["notes"]


@_on_the_hub
def test_the_first_click_logs_in_clones_the_course_and_opens_the_notebook_in_chinese(journey):
    assert "/hub/login" in journey["login_url"], journey["login_url"]
    pulls = [url for url in journey["first_visits"] if f"/user/{STUDENT}/git-pull?" in url]
    assert pulls, f"没有经过学生服务器上的 nbgitpuller：{journey['first_visits']}"
    assert journey["cloned"], "nbgitpuller 没有把课程复制到学生的主目录"
    assert journey["first_url"].split("?")[0].endswith(f"/user/{STUDENT}/lab/tree/attention-zh/{NOTEBOOK}"), \
        journey["first_url"]
    assert {"文件", "编辑", "运行"} <= set(journey["menus"]) and "File" not in journey["menus"], journey["menus"]


@_on_the_hub
def test_the_second_click_brings_the_update_and_keeps_the_students_edit(journey):
    assert any(f"/user/{STUDENT}/git-pull?" in url for url in journey["second_visits"]), journey["second_visits"]
    assert not any("/hub/login" in url for url in journey["second_visits"]), "已经登录过，第二次不应再要求登录"
    assert journey["second_url"] == journey["first_url"]
    assert journey["pulled"] and "第二周" in journey["readme"], "第二次点击没有取来课程的更新"
    assert journey["kept"] and journey["shown"] >= 1, "学生改过的内容没有保留下来"
    assert "第二周" in journey["log"] and "Automatic commit by nbgitpuller" in journey["log"], journey["log"]


# ----------------------------------------------------------------- the setting itself (no hub needed)

def _tiny_book(tmp_path: Path, hub) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    (src / "notebooks" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy2(ROOT / NOTEBOOK, src / NOTEBOOK)
    (src / "conf.py").write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
        extensions = ["myst_parser", "exercises", "hublink"]
        exercises_dir = "notebooks"
        class_hub = {hub!r}
        """), encoding="utf-8")
    (src / "index.md").write_text(f"# 第 5 章\n\n```{{exercises}} {ASSIGNMENT}\n```\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(src), str(tmp_path / "out")],
                          capture_output=True, text=True, check=False)


def test_without_the_setting_there_is_no_link(tmp_path):
    assert hublink.settings({}) == {} and hublink.settings({"url": "", "repository": "", "branch": "main"}) == {}
    run = _tiny_book(tmp_path, {"url": "", "repository": "", "branch": "main"})
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "下载本章练习笔记本" in page and hublink.LABEL not in page and "git-pull" not in page


@pytest.mark.parametrize(("hub", "says"), [
    ({"url": "https://hub.example.edu.cn"}, "还缺 repository"),
    ({"repository": "https://github.com/OWNER/REPO"}, "还缺 url"),
    ({"url": "hub.example.edu.cn", "repository": "https://github.com/OWNER/REPO"}, "http:// 或 https:// 开头"),
    ({"url": "https://hub.example.edu.cn", "repository": "https://github.com/OWNER/REPO", "branch": "a b"},
     "不是分支名"),
    ({"url": "https://hub.example.edu.cn", "repo": "x"}, "不认识的设置"),
])
def test_a_half_set_hub_is_named_in_chinese(hub, says):
    from sphinx.errors import ConfigError

    with pytest.raises(ConfigError, match=says):
        hublink.settings(hub)


def test_a_half_set_hub_stops_the_build(tmp_path):
    run = _tiny_book(tmp_path, {"url": "https://hub.example.edu.cn"})
    assert run.returncode != 0 and "class_hub 只设置了一半：还缺 repository" in run.stderr, run.stderr


def test_the_books_config_passes_class_hub_to_sphinx():
    """``_config.yml``'s ``sphinx.config.class_hub`` reaches Sphinx through Jupyter Book (empty in the repository)."""
    import yaml
    from jupyter_book.config import get_final_config

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["sphinx"]["config"]["class_hub"] == {"url": "", "repository": "", "branch": "main"}
    assert "hublink" in config["sphinx"]["local_extensions"]
    config["sphinx"]["config"]["class_hub"] = {"url": "https://hub.example.edu.cn",
                                               "repository": "https://github.com/OWNER/REPO.git", "branch": "main"}
    final, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False}, sourcedir=ROOT,
                                validate=True, raise_on_invalid=True)
    assert final["class_hub"]["repository"] == "https://github.com/OWNER/REPO.git"
    link = hublink.pull_link(hublink.settings(final["class_hub"]), NOTEBOOK)
    assert link.startswith("https://hub.example.edu.cn/hub/user-redirect/git-pull?repo=https%3A//github.com/")
    assert f"targetpath=REPO&urlpath=lab/tree/REPO/{NOTEBOOK}" in link
