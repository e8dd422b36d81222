"""Link each chapter's first use of every glossary term to the glossary (术语表).

The glossary (``book/glossary.md``) lists each term as ``中文（english）``.  In
every chapter page, the first time the prose uses a term (its glossed form
``中文（english）`` or, for names of two characters or more, the Chinese name
alone) becomes a ``{term}`` role that points at the glossary entry.  Only
running prose is considered: front matter, code, math, inline code, existing
roles and headings are left as they are.  Single-character names (键, 值, 头)
are linked only in their glossed form, since as bare characters they are also
parts of ordinary words (关键, 数值, 开头).

    python scripts/glossary_links.py          # report the unlinked first uses
    python scripts/glossary_links.py --fix    # link them in place

``tests/test_glossary.py`` runs the check, so a new chapter (or an edit that
moves a term's first use) fails the tests until the links are added.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"

# Spans of a page that are not running prose: front matter, fenced blocks, display and inline math,
# inline code with or without a role, markdown links and headings.
SKIP = re.compile(
    r"\A---\n.*?\n---\n"  # front matter
    r"|```.*?```"  # code cells and directives
    r"|\$\$.*?\$\$"  # display math
    r"|\$[^$\n]+\$"  # inline math
    r"|\{[\w:-]+\}`[^`]*`"  # roles: {doc}`…`, {glue:text}`…`, {term}`…`
    r"|`[^`\n]*`"  # inline code
    r"|\[[^\]\n]*\]\([^)\n]*\)"  # markdown links
    r"|^#[^\n]*$",  # headings
    re.S | re.M,
)


def glossary_terms(path: pathlib.Path = GLOSSARY) -> list[str]:
    """The terms of the page's ``{glossary}`` blocks, in order (e.g. ``"查询（query）"``)."""
    blocks = re.findall(r"```\{glossary\}\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line and not line[0].isspace()]


def name_forms(terms: list[str]) -> dict[str, str]:
    """Each form a term appears in within prose, mapped to its glossary entry."""
    forms = {}
    for term in terms:
        forms[term] = term
        chinese = term.split("（")[0].strip()
        if len(chinese) >= 2:
            forms[chinese] = term
    return forms


TERM_ROLE = re.compile(r"\{term\}`(?:[^`<]*<([^`>]*)>|([^`]*))`")


def _is_word(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


def _plain_uses(text: str, start: int, end: int, ordered: list[str]):
    """``(offset, form)`` of each use in ``text[start:end]``; the longest form wins at each position."""
    i = start
    while i < end:
        form = next((f for f in ordered if text.startswith(f, i) and i + len(f) <= end), None)
        if form is None or (_is_word(form[0]) and i > 0 and _is_word(text[i - 1])) or (
                _is_word(form[-1]) and _is_word(text[i + len(form):i + len(form) + 1])):
            i += 1
            continue
        yield i, form
        i += len(form)


def first_uses(text: str, forms: dict[str, str]) -> dict[str, tuple[int, str, bool]]:
    """Each term's first use in ``text``: ``{term: (offset, form, linked)}``.

    A use is a ``{term}`` role (``linked``) or a form in running prose.  At each position the longest
    form wins, so 自注意力 is a use of 自注意力, not of 注意力.
    """
    ordered = sorted(forms, key=len, reverse=True)
    uses, start = [], 0
    for skipped in [*SKIP.finditer(text), None]:
        stop = len(text) if skipped is None else skipped.start()
        uses += [(at, form, False) for at, form in _plain_uses(text, start, stop, ordered)]
        role = skipped and TERM_ROLE.fullmatch(skipped.group())
        if role:
            uses.append((skipped.start(), skipped.group(), True))
            forms = forms | {skipped.group(): role.group(1) or role.group(2)}
        start = stop if skipped is None else skipped.end()
    found = {}
    for at, form, linked in sorted(uses):
        found.setdefault(forms[form], (at, form, linked))
    return found


def unlinked(text: str, forms: dict[str, str]) -> dict[str, tuple[int, str]]:
    """The terms whose first use in ``text`` is not a ``{term}`` link: ``{term: (offset, form)}``."""
    return {term: (at, form) for term, (at, form, linked) in first_uses(text, forms).items() if not linked}


def link(text: str, forms: dict[str, str]) -> str:
    """``text`` with each unlinked first use turned into a ``{term}`` role."""
    for term, (at, form) in sorted(unlinked(text, forms).items(), key=lambda item: -item[1][0]):
        role = f"{{term}}`{form}`" if form == term else f"{{term}}`{form} <{term}>`"
        text = text[:at] + role + text[at + len(form):]
    return text


def chapters() -> list[pathlib.Path]:
    return sorted((ROOT / "book").glob("ch[0-9][0-9]-*.md"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="store_true", help="link the unlinked first uses in place")
    parser.add_argument("pages", nargs="*", type=pathlib.Path, help="chapter pages (default: all)")
    args = parser.parse_args(argv)
    forms = name_forms(glossary_terms())
    missing = 0
    for page in args.pages or chapters():
        text = page.read_text(encoding="utf-8")
        todo = unlinked(text, forms)
        if args.fix and todo:
            page.write_text(link(text, forms), encoding="utf-8")
        for term, (at, form) in sorted(todo.items(), key=lambda item: item[1][0]):
            line = text.count("\n", 0, at) + 1
            print(f"{page.name}:{line}: 「{form}」第一次出现，未链接到术语表的「{term}」")
        missing += len(todo)
    if missing and not args.fix:
        print(f"共 {missing} 处；运行 python scripts/glossary_links.py --fix 自动添加链接。")
    return 1 if missing and not args.fix else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
