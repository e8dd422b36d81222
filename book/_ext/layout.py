"""Sphinx extension: the book's pages for every reader -- screen readers, phones, and readers of the PDF.

* Three of the theme's components are replaced by our own templates (``layout_templates/``) whose
  accessible names contain their visible text (axe-core's ``label-content-name-mismatch``): the
  search field (its label is its visible text, "搜索 Ctrl+K"), the colour-mode button (its label
  names all three icons, one of which is visible at a time) and the book's title in the sidebar,
  which sits in a labelled ``<nav>`` landmark (axe's ``region``: all content inside a landmark).
* ``layout.css`` keeps every page within a phone's width (long inline code and index entries wrap)
  and gives the controls one taps on a touch screen room for a finger.
* Each script is linked from a page once (some of Jupyter Book's inline scripts came twice, and a repeated
  ``const`` is an error in the browser).
* The download menu of every page gets a link to the whole book as one PDF, which ``make pdf``
  (scripts/build_pdf.py) writes into the built HTML at :data:`BOOK_PDF`.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx

__version__ = "1.0"

HERE = Path(__file__).parent
TEMPLATES = HERE / "layout_templates"
STATIC = HERE / "layout_static"
#: Where ``make pdf`` puts the whole book's PDF inside the built HTML (relative to its root).
BOOK_PDF = "_downloads/attention-zh.pdf"


def _templates_first(app: Sphinx, config) -> None:
    """Put our templates before the theme's components, so that ours are found first."""
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.insert(0, str(TEMPLATES))


def _add_static_path(app: Sphinx) -> None:
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def _book_pdf_button(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Add "全书 PDF" to the theme's download menu (after sphinx-book-theme has built the menu)."""
    for group in context.get("header_buttons") or []:
        if group.get("label") != "download-buttons":
            continue
        for button in group["buttons"]:
            if button.get("label") == "download-pdf-button":  # the theme's window.print() of this page
                button["text"] = "本页 PDF"
                button["tooltip"] = "打印本页（可另存为 PDF）"
        group["tooltip"] = "下载"
        group["buttons"].append({
            "type": "link",
            "url": context["pathto"](BOOK_PDF, 1),
            "text": "全书 PDF",
            "tooltip": "整本书的 PDF（由 make pdf 生成）",
            "icon": "fas fa-book",
            "label": "download-book-pdf-button",
        })


def _one_copy_of_each_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop repeated ``<script>`` entries from the page.

    Jupyter Book 1 hands the inline scripts of sphinx-togglebutton and sphinx-thebe to every page twice (once
    with the file name ``None``, once with ``""``, so Sphinx's own check does not see them as the same); the
    second ``const THEBE_JS_URL = ...`` then stops with "has already been declared" on every page.
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # the same file, or the same inline body (its file name None in one copy, "" in the other), with the
        # same attributes
        attributes = getattr(script, "attributes", {}) or {}
        name = str(getattr(script, "filename", script) or "")
        key = (name, tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    scripts[:] = kept


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _templates_first)
    app.connect("builder-inited", _add_static_path)
    app.connect("html-page-context", _book_pdf_button, priority=900)
    app.connect("html-page-context", _one_copy_of_each_script, priority=950)
    app.add_css_file("layout.css")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
