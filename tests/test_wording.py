"""What readers and students see speaks to them: no internal words, one term per idea.

Scanned: the book's pages and self-checks, the guides, the notebooks students
get (``notebooks/``) and the instructor sources they are made from
(``solutions/``: quiz explanations reach students in their feedback), the
feedback template, and the messages of ``attnlib`` (students read them).

* The course is built from source documents the readers never see; where the
  book corrects a claim it quotes it as a common statement.  Words that point
  at those documents ("种子", "原题" ...) must not appear.
* One word per idea (d2l-zh usage, see the 前言): a token is a 词元, a position
  a mask forbids is 被掩码 (never 遮住 / 屏蔽 / 遮挡); the English word "token"
  appears only as the gloss "词元（token）".
"""

from __future__ import annotations

import json
import re

import pytest
from lessons import ROOT

INTERNAL = re.compile(r"种子|原始材料|原始讲义|讲义|原题|原解析|原文说|source document|seed (?:doc|material)", re.I)
MIXED_TERMS = re.compile(r"遮住|屏蔽|遮蔽|遮挡|掩蔽|个词(?![元向表汇典语])")
ENGLISH_TOKEN = re.compile(r"(?<!词元（)\btokens?\b", re.I)
CONTRIBUTORS = "## 编写课程的约定"
#: The one sentence allowed to name d2l-zh's other word for masking.
D2L_NOTE = re.compile(r"[^。\n]*d2l-zh[^。\n]*掩蔽[^。\n]*。")


def _reader_files() -> list:
    files = sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "book" / "selfchecks").glob("*.yml"))
    files += sorted((ROOT / "notebooks").glob("*/*.ipynb")) + sorted((ROOT / "solutions").glob("*/*.ipynb"))
    files += sorted((ROOT / "grading" / "templates").rglob("*.j2")) + sorted((ROOT / "attnlib").rglob("*.py"))
    return files + [ROOT / "README.md"]


def _text(path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])
    text = path.read_text(encoding="utf-8")
    if path.name == "README.md":  # its last section, for contributors, names the words to avoid
        text = text.split(CONTRIBUTORS)[0]
    return text


def _prose(path) -> str:
    """The Chinese prose of a page or notebook: code blocks, inline code and code cells removed."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = _text(path)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


FILES = _reader_files()


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_no_word_points_at_the_source_documents(path):
    hits = [m.group(0) for m in INTERNAL.finditer(_text(path))]
    assert not hits, f"{path.relative_to(ROOT)}：读者不知道这些内部材料，请改成“常见说法”的引述：{hits}"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_one_term_per_idea(path):
    text = D2L_NOTE.sub("", _text(path)) if path.name == "intro.md" else _text(path)  # strings in code too
    mixed = sorted({m.group(0) for m in MIXED_TERMS.finditer(text)})
    prose = _prose(path) if path.suffix in (".md", ".yml", ".ipynb") else ""  # code may name variables `tokens`
    english = [m.group(0) for m in ENGLISH_TOKEN.finditer(prose)]
    assert not mixed, f"{path.relative_to(ROOT)}：术语不统一（用“被掩码”“词元”）：{mixed}"
    assert not english, f"{path.relative_to(ROOT)}：正文里写“词元”，英文只在“词元（token）”里出现：{english}"


def test_the_readme_section_for_contributors_is_where_the_scan_stops():
    assert CONTRIBUTORS in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_patterns_catch_what_they_should():
    assert INTERNAL.search("本书在这里更正种子材料") and INTERNAL.search("原题标为单选")
    assert MIXED_TERMS.search("整行被遮住") and MIXED_TERMS.search("五个词里") and not MIXED_TERMS.search("每个词元")
    assert ENGLISH_TOKEN.search("权重最大的 token") and not ENGLISH_TOKEN.search("词元（token）")
    assert D2L_NOTE.sub("", "d2l-zh 写作掩蔽。其余。") == "其余。"
