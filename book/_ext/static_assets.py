"""One way for the book's own extensions to ship their CSS and JavaScript (not itself a Sphinx extension).

An extension keeps its files in a folder beside it (``selfcheck_static/``, ``kvcalc_static/``) and calls
:func:`ship` from its ``setup``: the files are linked from every HTML page and copied into the build's
``_static/`` when the build finishes, whatever ``html_static_path`` says.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx


def ship(app: Sphinx, folder: Path, css: str, js: str) -> None:
    """Link ``css`` and ``js`` (file names in ``folder``) from every HTML page and copy them into ``_static/``."""
    app.add_css_file(css)
    app.add_js_file(js, loading_method="defer")

    def copy(app: Sphinx, exception) -> None:
        if exception is not None or app.builder.format != "html":
            return
        target = Path(app.outdir) / "_static"
        target.mkdir(parents=True, exist_ok=True)
        for name in (css, js):
            (target / name).write_bytes((folder / name).read_bytes())

    app.connect("build-finished", copy)
