"""The glossary (术语表): every entry glossed and used, every chapter links each term at its first use.

The link check is ``scripts/glossary_links.py`` (which also adds missing links
with ``--fix``); these tests run it on the real pages and on small made-up
pages, so that both the course and the checker are held to the rule.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import yaml
from lessons import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import glossary_links  # noqa: E402

TERMS = glossary_links.glossary_terms()
FORMS = glossary_links.name_forms(TERMS)
CHAPTERS = glossary_links.chapters()


def test_the_glossary_is_in_the_book_and_linked_from_the_roadmap():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    appendix = next(part for part in toc["parts"] if part["caption"] == "附录")
    assert {"file": "book/glossary"} in appendix["chapters"]
    assert "{doc}`glossary`" in (ROOT / "book" / "intro.md").read_text(encoding="utf-8")


def test_each_entry_gives_its_english_and_a_definition():
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    assert len(TERMS) == len(set(TERMS)) >= 40
    for term in TERMS:
        if term not in ("softmax", "logits"):  # already English: nothing to gloss
            assert re.fullmatch(r"[^（）]+（[A-Za-z][A-Za-z -]*）", term), term
        definition = text.split(f"\n{term}\n", 1)[1].split("\n\n", 1)[0]
        assert definition.startswith("  ") and len(definition.strip()) >= 15, term


def test_every_entry_is_used_and_linked_by_some_chapter():
    linked = set()
    for page in CHAPTERS:
        linked |= {term for term, (_, _, is_link) in
                   glossary_links.first_uses(page.read_text(encoding="utf-8"), FORMS).items() if is_link}
    assert set(TERMS) - linked == set(), "术语表里有没有任何一章链接的条目"


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_links_every_term_at_its_first_use(page):
    missing = glossary_links.unlinked(page.read_text(encoding="utf-8"), FORMS)
    assert not missing, (f"{page.name} 里这些术语第一次出现时没有链接到术语表"
                         f"（运行 python scripts/glossary_links.py --fix）：{sorted(missing)}")


def test_every_link_names_an_entry_and_a_chapter_links_each_term_once():
    for page in CHAPTERS:
        roles = glossary_links.TERM_ROLE.finditer(page.read_text(encoding="utf-8"))
        targets = [m.group(1) or m.group(2) for m in roles]
        assert set(targets) <= set(TERMS), (page.name, set(targets) - set(TERMS))
        assert len(targets) == len(set(targets)), f"{page.name} 把同一个术语链接了不止一次"


def test_the_checker_finds_the_first_use_in_prose_only():
    page = "\n".join([
        "---", "kernelspec: 注意力", "---", "# 注意力", "",
        "`注意力` 与 $注意力$ 都不算。这里的自注意力是另一个术语，关键的键也不算。",
        "```{code-cell} ipython3", "x = '注意力'", "```",
        "第一次真正的注意力在这里，第二次注意力不用再链接；键（key）要带英文才算。",
    ])
    uses = glossary_links.unlinked(page, FORMS)
    assert set(uses) == {"注意力（attention）", "自注意力（self-attention）", "键（key）"}
    at, form = uses["注意力（attention）"]
    assert form == "注意力" and page[at - 6:at] == "第一次真正的"
    fixed = glossary_links.link(page, FORMS)
    assert "第一次真正的{term}`注意力 <注意力（attention）>`在这里，第二次注意力不用" in fixed
    assert "{term}`键（key）`" in fixed and "关键的键也不算" in fixed
    assert glossary_links.unlinked(fixed, FORMS) == {}


def test_a_link_after_an_unlinked_first_use_does_not_count():
    page = "先用注意力，后来才链接{term}`注意力 <注意力（attention）>`。"
    assert set(glossary_links.unlinked(page, FORMS)) == {"注意力（attention）"}


def test_the_command_reports_in_chinese_and_fails(tmp_path, capsys):
    page = tmp_path / "ch99-demo.md"
    page.write_text("这一章讲掩码（mask）。\n", encoding="utf-8")
    assert glossary_links.main([str(page)]) == 1
    out = capsys.readouterr().out
    assert "ch99-demo.md:1: 「掩码（mask）」第一次出现，未链接到术语表" in out and "--fix" in out
    assert glossary_links.main(["--fix", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == "这一章讲{term}`掩码（mask）`。\n"
    assert glossary_links.main([str(page)]) == 0


def test_the_overflow_and_underflow_thresholds_the_glossary_states():
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    assert "大于约 709.78 时上溢" in text and "小于约 −745 时下溢" in text
    with np.errstate(over="ignore", under="ignore"):
        assert np.isfinite(np.exp(709.78)) and np.isinf(np.exp(709.79))
        assert np.exp(-744.0) > 0 and np.exp(-745.2) == 0
