"""Sphinx extension: ungraded self-check questions at the end of a chapter page.

Usage in a MyST page (the path is relative to the page, or to the source
directory when it starts with ``/``)::

    ```{selfcheck} selfchecks/ch05-softmax.yml
    ```

The question file (YAML)::

    title: 自测：Softmax            # optional; default "自测"
    questions:
      - question: 题干，可以用 MyST 语法和 $x$ 数学公式
        multi: false               # optional; true = several options may be right
        options:
          - text: 选项内容
            correct: true
            why: 为什么对（或为什么错）
          - text: ...
            why: ...

Everything is rendered at build time into plain HTML (question text, options
and explanations are parsed as MyST, so math is typeset by the book's offline
MathJax); the bundled ``selfcheck.js`` only shows and hides things when a
reader clicks.  No kernel, no network.  These questions are practice, not
graded: their answers are in the page on purpose.
"""

from __future__ import annotations

from pathlib import Path

import static_assets
import yaml
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

__version__ = "1.0"

STATIC = Path(__file__).parent / "selfcheck_static"
LETTERS = "ABCDEFGH"


class selfcheck_set(nodes.General, nodes.Element):  # noqa: N801 - docutils node naming
    """The whole block of questions."""


class selfcheck_question(nodes.General, nodes.Element):  # noqa: N801
    """One question: prompt, options, a feedback line."""


class selfcheck_option(nodes.General, nodes.Element):  # noqa: N801
    """One clickable option; ``correct`` attribute."""


class selfcheck_why(nodes.General, nodes.Element):  # noqa: N801
    """The explanation of one option, hidden until the reader answers."""


class QuestionFileError(ValueError):
    """A self-check file that does not follow the format (message in Chinese)."""


def load_questions(path: Path) -> dict:
    """Read and validate a question file.

    Returns
    -------
    dict
        ``{"title": str, "questions": [{"question": str, "multi": bool,
        "options": [{"text": str, "correct": bool, "why": str}, ...]}, ...]}``

    Raises
    ------
    QuestionFileError
        Missing file, bad YAML, or a question that breaks the format.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuestionFileError(f"读不到自测题文件 {path}：{exc}") from None
    except yaml.YAMLError as exc:
        raise QuestionFileError(f"自测题文件 {path} 不是合法的 YAML：{exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list) or not data["questions"]:
        raise QuestionFileError(f"{path}：顶层必须是含非空 questions 列表的映射。")
    out = {"title": str(data.get("title", "自测")), "questions": []}
    for n, q in enumerate(data["questions"], 1):
        where = f"{path} 第 {n} 题"
        if not isinstance(q, dict) or not isinstance(q.get("question"), str) or not q["question"].strip():
            raise QuestionFileError(f"{where}：缺少 question 文本。")
        options = q.get("options")
        if not isinstance(options, list) or not 2 <= len(options) <= len(LETTERS):
            raise QuestionFileError(f"{where}：options 必须是 2 到 {len(LETTERS)} 个选项的列表。")
        multi = bool(q.get("multi", False))
        clean = []
        for m, opt in enumerate(options, 1):
            if not isinstance(opt, dict) or not isinstance(opt.get("text"), str) or not isinstance(opt.get("why"), str):
                raise QuestionFileError(f"{where} 第 {m} 个选项：需要 text 和 why 两个字符串。")
            clean.append({"text": opt["text"], "why": opt["why"], "correct": bool(opt.get("correct", False))})
        right = sum(o["correct"] for o in clean)
        if right == 0 or (not multi and right != 1):
            raise QuestionFileError(f"{where}：{'多选题至少要有一个' if multi else '单选题必须恰好有一个'}正确选项"
                                    f"（现在有 {right} 个）。")
        out["questions"].append({"question": q["question"], "multi": multi, "options": clean})
    return out


class SelfCheckDirective(SphinxDirective):
    """``{selfcheck} <question file>``: interactive, ungraded questions."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        rel, path = self.env.relfn2path(self.arguments[0].strip(), self.env.docname)
        path = Path(path)
        self.env.note_dependency(rel)
        try:
            data = load_questions(path)
        except QuestionFileError as exc:
            raise self.error(str(exc)) from None
        block = selfcheck_set(title=data["title"])
        for n, q in enumerate(data["questions"], 1):
            question = selfcheck_question(multi=q["multi"], number=n)
            prompt = nodes.container(classes=["selfcheck-prompt"])
            kind = "多选，可选多个" if q["multi"] else "单选"
            self._parse(f"**第 {n} 题**（{kind}）{q['question']}", prompt, path)
            question += prompt
            for letter, opt in zip(LETTERS, q["options"], strict=False):
                option = selfcheck_option(correct=opt["correct"], letter=letter)
                self._parse(opt["text"], option, path)
                why = selfcheck_why(correct=opt["correct"])
                self._parse(opt["why"], why, path)
                question += option
                question += why
            block += question
        return [block]

    def _parse(self, text: str, into: nodes.Element, path: Path) -> None:
        self.state.nested_parse(StringList(text.strip().splitlines(), source=str(path)), 0, into)


# --------------------------------------------------------------------------- HTML writers

def _visit_set(self, node):
    self.body.append('<section class="selfcheck" aria-label="自测">')
    self.body.append(f'<p class="selfcheck-title">{self.encode(node["title"])}</p>')
    self.body.append('<p class="selfcheck-help">点击选项即可看到反馈与解析（不计分；多选题选好后点“检查答案”）。</p>')


def _depart_set(self, node):
    self.body.append("</section>")


def _visit_question(self, node):
    multi = "true" if node["multi"] else "false"
    self.body.append(f'<div class="selfcheck-question" data-multi="{multi}" data-number="{node["number"]}">')


def _depart_question(self, node):
    self.body.append('<p class="selfcheck-feedback" aria-live="polite"></p></div>')


def _visit_option(self, node):
    correct = "true" if node["correct"] else "false"
    self.body.append(f'<div class="selfcheck-option" role="button" tabindex="0" aria-pressed="false" '
                     f'data-correct="{correct}"><span class="selfcheck-letter">{node["letter"]}</span>'
                     '<div class="selfcheck-text">')


def _depart_option(self, node):
    self.body.append("</div></div>")


def _visit_why(self, node):
    verdict = "正确选项" if node["correct"] else "错误选项"
    self.body.append(f'<div class="selfcheck-why" hidden><span class="selfcheck-verdict">{verdict}：</span>')


def _depart_why(self, node):
    self.body.append("</div>")


def _skip(self, node):
    raise nodes.SkipNode



def setup(app: Sphinx) -> dict:
    html = {"html": None}
    others = {fmt: (_skip, None) for fmt in ("latex", "text", "man", "texinfo")}
    app.add_node(selfcheck_set, html=(_visit_set, _depart_set), **others)
    for node, visit, depart in ((selfcheck_question, _visit_question, _depart_question),
                                (selfcheck_option, _visit_option, _depart_option),
                                (selfcheck_why, _visit_why, _depart_why)):
        html["html"] = (visit, depart)
        app.add_node(node, **html, **others)
    app.add_directive("selfcheck", SelfCheckDirective)
    static_assets.ship(app, STATIC, "selfcheck.css", "selfcheck.js")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
