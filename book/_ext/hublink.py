"""Sphinx extension: from a chapter's exercises straight into the student's own server on the class's JupyterHub.

When the instructor sets the class's hub and the repository it pulls the course from, in one place
(``_config.yml``, ``sphinx.config.class_hub``; documented in the 教师指南)::

    class_hub:
      url: https://hub.example.edu.cn          # the JupyterHub's address
      repository: https://github.com/OWNER/REPO  # where the course (its notebooks/) is
      branch: main

every chapter page with exercises (the ``{exercises}`` directive of ``exercises.py``) shows, under the download
link, a link "在 JupyterHub 上做本章练习".  It is an nbgitpuller link: JupyterHub sends the student (after logging
in) to their own server, nbgitpuller clones the repository into ``~/<folder>`` the first time and merges the
course's new commits into it afterwards, keeping the student's edits (its merge rules are in the 学生指南), then
JupyterLab opens ``<folder>/notebooks/<id>/<id>.ipynb``.  ``<folder>`` is the repository's name (its last path part
without ``.git``).  The notebook's path in the repository is its path in the book's source, so the repository must
keep the course's layout.

Without ``url`` nothing is added: a book built by anyone else has no link into a hub it does not know.  A half-set
configuration (an address without the other, an address that is not a URL) stops the build with a Chinese message.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ConfigError

__version__ = "1.0"

#: The visible text of the link (the tests and the guides name it).
LABEL = "在 JupyterHub 上做本章练习"
DEFAULTS = {"url": "", "repository": "", "branch": "main"}
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]+$")


def settings(config: dict | None) -> dict:
    """The checked ``class_hub`` settings: ``{}`` when no hub is set; raises ConfigError (Chinese) when half-set."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"_config.yml 的 class_hub 里有不认识的设置：{unknown}（只有 url、repository、branch）。"
                          f" (unknown class_hub settings)")
    values = {key: str(config.get(key) or default).strip() for key, default in DEFAULTS.items()}
    if not values["url"] and not values["repository"]:
        return {}
    if not values["url"] or not values["repository"]:
        missing = "url（JupyterHub 的地址）" if not values["url"] else "repository（课程仓库的地址）"
        raise ConfigError(f"_config.yml 的 class_hub 只设置了一半：还缺 {missing}。两个都设置才显示"
                          f"“{LABEL}”，都留空则不显示。 (class_hub needs both url and repository)")
    hub = urlsplit(values["url"])
    if hub.scheme not in ("http", "https") or not hub.netloc:
        raise ConfigError(f"class_hub.url 应是 JupyterHub 的网址（http:// 或 https:// 开头），"
                          f"实际是 {values['url']!r}。 (class_hub.url must be an http(s) URL)")
    repository = urlsplit(values["repository"])
    if not repository.scheme or not repository.path.strip("/"):
        raise ConfigError(f"class_hub.repository 应是 git 仓库的网址（例如 https://github.com/OWNER/REPO），"
                          f"实际是 {values['repository']!r}。 (class_hub.repository must be a git URL)")
    if not _BRANCH.match(values["branch"]):
        raise ConfigError(f"class_hub.branch 不是分支名：{values['branch']!r}。 (invalid branch name)")
    return values


def folder_of(repository: str) -> str:
    """The folder nbgitpuller clones ``repository`` into, in the student's home: its name without ``.git``."""
    name = urlsplit(repository).path.rstrip("/").rsplit("/", 1)[-1]
    return name[:-4] if name.endswith(".git") else name


def pull_link(hub: dict, notebook: str) -> str:
    """The nbgitpuller link that opens ``notebook`` (a path in the repository) in the student's JupyterLab."""
    folder = folder_of(hub["repository"])
    query = {"repo": hub["repository"], "branch": hub["branch"], "targetpath": folder,
             "urlpath": f"lab/tree/{folder}/{notebook}"}
    return f"{hub['url'].rstrip('/')}/hub/user-redirect/git-pull?{urlencode(query, quote_via=quote, safe='/')}"


def _check(app: Sphinx, config) -> None:
    config.class_hub = settings(config.class_hub)


def _add_links(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Put the hub link under the download link of every exercises box of the page (when a hub is set)."""
    hub = app.config.class_hub
    if not hub:
        return
    for box in list(doctree.findall(nodes.container)):
        if "exercises" not in box["classes"]:
            continue
        download = next(box.findall(addnodes.download_reference), None)
        if download is None:
            continue
        notebook = download["reftarget"].lstrip("/")  # exercises.py: "/<exercises_dir>/<id>/<id>.ipynb"
        para = nodes.paragraph(classes=["hub-link"])
        para += nodes.reference("", LABEL, refuri=pull_link(hub, notebook), classes=["hub-link-button"])
        para += nodes.Text("（在你自己的服务器上打开这份笔记本；第一次点击会把课程复制到你的主目录，"
                           "以后再点会取来课程的更新、保留你改过的内容。交作业仍然用 Assignments 面板。）")
        parent = download.parent
        parent.parent.insert(parent.parent.index(parent) + 1, para)


def _add_static_path(app: Sphinx) -> None:
    static = str(Path(__file__).parent / "hublink_static")
    if static not in app.config.html_static_path:
        app.config.html_static_path.append(static)


def setup(app: Sphinx) -> dict:
    app.add_config_value("class_hub", {}, "env", [dict])
    app.connect("config-inited", _check)
    app.connect("builder-inited", _add_static_path)
    app.connect("doctree-resolved", _add_links)
    app.add_css_file("hublink.css")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
