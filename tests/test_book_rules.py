"""Three rules of the README's contributors' section (8–10) that keep known kinds of mistakes out of the lessons.

1. A sentence about a glued value is true for that value: the cell asserts it or
   chooses it (``attnlib.claims.Sentences``).  Held here by the helper's own
   contract, by the sentences the pages define (evaluated on the cases that
   went wrong before: a zero difference called a rounding error, a key called
   the longest when another was longer), and by a scan: "舍入误差" never sits
   in a prose sentence beside a glued number.
2. Facts about the build machine (cores, processor, memory) are glued, never
   typed: the chapters' prose, glue roles removed, has no such fact.
3. A page refers only to code it shows.  Heuristic: in every ``##`` section,
   a sentence that points at code ("演示", "注释", "这段代码", "一种常见的写法"
   ...) needs a code block (an executed ``{code-cell}`` or a shown ```` ```python ````
   block) in the same section, and a comment quoted after "注释" must appear
   word for word in one of the section's code blocks.  A sentence that names
   another page with ``{doc}`` refers to code shown there and is not checked.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from lessons import ROOT, code_cells, prose

from attnlib import claims

CHAPTERS = sorted((ROOT / "book").glob("ch[0-9][0-9]-*.md"))
IDS = [p.stem for p in CHAPTERS]
GLUE_ROLE = re.compile(r"\{glue:text\}`[^`]*`")
CODE_BLOCK = re.compile(r"```(\{code-cell\}[^\n]*|python[^\n]*)\n(.*?)```", re.S)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[。；！？])|\n", text) if s.strip()]


# -- rule 1: a sentence about a glued value is true for it -------------------------------------------------------


def page_sentences(page, **names) -> dict:
    """``{name: Sentences}`` for each ``name = claims.Sentences(...)`` of the page's cells, without running them.

    ``names``: the page's own variables that a condition reads (chapter 7's ``half`` of the work ratio).
    """
    found = {}
    for cell in code_cells(page):
        for node in ast.walk(ast.parse(cell)):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and ast.unparse(node.value.func) == "claims.Sentences"):
                name = node.targets[0].id
                found[name] = eval(compile(ast.Expression(node.value), page.name, "eval"),  # noqa: S307 - our page
                                   {"claims": claims, "np": np, **names})
    return found


def test_a_sentence_is_picked_only_when_exactly_one_holds():
    sign = claims.Sentences((lambda x: x > 0, "正的：{:.1f}"), (lambda x: x < 0, "负的"))
    assert sign.pick(2.5) == "正的：2.5" and sign.pick(-1) == "负的"
    with pytest.raises(ValueError, match="恰好 1 句"):
        sign.pick(0)  # no sentence holds: the cell, and the build, fail
    overlap = claims.Sentences((lambda x: x >= 0, "a"), (lambda x: x <= 0, "b"))
    with pytest.raises(ValueError, match="2 句"):
        overlap.pick(0)
    with pytest.raises(TypeError):
        claims.Sentences(("not callable", "a"))


@pytest.mark.parametrize(("page", "name", "value", "says", "never"), [
    # the zero difference of chapter 11 is not a rounding error
    ("ch11-kv-cache", "layer2", 0.0, "逐位相同", "舍入误差"),
    ("ch11-kv-cache", "layer2", 3e-8, "最多差 3e-08，这是 float32 的舍入误差", "相同"),
    ("ch11-kv-cache", "steps_agree", 0.0, "逐位相同", "舍入误差"),
    ("ch11-kv-cache", "steps_agree", 2e-6, "舍入误差", "相同"),
    ("ch10-efficiency", "flash_agrees", 0.0, "逐位相同", "舍入误差"),
    ("ch10-efficiency", "flash_agrees", 4e-16, "舍入误差", "相同"),
    ("ch12-applications", "logits_agree", 0.0, "逐位相同", "舍入误差"),
    ("ch12-applications", "logits_agree", 1e-6, "舍入误差", "相同"),
    # chapter 3: key C is "the longest" only when it is (|B| = 2.83 > |C| = 2.68 was the old table)
    ("ch03-scores", "key_c", np.array([0.95, 2.83, 2.68, 1.5]), "也很长", "最长"),
    ("ch03-scores", "key_c", np.array([0.95, 2.83, 3.13, 1.5]), "最长", "也很长"),
    # chapter 7: the matrix-vector loop's gap is named for what was measured
    ("ch07-parallel", "gemv_gap", 3.6, "不只是 Python 的开销", "主要来自"),
    ("ch07-parallel", "gemv_gap", 1.1, "主要来自 Python 的开销", "不只是"),
    ("ch07-parallel", "rnn_gain", 0.8, "并没有更快", "倍"),
    ("ch07-parallel", "rnn_gain", 3.2, "只快了 3.2 倍", "接近"),
    ("ch07-parallel", "rnn_gain", 21.1, "快了 21.1 倍，接近乘加之比", "只快了"),
])
def test_the_pages_sentences_say_the_right_thing_for_the_known_cases(page, name, value, says, never):
    sentence = page_sentences(ROOT / "book" / f"{page}.md", half=16 / 2)[name].pick(value)
    assert says in sentence and never not in sentence, sentence


@pytest.mark.parametrize(("page", "name", "value"), [
    ("ch11-kv-cache", "layer2", 0.5),  # a real change is neither sentence: the build must fail
    ("ch10-efficiency", "flash_agrees", 1e-3),
    ("ch12-applications", "logits_agree", float("nan")),
])
def test_a_value_no_sentence_fits_fails_the_cell(page, name, value):
    with pytest.raises(ValueError):
        page_sentences(ROOT / "book" / f"{page}.md")[name].pick(value)


@pytest.mark.parametrize("page", CHAPTERS, ids=IDS)
def test_every_chosen_sentence_is_glued_and_shown(page):
    """A page's Sentences are picked into a glue that its prose shows (a sentence defined and not used is dead)."""
    cells, text = "\n".join(code_cells(page)), prose(page)
    for name in page_sentences(page):
        glued = re.findall(rf'glue\("([^"]+)", {name}\.pick\(', cells)
        assert glued and all(f"{{glue:text}}`{g}`" in text for g in glued), (page.name, name)


@pytest.mark.parametrize("page", CHAPTERS, ids=IDS)
def test_no_glued_number_is_called_a_rounding_error_by_the_prose(page):
    """Whether a difference is a rounding error (and not exactly 0) depends on the value: the cell picks it."""
    bad = [s for s in _sentences(prose(page)) if "舍入误差" in s and re.search(r"\{glue:text\}`[^`]*:[^`]*`", s)]
    assert not bad, f"{page.name}：这些句子评论一个 glue 的数字，应当由单元选句（claims.Sentences）：{bad}"


def test_the_three_errors_of_the_review_stay_fixed():
    ch03 = ROOT / "book" / "ch03-scores.md"
    cells = "\n".join(code_cells(ch03))
    keys = eval(re.search(r"^keys = (np\.array\(\[\[.*?\]\]\))", cells, re.M).group(1), {"np": np})  # noqa: S307
    lengths = np.linalg.norm(keys, axis=1)
    assert lengths.argmax() == 2  # key C is the longest of the table the page prints
    assert page_sentences(ch03)["key_c"].pick(lengths) == "键 C 最长"
    assert "键 C 最长" not in prose(ch03)  # the words come from the cell
    ch06 = (ROOT / "book" / "selfchecks" / "ch06-attention.yml").read_text(encoding="utf-8")
    assert "(2.1, 2.1)" not in ch06 and "(6.3, 6.3)" in ch06  # 0.7 x (9, 9): the mistake the option explains
    ch11 = prose(ROOT / "book" / "ch11-kv-cache.md")
    assert "ch11_kv_rounding" not in ch11 and "{glue:text}`ch11_kv_layer2`" in ch11


# -- rule 2: facts about the build machine are glued --------------------------------------------------------------

MACHINE_FACT = re.compile(
    r"(?:[2-9]|\d{2,}|[两三四五六七八九十]+)\s*(?:个)?\s*(?:物理|逻辑)?(?:CPU\s*)?(?:核|cores?\b|vCPU|处理器)"
    r"|\d+(?:\.\d+)?\s*(?:GB|GiB|G|MB|MiB)\s*(?:的)?\s*(?:内存|RAM|memory)"
    r"|Intel|AMD|Xeon|EPYC|Ryzen|Apple\s*M\d|Graviton|Neoverse|\bi[3579]-\d{4}",
    re.I,
)


@pytest.mark.parametrize("page", CHAPTERS, ids=IDS)
def test_no_page_types_a_fact_about_the_build_machine(page):
    text = GLUE_ROLE.sub("〈glued〉", prose(page))
    hits = [m.group(0) for m in MACHINE_FACT.finditer(text)]
    assert not hits, f"{page.name}：构建机器的事实要从机器上 glue（os.cpu_count() 等），不要手写：{hits}"


def test_the_machine_fact_pattern_catches_typed_facts_and_leaves_glued_ones():
    for typed in ("这是一台 2 核的 CPU", "有 16 个逻辑核", "两核处理器", "64 GB 内存", "Intel Xeon", "8 cores"):
        assert MACHINE_FACT.search(typed), typed
    for fine in ("这台机器有 〈glued〉 个逻辑 CPU，这里只用其中一个", "在一个 CPU 线程上", "只用一个核",
                 "4096 个词元的上下文是 〈glued〉 GiB"):
        assert not MACHINE_FACT.search(fine), fine


# -- rule 3: a page refers only to code it shows ------------------------------------------------------------------

POINTS_AT_CODE = re.compile(r"演示|注释|这段代码|上面的代码|下面的代码|示例代码|这段写法|一种常见的写法")
QUOTED_COMMENT = re.compile(r"注释[^“”。]{0,8}“([^”]+)”")  # 注释说“…”, 注释说输出“…”


def _sections(text: str) -> list[str]:
    """The page cut at its ``## `` headings (the part before the first heading is a section too)."""
    if text.startswith("---"):
        text = text.split("---", 2)[2]
    return re.split(r"\n(?=## )", text)


def references_to_unshown_code(text: str) -> list[str]:
    """The sentences of a MyST page that point at code no block of their section shows."""
    problems = []
    for section in _sections(text):
        blocks = [body for _, body in CODE_BLOCK.findall(section)]
        words = re.sub(r"```.*?```", "", section, flags=re.S)
        for sentence in _sentences(words):
            if "{doc}" in sentence or not POINTS_AT_CODE.search(sentence):
                continue
            if not blocks:
                problems.append(sentence.strip())
            for quoted in QUOTED_COMMENT.findall(sentence):
                if not any(quoted in block for block in blocks):
                    problems.append(sentence.strip())
    return problems


@pytest.mark.parametrize("page", CHAPTERS, ids=IDS)
def test_no_page_refers_to_code_it_does_not_show(page):
    problems = references_to_unshown_code(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.name}：这些句子评论了本节没有展示的代码、注释或演示：{problems}"


def test_the_reference_check_catches_a_comment_the_reader_never_sees():
    unshown = "## 两个常见的演示\n\n演示的注释说输出“形状与输入一致”。\n"
    assert references_to_unshown_code(unshown)
    beside_other_code = "## 重做\n\n```{code-cell} ipython3\nout = f(x)\n```\n\n演示的注释说输出“形状与输入一致”。\n"
    assert references_to_unshown_code(beside_other_code)  # code is shown, but not the comment quoted
    misquoted = "## 写法\n\n```python\nprint(x.shape)  # (3, 4)\n```\n\n注释说“形状与输入一致”。\n"
    assert references_to_unshown_code(misquoted)
    shown = "## 写法\n\n```python\nprint(x.shape)  # 形状与输入一致\n```\n\n注释说“形状与输入一致”，其实不然。\n"
    assert not references_to_unshown_code(shown)
    elsewhere = "## 小结\n\n（{doc}`ch05-softmax`演示过）\n"
    assert not references_to_unshown_code(elsewhere)


# -- one notation for the projections, one dash ---------------------------------------------------------------------

READER_FILES = sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "book" / "selfchecks").glob("*.yml"))


@pytest.mark.parametrize("path", READER_FILES, ids=[p.relative_to(ROOT / "book").as_posix() for p in READER_FILES])
def test_one_notation_for_the_projection_matrices_and_one_dash(path):
    """W_Q, W_K, W_V, W_O (a head's: W_Q^{(i)}); 编码器–解码器 with an en dash."""
    text = path.read_text(encoding="utf-8")
    assert not re.findall(r"W\^\{?[QKVO]\b", text), path.name
    assert not re.findall(r"W_\{[QKVO]\s*,", text), path.name  # not W_{Q,i}
    assert not re.findall(r"编码器[—\-－]解码器", text), path.name


# -- the API page's table of contents: each name once ----------------------------------------------------------------


def test_the_api_page_lists_each_name_once_in_its_contents():
    """The PyTorch twin of each entry gets no contents entry (it sits beside the NumPy one the entry links to)."""
    import sys

    from sphinx import addnodes

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import apidoc
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    tree = addnodes.desc()
    for module in ("attnlib.numpy", "attnlib.torch"):
        desc = addnodes.desc()
        desc += addnodes.desc_signature(module=module, fullname="KVCache")
        member = addnodes.desc()  # a class member (KVCache.append) nests inside its class
        member += addnodes.desc_signature(module=module, fullname="KVCache.append")
        desc += addnodes.desc_content("", member)
        tree += desc
    apidoc.one_contents_entry_per_name(tree)
    signed = [d for d in tree.findall(addnodes.desc) if d.children and isinstance(d[0], addnodes.desc_signature)]
    flagged = {(d[0]["module"], d[0]["fullname"]): bool(d.get("no-contents-entry")) for d in signed}
    assert flagged == {("attnlib.numpy", "KVCache"): False, ("attnlib.numpy", "KVCache.append"): False,
                       ("attnlib.torch", "KVCache"): True, ("attnlib.torch", "KVCache.append"): True}
    built = ROOT / "_build" / "html" / "book" / "api.html"
    if built.exists():  # after `make book`: the page's own contents hold every name once
        import html as html_lib

        page = built.read_text(encoding="utf-8")
        nav = page[page.index('class="page-toc"'):]
        nav = nav[:nav.index("</nav>")]
        names = [html_lib.unescape(n) for n in re.findall(r'<span class="pre">([^<]+)</span>', nav)]
        assert names and len(names) == len(set(names)), names
        for backend in ("numpy", "torch"):  # both KVCache entries document their attributes
            assert f'id="attnlib.{backend}.KVCache.length"' in page and f'id="attnlib.{backend}.KVCache.nbytes"' in page
