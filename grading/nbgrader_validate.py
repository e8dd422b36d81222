"""nbgrader's Validate, in Chinese, with the test cells' own explanations.

nbgrader 0.9 answers every graded cell that did not earn full marks with the
English "Partial credit; passed some but not all of the tests", even for 0 of
3 or an answer it could not read, and the command line cuts every line at 87
characters with "...".  The course's test cells already print, in Chinese,
which checks failed and what to look at; this module hands that output
through:

* :class:`ChineseValidator` explains a failed cell with the cell's printed
  output (the lines of passed checks dropped, the failed ones and the score
  line kept), an error with its Chinese reading, and writes every heading and
  summary in Chinese; long lines are wrapped, never cut.
* :func:`install` makes nbgrader use it, both for ``nbgrader validate`` and
  for the Validate button of JupyterLab (the server extension builds its
  validator from the class its module names, each time after it has loaded
  ``nbgrader_config.py``, which calls :func:`install`).
"""

from __future__ import annotations

import re
import sys
import unicodedata

from nbconvert.filters import strip_ansi
from nbformat import NotebookNode, read
from nbgrader import utils
from nbgrader.validator import Validator

#: The modules that build a ``Validator`` by the name they imported: the CLI and the lab's server extension.
USERS = ("nbgrader.apps.validateapp", "nbgrader.server_extensions.validate_assignment.handlers")
#: At most this many characters of a cell's output are shown (a runaway print must not flood the dialog).
MAX_OUTPUT = 4000

FAILED_WARNING = ("有 {num_failed} 个计分的单元还没有拿到满分（没作答的书面回答也算在内）。"
                  "现在提交，这些单元不会得到全部分数；下面逐个列出原因。\n")
CHANGED_WARNING = ("有 {num_changed} 个测试单元的内容被改动过！评分时用的是原来的测试，"
                   "现在能通过不代表评分时能通过。\n")
ALL_PASSED = "全部通过！每个测试单元都拿到了满分。提交前记得保存笔记本。"
#: A quiz's test cells check only that each answer can be read: passing them says nothing about being right.
QUIZ_READABLE = ("每道题的答案格式都能读懂（只检查了格式，没有检查对错）。"
                 "答对了没有、每个选项的解析，要等老师评分后在反馈里看到。提交前记得保存笔记本。")
NONE_PASSED = "没有任何测试单元通过。"  # validate --invert, the instructor's check of a release
TYPE_CHANGED_WARNING = ("有 {num_changed} 个单元的类型被改动过（代码单元改成了 Markdown 单元，或者反过来）！"
                        "请把它改回原来的类型。\n")


#: A section heading of an assignment: "## 练习 2：温度（2 分）" or "## 第 3 题（单选，1 分）".
HEADING = re.compile(r"^#{2,3}\s*((?:练习|第)\s*\d+\s*题?)")


def cell_labels(nb: NotebookNode) -> dict[str, str]:
    """``{grade_id: "练习 2" or "第 3 题"}`` for each nbgrader cell: the heading of the section it stands in."""
    labels, current = {}, None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = HEADING.match(cell.source.lstrip())
            if found:
                current = re.sub(r"\s+", " ", found.group(1).replace("第", "第 ").replace("题", " 题")).strip()
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id:
            labels[grade_id] = current or grade_id
    return labels


def is_quiz(nb: NotebookNode) -> bool:
    """Whether ``nb`` is a quiz: its graded cells are the answer checks ``q01_test`` …"""
    graded = [c.metadata.nbgrader.get("grade_id", "") for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    return bool(graded) and all(re.fullmatch(r"q\d+_test", g) for g in graded)


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: Chinese characters and full-width forms take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def wrap(line: str, width: int, indent: str = "") -> list[str]:
    """``line`` broken into pieces of at most ``width`` columns, continuation lines indented by ``indent``."""
    pieces, current = [], ""
    for ch in line:
        if current.strip() and display_width(current + ch) > width:
            pieces.append(current)
            current = indent
        current += ch
    return [*pieces, current]


def printed_output(cell: NotebookNode) -> str:
    """What a code cell printed to stdout, without the lines of passed checks (``✓ …``)."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.output_type == "stream" and o.name == "stdout")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("✓")]
    shown = "\n".join(lines).strip()
    if len(shown) > MAX_OUTPUT:
        shown = shown[:MAX_OUTPUT] + f"\n……（输出太长，只显示前 {MAX_OUTPUT} 个字符）"
    return shown


def explain(cell: NotebookNode) -> str:
    """Why ``cell`` did not pass, in Chinese, for a student who has to fix it."""
    if cell.cell_type != "code":
        return "这里还没有你的回答：双击这个单元，把“（待作答）……”那一行换成你自己的话。"
    errors = [o for o in cell.outputs if o.output_type == "error"]
    if errors:
        error = errors[0]
        hint = ("上面定义的名字在这里找不到：先从头依次运行笔记本里的每个单元（菜单“运行 → 运行全部单元”）。"
                if error.ename == "NameError" else "这个测试单元本身运行出错了，下面是错误信息。")
        return f"{hint}\n{error.ename}: {error.evalue}"
    stderr = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")
    if stderr:
        return f"这个单元向标准错误（stderr）输出了内容，自动评分会把它记为 0 分：\n{stderr.strip()}"
    if not utils.is_grade(cell):
        return "这里还没有你的回答。"
    score, max_score = utils.determine_grade(cell)
    shown = printed_output(cell) or "（这个单元没有输出任何说明。）"
    return f"得分 {score:g} / {max_score:g}。没有通过的检查：\n{shown}"


class ChineseValidator(Validator):
    """nbgrader's validator with Chinese messages that carry the test cells' own explanations.

    Each reported cell is named by its section (练习 2, 第 3 题) instead of quoting its source: the student
    reads the Chinese explanation, not the test code.  A clean result carries ``message``, the sentence to
    show (JupyterLab's dialog shows it, see ``grading/nbgrader_lab.py``): on a quiz it says that only the
    answers' format was checked.
    """

    def validate(self, filename: str) -> dict:
        results = super().validate(filename)
        nb = read(filename, as_version=4)
        by_source = {}
        labels = cell_labels(nb)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id:
                by_source.setdefault(cell.source.strip(), _named(cell, labels[grade_id]))
        for kind in ("type_changed", "changed", "passed", "failed"):
            for entry in results.get(kind, []):
                entry["source"] = by_source.get(entry["source"], "（一个单元）")
        if not results and not self.invert:
            results["message"] = QUIZ_READABLE if is_quiz(nb) else ALL_PASSED
        return results

    def validate_and_print(self, filename: str) -> None:
        self._filename = filename
        super().validate_and_print(filename)

    def _extract_error(self, cell: NotebookNode) -> str:
        return explain(cell)

    def _indent(self, val: str) -> str:
        lines = []
        for line in val.split("\n"):
            lines += wrap(self.indent + strip_ansi(line), self.width, self.indent + "  ")
        return "\n".join(lines)

    def _say(self, text: str) -> None:
        self.stream.write("\n".join(wrap(text.rstrip("\n"), self.width)) + "\n")

    def _rule(self, heading: str) -> None:
        self.stream.write("\n" + "=" * self.width + "\n" + heading + "\n\n")

    def _print_type_changed(self, old_type: str, new_type: str, source: str) -> None:
        self._rule(f"{source}原来是 {old_type} 单元，被改成了 {new_type} 单元，请改回原来的类型。")

    def _print_changed(self, source: str) -> None:
        self._rule(f"{source}被改动过。")

    def _print_error(self, source: str, error: str) -> None:
        self._rule(f"{source}没有拿到满分：")
        self.stream.write(self._indent(error) + "\n\n")

    def _print_pass(self, source: str) -> None:
        self._rule(f"{source}通过了。")

    def _print_num_failed(self, num_failed: int) -> None:
        if num_failed == 0:
            quiz = is_quiz(read(self._filename, as_version=4)) if getattr(self, "_filename", None) else False
            self._say(QUIZ_READABLE if quiz else ALL_PASSED)
        else:
            self._say(self.failed_warning.format(num_failed=num_failed))

    def _print_num_changed(self, num_changed: int) -> None:
        self._say(self.changed_warning.format(num_changed=num_changed))

    def _print_num_type_changed(self, num_changed: int) -> None:
        self._say(self.type_changed_warning.format(num_changed=num_changed))

    def _print_num_passed(self, num_passed: int) -> None:
        self._say(f"有 {num_passed} 个测试单元通过了。" if num_passed else NONE_PASSED)


def _named(cell: NotebookNode, label: str) -> str:
    """How the student finds ``cell``: "练习 2 的测试单元", "第 3 题的检查单元", "练习 4 的书面回答"."""
    sep = "" if label.endswith("题") else " "  # 第 3 题的…, 练习 2 的…
    if cell.cell_type == "markdown":
        return f"{label}{sep}的书面回答"
    if cell.metadata.nbgrader.get("grade"):
        return f"{label}{sep}的{'检查' if label.endswith('题') else '测试'}单元"
    return f"{label}{sep}的作答单元"


def configure(c) -> None:
    """Set the validator's configurable messages in Chinese on the config object ``c`` of nbgrader_config.py."""
    c.Validator.failed_warning = FAILED_WARNING
    c.Validator.changed_warning = CHANGED_WARNING
    c.Validator.type_changed_warning = TYPE_CHANGED_WARNING
    # the command line says nothing in English around the Chinese report: no "Validating '…'" line, and the
    # kernel it starts keeps its start-up warning (unencrypted local TCP) to itself
    c.ValidateApp.log_level = "WARN"
    c.Validator.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]


def install() -> None:
    """Make the loaded nbgrader modules that build a ``Validator`` build a :class:`ChineseValidator`."""
    for name in USERS:
        module = sys.modules.get(name)
        if module is not None:
            module.Validator = ChineseValidator
