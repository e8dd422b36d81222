"""Hooks that make nbgrader's feedback safe to hand out and readable offline.

``nbgrader_config.py`` wires them in:

* :class:`HideTestTracebacks` runs after nbgrader's ``ClearHiddenTests`` in
  ``GenerateFeedback.preprocessors``: a traceback printed by a test cell quotes
  the cell's source lines (hidden ones too), and any traceback is English, so
  every error keeps only ``ErrorName: message``.
* :class:`HiddenCheckDetails` runs before ``ClearHiddenTests``: the output of a
  test cell that holds hidden tests keeps, for each hidden check, its Chinese
  description, ✓/✗ and the hint, but not the values it was run on (the
  ``期望：``/``实际：`` lines, the arguments of a failed call), so released
  feedback does not hand next term's class the hidden inputs and expected
  results.  ``--HiddenCheckDetails.shown=True`` keeps everything (for the
  instructor's own copy).
* :class:`GetGradesAndPending` replaces nbgrader's ``GetGrades`` there: it also
  marks the cells still waiting for a human grader, so the page says 待人工批改
  instead of showing their provisional 0 as a score, and gives nbgrader's
  automatic comment ("No response.") in Chinese.
* :class:`LabelAndTidy` (after them) gives each graded cell the label the student
  sees in the notebook (练习 1, 第 3 题; :func:`grading.nbgrader_validate.cell_labels`)
  and drops a test cell's empty result: nbgrader reads a test cell's partial credit
  from its ``execute_result``, whose HTML form is empty, so the page would show an
  empty ``Out[n]:`` after every test cell.
* :func:`offline_math` is a Jinja filter used by
  ``grading/templates/feedback_offline/index.html.j2``: it typesets the page's math
  when the page is generated (MathJax 3 from the ``sphinx-mathjax-offline`` package,
  run by Node.js, written as inline SVG), so the page is light and loads no script.
  Without Node.js it inlines MathJax's whole ``tex-svg.js`` bundle instead
  (:func:`offline_mathjax`, about 2 MB), which typesets in the browser.
* :func:`quiet_rewrites` keeps ``generate_feedback`` from warning, in English, that it is
  "Removing existing assignment" each time: the course's configuration rewrites every page
  on purpose (``GenerateFeedback.force``), so the warning would only look like trouble.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import pathlib
import re
import shutil
import subprocess

from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, NbGraderPreprocessor
from traitlets import Bool, List, Unicode, default

from grading.nbgrader_autograde import released_source
from grading.nbgrader_validate import cell_labels

TEMPLATES = pathlib.Path(__file__).parent / "templates"
TEMPLATE_NAME = "feedback_offline"
#: The Node.js script that typesets a fragment's math (run by :func:`prerender_math`).
PRERENDER = TEMPLATES / TEMPLATE_NAME / "prerender_math.js"
#: MathJax's options in the browser, for the fallback bundle (the same as PRERENDER's).
BROWSER_CONFIG = """<script>
window.MathJax = {
  tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
        processEscapes: true},
  options: {ignoreHtmlClass: "tex2jax_ignore", processHtmlClass: "tex2jax_process", enableMenu: false}
};
</script>"""


def is_test_cell(cell) -> bool:
    """An nbgrader autograder test cell: graded, not a solution, code."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


#: Errors whose message is empty or English, as the student reads them.
ERROR_TEXT = {"KeyboardInterrupt": "运行超过时间限制，被中断"}


class HideTestTracebacks(Preprocessor):
    """Shorten every error output to ``ErrorName: message`` (a Chinese message where Python's is empty).

    A test cell's traceback quotes its source lines, hidden ones too; any traceback is English frames
    (``Traceback (most recent call last)``) around the one line the student needs.
    """

    @default("enabled")
    def _enabled_default(self):  # nbconvert preprocessors are off unless enabled
        return True

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                name = output.get("ename", "Error")
                output["traceback"] = [f"{name}: {output.get('evalue') or ERROR_TEXT.get(name, '')}".rstrip(": ")]
        return cell, resources


#: The lines of a check's message that show values: the expected and the actual result.
VALUE_LINE = re.compile(r"^ {4}(期望|实际)：")
#: A failed call's note, ``✗ name(arguments)：why``: the arguments are the hidden inputs.
CALL_NOTE = re.compile(r"^(✗ [\w.]+)\(.*\)：(?=函数还没有实现|函数调用了|调用时抛出了异常)")
#: What an expected-exception check says the function returned instead.
RETURNED = re.compile(r"(没有抛出异常，)返回了 .*$")
WITHHELD = "（隐藏检查不显示输入和期望值）"


#: The first line of a check's message: ✓ or ✗, the essential mark, what it checks.
CHECK_LINE = re.compile(r"^[✓✗] (?:【要点】)?(?P<what>.*?)(?:：未通过)?$")


def withhold_values(text: str, visible: str = "") -> str:
    """A test cell's printed checks without the values the hidden ones were run on.

    ``visible``: the cell's source as released (hidden tests removed).  A check whose description is written
    in it is a visible one (the student has its inputs already) and keeps its ``期望：``/``实际：`` lines; every
    other check loses them.  A failed call's arguments and an unexpected return value are always left out.
    """
    kept, hidden = [], True
    for line in text.split("\n"):
        check = CHECK_LINE.match(line)
        if check and not CALL_NOTE.match(line):
            hidden = not (check["what"] and check["what"] in visible)
        if hidden and VALUE_LINE.match(line):
            continue
        line = CALL_NOTE.sub(r"\1(…)：", line)
        kept.append(RETURNED.sub(r"\1返回了一个结果", line))
    return "\n".join(kept)


class HiddenCheckDetails(Preprocessor):
    """In test cells with hidden tests, keep each check's description, result and hint, not its values.

    ``shown = True`` (``--HiddenCheckDetails.shown=True``) leaves the outputs as they are.
    """

    shown = Bool(False, help="Show the inputs and expected values of hidden checks in the feedback.").tag(
        config=True)
    delimiter = Unicode("BEGIN HIDDEN TESTS", help="The marker that opens hidden tests (as ClearHiddenTests).")

    @default("enabled")
    def _enabled_default(self):
        return True

    def preprocess_cell(self, cell, resources, index):
        if self.shown or not is_test_cell(cell) or self.delimiter not in cell.source:
            return cell, resources
        visible = released_source(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = withhold_values(output.get("text", ""), visible)
            elif output.get("output_type") == "error":
                output["evalue"] = withhold_values(output.get("evalue", ""), visible)
        if cell.get("outputs"):
            cell["outputs"].append({"output_type": "stream", "name": "stdout", "text": WITHHELD + "\n"})
        return cell, resources


class QuietClearHiddenTests(ClearHiddenTests):
    """nbgrader's ``ClearHiddenTests`` without "Config option `display_data_priority` not recognized".

    nbconvert configures ``display_data_priority`` for every preprocessor; nbgrader's base class redeclares
    the trait without ``config=True``, so traitlets warns at each ``generate_feedback``.  Declaring it
    configurable again accepts the setting (``ClearHiddenTests`` never reads it).
    """

    display_data_priority = List(NbGraderPreprocessor.class_traits()["display_data_priority"].default()).tag(
        config=True)


def is_empty_result(output) -> bool:
    """An ``execute_result`` that renders as nothing: its HTML form is blank (a test cell's score object)."""
    data = output.get("data", {})
    return output.get("output_type") == "execute_result" and "text/html" in data and not data["text/html"].strip()


class LabelAndTidy(Preprocessor):
    """Label graded cells as the notebook does (``metadata.nbgrader.label``); drop test cells' empty results."""

    @default("enabled")
    def _enabled_default(self):
        return True

    def preprocess(self, nb, resources):
        labels = cell_labels(nb)
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader")
            if meta and meta.get("grade_id"):
                meta["label"] = labels.get(meta["grade_id"], meta["grade_id"])
            if is_test_cell(cell):
                cell["outputs"] = [o for o in cell.get("outputs", []) if not is_empty_result(o)]
        return nb, resources


# nbgrader's automatic comments (saveautogrades.py), as the student reads them.
AUTO_COMMENTS = {"No response.": "未作答：这个答案单元和发下来的版本一模一样。"}


class GetGradesAndPending(GetGrades):
    """nbgrader's ``GetGrades``, plus ``metadata.nbgrader.pending`` on each graded cell.

    nbgrader's own automatic comments are replaced by their Chinese text;
    comments a grader typed are kept as they are.
    """

    def _get_comment(self, cell, resources) -> None:
        super()._get_comment(cell, resources)
        comment = cell.metadata.nbgrader.get("comment")
        cell.metadata.nbgrader["comment"] = AUTO_COMMENTS.get(comment, comment)

    def _get_score(self, cell, resources) -> None:
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(
            cell.metadata["nbgrader"]["grade_id"], self.notebook_id, self.assignment_id, self.student_id)
        cell.metadata.nbgrader["pending"] = bool(grade.needs_manual_grade)


def mathjax_bundle(name: str = "tex-svg.js") -> pathlib.Path | None:
    """Path of a MathJax 3 bundle shipped by ``sphinx-mathjax-offline``, or None."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        path = pathlib.Path(root) / "static" / "mathjax" / name
        if path.is_file():
            return path
    return None


def offline_mathjax(name: str) -> str:
    """A ``<script>`` element holding the MathJax bundle ``name`` inline (empty if not installed)."""
    path = mathjax_bundle(name)
    if path is None:
        return "<!-- MathJax not installed: math stays as TeX source -->"
    source = path.read_text(encoding="utf-8").replace("</script", "<\\/script")
    return f"<script>\n{source}\n</script>"


def prerender_math(html: str) -> str | None:
    """``html`` with its math typeset as inline SVG plus the stylesheet it needs, or None.

    None when Node.js or MathJax is missing or MathJax fails; ``html`` itself when it holds no math.
    """
    node = shutil.which("node") or shutil.which("nodejs")
    core = mathjax_bundle("node-main.js")
    if node is None or core is None:
        return None
    try:
        run = subprocess.run([node, str(PRERENDER), str(core.parent)], input=json.dumps(html), capture_output=True,
                             text=True, encoding="utf-8", timeout=120, check=False)
        result = json.loads(run.stdout) if run.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not result:
        return None
    if not result["count"]:
        return html
    return f'<style type="text/css">{result["css"]}</style>\n{result["body"]}'


def offline_math(html: str) -> str:
    """The notebook's HTML with its math typeset offline: pre-rendered, or else with MathJax inlined."""
    rendered = prerender_math(html)
    if rendered is not None:
        return rendered
    return f"{html}\n{BROWSER_CONFIG}\n{offline_mathjax('tex-svg.js')}"


#: nbgrader's messages when ``force`` rewrites feedback that exists (``converters/base.py``).
REWRITE_MESSAGES = ("Removing existing assignment: ", "Removing existing notebook: ")


class _DropRewriteWarnings(logging.Filter):
    """Drops nbgrader's warning that forced feedback replaces the pages it wrote before."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.WARNING and record.getMessage().startswith(REWRITE_MESSAGES))


def quiet_rewrites(logger_name: str = "GenerateFeedbackApp") -> None:
    """Install :class:`_DropRewriteWarnings` on the logger of ``nbgrader generate_feedback`` (once).

    traitlets names an application's logger after its class; the converter logs through its parent app.
    """
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _DropRewriteWarnings) for f in logger.filters):
        logger.addFilter(_DropRewriteWarnings())
