"""What a student reads and follows in an exercise stub is Chinese.

An answer cell of a released notebook (``notebooks/``) keeps everything outside
its solution region: the signature of the function or class to write, its
docstring and any comment.  That is the student's instruction, so by the
course's rule (code and identifiers English, what a learner reads Chinese):

* every function and class defined in an answer cell has a docstring (a class's
  docstring covers its ``__init__``);
* every docstring and comment holds Chinese and no line of English prose;
* docstrings keep the NumPy layout with the course's Chinese section headings
  (``参数`` / ``返回`` / ``异常`` / ``属性`` / ``说明``), never ``Parameters`` ...

The code a student is given to build on (a notebook's setup cells, e.g. chapter
12's ``ToyTranslator``) follows the same rule.  nbgrader's stub line
``# YOUR CODE HERE`` stays as nbgrader writes it; test cells are not
instructions and are not scanned.
"""

from __future__ import annotations

import ast
import io
import json
import pathlib
import re
import tokenize

import pytest
from lessons import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
#: Three English words in a row, once code spans and Python's literals are taken out: a sentence.
ENGLISH_PROSE = re.compile(r"(?<![\w.])[A-Za-z]{2,}(?:[ ,;:'()-]+[A-Za-z]{2,}){2,}(?![\w(])")
CODE_SPAN = re.compile(r"``[^`]*``|`[^`]*`")
LITERALS = re.compile(r"\b(?:True|False|None)\b")
HEADINGS = ("参数", "返回", "异常", "属性", "说明")
ENGLISH_HEADINGS = re.compile(r"^\s*(Parameters|Returns|Raises|Notes|Attributes|Examples|Yields|See Also)\s*$",
                              re.M)
NBGRADER_STUB = "# YOUR CODE HERE"
LINTER_COMMENT = re.compile(r"^#\s*(noqa|type:|pragma)\b")


def released(folder: pathlib.Path = ROOT / "notebooks") -> list[pathlib.Path]:
    return sorted(folder.glob("*/*.ipynb"))


def code_cells(path: pathlib.Path, *, answers: bool) -> list[tuple[str, str]]:
    """``(cell name, source)`` of the answer cells (or, with ``answers=False``, the given code cells)."""
    cells = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or (meta.get("grade") and not meta.get("solution")):
            continue  # test cells are checks, not instructions
        if bool(meta.get("solution")) == answers:
            cells.append((meta.get("grade_id") or cell.get("id", "?"), "".join(cell["source"])))
    return cells


def docstrings(source: str) -> list[tuple[str, str | None]]:
    """``(name, docstring or None)`` of every function and class in ``source`` (a class's ``__init__`` left out)."""
    found = []

    def walk(node, prefix, in_class_with_doc):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name, doc = prefix + child.name, ast.get_docstring(child, clean=True)
                if not (child.name == "__init__" and in_class_with_doc and doc is None):
                    found.append((name, doc))
                walk(child, name + ".", isinstance(child, ast.ClassDef) and doc is not None)

    walk(ast.parse(source), "", False)
    return found


def comments(source: str) -> list[str]:
    """The comments of ``source`` (nbgrader's stub line and linter directives left out)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT
            and t.string.strip() != NBGRADER_STUB and not LINTER_COMMENT.match(t.string)]


def english_lines(text: str) -> list[str]:
    """Lines of ``text`` without Chinese that read as an English sentence (code spans and literals aside)."""
    bad = []
    for line in text.splitlines():
        if CJK.search(line):
            continue
        plain = LITERALS.sub(" ", CODE_SPAN.sub(" ", line))
        if ENGLISH_PROSE.search(plain):
            bad.append(line.strip())
    return bad


def headings(doc: str) -> list[str]:
    """The NumPy section headings of a docstring: a line followed by a line of dashes."""
    lines = doc.splitlines()
    pairs = zip(lines, lines[1:], strict=False)  # each line with the next
    return [a.strip() for a, b in pairs if re.fullmatch(r"\s*-{2,}\s*", b) and a.strip()]


def problems(source: str) -> list[str]:
    """What in an answer cell's (or given cell's) instructions is not in the course's Chinese form."""
    found = []
    for name, doc in docstrings(source):
        if doc is None:
            found.append(f"{name}：没有文档字符串（docstring）")
            continue
        if not CJK.search(doc):
            found.append(f"{name}：文档字符串里没有中文：{doc.splitlines()[0][:60]!r}")
        elif not CJK.search(doc.splitlines()[0]):
            found.append(f"{name}：文档字符串的第一行（摘要）不是中文：{doc.splitlines()[0][:60]!r}")
        found += [f"{name}：英文句子 {line[:60]!r}" for line in english_lines(doc)]
        found += [f"{name}：英文的小节标题 {m.group(1)!r}（用 {'/'.join(HEADINGS)}）"
                  for m in ENGLISH_HEADINGS.finditer(doc)]
        found += [f"{name}：小节标题 {h!r} 不在 {'/'.join(HEADINGS)} 之中" for h in headings(doc)
                  if h not in HEADINGS]
    for comment in comments(source):
        if not CJK.search(comment):
            found.append(f"注释不是中文：{comment[:60]!r}")
    return found


ANSWERS = [(path, name, source) for path in released() for name, source in code_cells(path, answers=True)]
GIVEN = [(path, name, source) for path in released() for name, source in code_cells(path, answers=False)]


def _ids(cases):
    return [f"{path.parent.name}:{name}" for path, name, _ in cases]


def test_every_assignment_has_answer_cells_with_instructions():
    assert {path.parent.name for path, _, _ in ANSWERS} == {path.parent.name for path in released()}
    assert sum(1 for _, _, source in ANSWERS if docstrings(source)) >= 40  # the chapters' functions and classes


@pytest.mark.parametrize(("path", "name", "source"), ANSWERS, ids=_ids(ANSWERS))
def test_an_answer_cell_speaks_chinese(path, name, source):
    found = problems(source)
    assert not found, f"{path.relative_to(ROOT)} 的作答单元 {name}：" + "；".join(found)


@pytest.mark.parametrize(("path", "name", "source"), GIVEN, ids=_ids(GIVEN))
def test_the_code_a_student_builds_on_speaks_chinese(path, name, source):
    found = problems(source)
    assert not found, f"{path.relative_to(ROOT)} 的单元 {name}：" + "；".join(found)


def test_the_checks_catch_what_they_should():
    english = 'def f(x):\n    """Return ``x`` along the last axis, as floats."""\n    # YOUR CODE HERE\n'
    assert problems(english) and not comments(english)
    mixed = 'def f(x):\n    """把 x 转成浮点数。\n\n    Raises ValueError when x is empty.\n    """\n'
    assert any("英文句子" in p for p in problems(mixed))
    numpy_headings = 'def f(x):\n    """把 x 转成浮点数。\n\n    Parameters\n    ----------\n    x : 数组\n    """\n'
    assert any("Parameters" in p for p in problems(numpy_headings))
    assert problems("def f(x):\n    return x\n") == ["f：没有文档字符串（docstring）"]
    assert problems("x = 1  # the first value\n") and not problems("x = 1  # 第一个值\n")
    chinese = ('class C:\n    """一个类。\n\n    参数\n    ----\n    n : int\n        长度。\n\n    说明\n    ----\n'
               '    例如 ``C(2)``::\n\n        [[ True False]]\n    """\n\n    def __init__(self, n):\n'
               '        # YOUR CODE HERE\n        raise NotImplementedError()\n')
    assert problems(chinese) == []
    assert problems('answer = ""  # noqa: F841\n# 第 1 题：例如 answer = "B"\n') == []


def test_the_written_answer_stub_renders_without_adding_a_cell():
    """The stub of a written answer says Ctrl+Enter: Shift+Enter on the last cell adds an empty cell below it."""
    config = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    stub = re.search(r"^c\.ClearSolutions\.text_stub = (.+)$", config, re.M).group(1)
    assert "Ctrl+Enter" in stub and "Shift+Enter" not in stub, stub
    for path in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        text = path.read_text(encoding="utf-8")
        assert "写完按 Shift+Enter" not in text, f"{path.name}: regenerate the release (make release)"
