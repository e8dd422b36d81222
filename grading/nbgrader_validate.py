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

import sys
import unicodedata

from nbconvert.filters import strip_ansi
from nbformat import NotebookNode
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
NONE_PASSED = "没有任何测试单元通过。"  # validate --invert, the instructor's check of a release
TYPE_CHANGED_WARNING = ("有 {num_changed} 个单元的类型被改动过（代码单元改成了 Markdown 单元，或者反过来）！"
                        "请把它改回原来的类型。\n")


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
    """nbgrader's validator with Chinese messages that carry the test cells' own explanations."""

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
        self._rule(f"下面这个单元原来是 {old_type} 单元，被改成了 {new_type} 单元：")
        self.stream.write(self._indent(source) + "\n\n")

    def _print_changed(self, source: str) -> None:
        self._rule("下面这个测试单元被改动过：")
        self.stream.write(self._indent(source) + "\n\n")

    def _print_error(self, source: str, error: str) -> None:
        self._rule("下面这个单元没有拿到满分：")
        self.stream.write(self._indent(source) + "\n\n原因：\n\n" + self._indent(error) + "\n\n")

    def _print_pass(self, source: str) -> None:
        self._rule("下面这个单元通过了：")
        self.stream.write(self._indent(source) + "\n\n")

    def _print_num_failed(self, num_failed: int) -> None:
        if num_failed == 0:
            self._say(ALL_PASSED)
        else:
            self._say(self.failed_warning.format(num_failed=num_failed))

    def _print_num_changed(self, num_changed: int) -> None:
        self._say(self.changed_warning.format(num_changed=num_changed))

    def _print_num_type_changed(self, num_changed: int) -> None:
        self._say(self.type_changed_warning.format(num_changed=num_changed))

    def _print_num_passed(self, num_passed: int) -> None:
        self._say(f"有 {num_passed} 个测试单元通过了。" if num_passed else NONE_PASSED)


def configure(c) -> None:
    """Set the validator's configurable messages in Chinese on the config object ``c`` of nbgrader_config.py."""
    c.Validator.failed_warning = FAILED_WARNING
    c.Validator.changed_warning = CHANGED_WARNING
    c.Validator.type_changed_warning = TYPE_CHANGED_WARNING


def install() -> None:
    """Make the loaded nbgrader modules that build a ``Validator`` build a :class:`ChineseValidator`."""
    for name in USERS:
        module = sys.modules.get(name)
        if module is not None:
            module.Validator = ChineseValidator
