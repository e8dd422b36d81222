"""Sphinx extension: show a chapter's released exercises in its lesson page.

Usage in a MyST page::

    ```{exercises} ch05-softmax
    ```

At build time the directive reads the nbgrader *release* notebook
``<exercises_dir>/<id>/<id>.ipynb`` (``exercises_dir`` is a Sphinx config value,
``notebooks`` by default, relative to the source directory) and renders its
markdown cells as text and its code cells as read-only Python blocks (never
executed), followed by a download link that copies the notebook into the build.

It fails the build when the notebook is missing or unreadable, and stops it
when the notebook holds solution or hidden-test markers: the book must only
ever show the student version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

__version__ = "1.0"

#: Text that only an instructor's source notebook contains; its presence means a solution would leak.
LEAK_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS")

_ASSIGNMENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def release_notebook_path(srcdir: str | Path, exercises_dir: str, assignment: str) -> Path:
    """Where the release notebook of ``assignment`` lives.

    Parameters
    ----------
    srcdir : path
        The Sphinx source directory (the repository root for this book).
    exercises_dir : str
        The release directory, relative to ``srcdir`` (or absolute).
    assignment : str
        An assignment id such as ``"ch05-softmax"``.

    Returns
    -------
    Path
        ``<srcdir>/<exercises_dir>/<assignment>/<assignment>.ipynb``, resolved.
    """
    return (Path(srcdir) / exercises_dir / assignment / f"{assignment}.ipynb").resolve()


def find_leaks(notebook: dict) -> list[tuple[int, str]]:
    """``(cell number from 1, marker)`` for every cell that holds solution or hidden-test text."""
    leaks = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        source = _source(cell)
        leaks.extend((number, marker) for marker in LEAK_MARKERS if marker in source)
    return leaks


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cell_caption(cell: dict) -> str | None:
    """A short Chinese label for an nbgrader cell, from its metadata."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    solution, grade = meta.get("solution", False), meta.get("grade", False)
    points = meta.get("points")
    worth = f"（{points:g} 分）" if isinstance(points, (int, float)) and grade else ""
    if cell.get("cell_type") == "markdown":
        return f"书面作答{worth}：在笔记本中写下你的回答，由教师人工评分。" if solution else None
    if solution:
        return f"作答单元{worth}：在笔记本里把 `# YOUR CODE HERE` 换成你的代码。"
    if grade:
        return f"测试单元{worth}：在笔记本中运行它检查你的代码；评分时还会运行隐藏测试。"
    return None


class ExercisesDirective(SphinxDirective):
    """``{exercises} <assignment id>``: the student version of a chapter's exercises."""

    required_arguments = 1
    optional_arguments = 0
    has_content = False
    option_spec = {"class": directives.class_option}
    #: Levels added to the notebook's markdown headings (its "#" becomes an <h3>).
    heading_offset = 2

    def run(self) -> list[nodes.Node]:
        assignment = self.arguments[0].strip()
        if not _ASSIGNMENT_ID.match(assignment):
            raise self.error(f"练习编号不合法：{assignment!r}（应形如 ch05-softmax）。 (invalid assignment id)")
        srcdir = Path(self.env.srcdir).resolve()
        path = release_notebook_path(srcdir, self.config.exercises_dir, assignment)
        if not path.is_file():
            raise self.error(
                f"找不到练习 {assignment} 的学生版笔记本：{path}。请先运行 `make release` 从 solutions/ 生成它。"
                f" (release notebook for {assignment!r} not found: {path}; run `make release`)"
            )
        if not path.is_relative_to(srcdir):
            raise self.error(f"练习笔记本必须位于书的源目录 {srcdir} 之内：{path}。 (notebook outside the source dir)")
        self.env.note_dependency(str(path))
        try:
            notebook = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self.error(f"无法读取练习笔记本 {path}：{exc}。 (cannot read the notebook)") from None
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise self.error(f"{path} 不是 Jupyter 笔记本（缺少 cells 列表）。 (not a Jupyter notebook)")
        leaks = find_leaks(notebook)
        if leaks:
            where = "，".join(f"第 {n} 个单元含 {m!r}" for n, m in leaks)
            raise ExtensionError(
                f"{self.get_location()}: 练习笔记本 {path} 含有答案或隐藏测试（{where}）；书中只能展示学生版。"
                f"请用 `make release` 重新生成。 (the notebook contains solutions or hidden tests: {leaks})"
            )

        box = nodes.container(classes=["exercises", *self.options.get("class", [])])
        box += self._download_paragraph(srcdir, path)
        for cell in notebook["cells"]:
            box.extend(self._render_cell(cell, path))
        return [box]

    def _download_paragraph(self, srcdir: Path, path: Path) -> nodes.paragraph:
        target = "/" + path.relative_to(srcdir).as_posix()
        link = addnodes.download_reference(
            "", "", nodes.literal(path.name, path.name), reftarget=target, refdoc=self.env.docname,
            refexplicit=True, reftype="download", refdomain="",
        )
        para = nodes.paragraph(classes=["exercises-download"])
        para += nodes.strong("下载本章练习笔记本：", "下载本章练习笔记本：")
        para += link
        para += nodes.Text("（也可以在仓库里运行 ")
        para += nodes.literal("make lab", "make lab")
        para += nodes.Text(" 直接打开）。下面是笔记本内容的预览，书中不运行这些代码。")
        return para

    def _render_cell(self, cell: dict, path: Path) -> list[nodes.Node]:
        kind, source = cell.get("cell_type"), _source(cell).strip("\n")
        if kind not in ("markdown", "code") or not source.strip():
            return []
        out: list[nodes.Node] = []
        caption = _cell_caption(cell)
        if caption:
            holder = nodes.container(classes=["exercises-caption"])
            self.state.nested_parse(StringList([caption], source=str(path)), 0, holder)
            out.append(holder)
        if kind == "markdown":
            holder = nodes.container(classes=["exercises-markdown"])
            self.state.nested_parse(StringList(source.splitlines(), source=str(path)), 0, holder)
            for rubric in holder.findall(nodes.rubric):
                # A notebook's "#" heading sits below the page's "## 练习" section: render it as <h3>, not <h1>.
                rubric["level"] = min(6, int(rubric.get("level", 1)) + self.heading_offset)
            out.append(holder)
        else:
            block = nodes.literal_block(source, source, language="python", classes=["exercises-code"])
            block["force"] = False
            out.append(block)
        return out


def _add_static_path(app: Sphinx) -> None:
    static = str(Path(__file__).parent / "static")
    if static not in app.config.html_static_path:
        app.config.html_static_path.append(static)


def setup(app: Sphinx) -> dict:
    app.add_config_value("exercises_dir", "notebooks", "env", [str])
    app.add_directive("exercises", ExercisesDirective)
    app.connect("builder-inited", _add_static_path)
    app.add_css_file("exercises.css")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
