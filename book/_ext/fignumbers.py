"""Sphinx extension: figures are numbered by chapter, 图 5.2 being the second figure of chapter 5.

Sphinx numbers figures by section number, and section numbers exist only under
a ``numbered`` toctree, which would print a second number before the chapter
titles the table of contents already numbers by hand ("5. Softmax 归一化").
Without it Sphinx counts the figures through the whole book (图 1 … 图 36).
This extension keeps Sphinx's own numbering and rewrites it per page: a page
``chNN-…`` numbers its figures NN.1, NN.2, … in the order they appear; any other
page numbers its own figures 1, 2, ….  Captions (``numfig_format``) and
``{numref}`` references both read the rewritten numbers.

Sphinx compares the numbers it computes with the ones of the previous build to
decide which pages to write again; it is handed its own numbers back first, so
an unchanged page is not rewritten.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

__version__ = "1.0"

#: The chapter number of a page's name: ``book/ch05-softmax`` is chapter 5.
CHAPTER_PAGE = re.compile(r"(?:^|/)ch(\d+)-[^/]*$")

#: Where Sphinx's own numbers of the last build are kept between builds (the environment is pickled).
_NATIVE = "attn_native_fignumbers"


def chapter_of(docname: str) -> int | None:
    """The chapter number of page ``docname`` (``book/ch05-softmax`` → 5), or None for other pages."""
    match = CHAPTER_PAGE.search(docname)
    return int(match.group(1)) if match else None


def by_chapter(fignumbers: dict) -> dict:
    """Sphinx's ``toc_fignumbers`` ({page: {type: {id: (n,)}}}) renumbered per page, prefixed by the chapter."""
    renumbered: dict = {}
    for docname, types in fignumbers.items():
        prefix = () if chapter_of(docname) is None else (chapter_of(docname),)
        renumbered[docname] = {
            figtype: {fid: (*prefix, i) for i, fid in enumerate(sorted(ids, key=ids.get), start=1)}
            for figtype, ids in types.items()}
    return renumbered


def _give_back_native_numbers(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Before Sphinx numbers the figures: it compares with its own numbers of the last build, not ours."""
    native = getattr(env, _NATIVE, None)
    if native is not None:
        env.toc_fignumbers = native
    return []


def _number_by_chapter(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """After Sphinx numbers the figures: keep its numbers, show the chapter's."""
    setattr(env, _NATIVE, env.toc_fignumbers)
    env.toc_fignumbers = by_chapter(env.toc_fignumbers)
    return []


def setup(app: Sphinx) -> dict:
    # Sphinx's toctree collector numbers the figures on this event at the default priority 500.
    app.connect("env-get-updated", _give_back_native_numbers, priority=400)
    app.connect("env-get-updated", _number_by_chapter, priority=600)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
