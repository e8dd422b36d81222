"""nbgrader 0.9 configuration of the course (run ``nbgrader`` from the repository root).

Instructor sources live in ``solutions/<assignment>/``, generated student
versions in ``notebooks/<assignment>/`` (``make release``).  Everything nbgrader
writes per class -- ``submitted/``, ``autograded/``, ``feedback/``,
``gradebook.db``, ``.nbgrader.log`` -- lands in nbgrader's default places under
the root, which git ignores; ``make grade`` and the tests use a temporary
course directory instead.  The exchange is ``$NBGRADER_EXCHANGE`` or
nbgrader's default ``/srv/nbgrader/exchange``.
"""

import os
import sys

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import GenerateAssignment

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from grading.kernel_limits import DEFAULT_MEMORY_GB, LimitedExecute  # noqa: E402
from grading.nbgrader_autograde import autograde_steps, sanitize_steps  # noqa: E402
from grading.nbgrader_export import CourseCsvExport  # noqa: E402
from grading.nbgrader_feedback import (  # noqa: E402
    TEMPLATE_NAME,
    TEMPLATES,
    GetGradesAndPending,
    HiddenCheckDetails,
    HideTestTracebacks,
    LabelAndTidy,
    QuietClearHiddenTests,
    offline_math,
    offline_mathjax,
    quiet_rewrites,
)
from grading.nbgrader_formgrader import install as install_formgrader_feedback  # noqa: E402
from grading.nbgrader_release import release_preprocessors  # noqa: E402
from grading.nbgrader_validate import configure as configure_validate  # noqa: E402
from grading.nbgrader_validate import install as install_validate  # noqa: E402
from grading.term import CourseLatePenalty  # noqa: E402

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

# --- the course and its directories
c.CourseDirectory.course_id = "attention-zh"
c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")

# --- student versions: Chinese stub for written answers; code stubs keep nbgrader's "# YOUR CODE HERE",
# except quiz answer cells (solution `answer = "B"`), whose stub is `answer = ""`
# a written answer's stub says what to do: it is bold, and tells the student to double-click
c.ClearSolutions.text_stub = "**（待作答）双击这个单元进入编辑，把这一行换成你的回答，写完按 Ctrl+Enter 显示出来。**"
c.GenerateAssignment.preprocessors = release_preprocessors(
    GenerateAssignment.class_traits()["preprocessors"].default())

# --- autograding: every cell gets at most 20 s; a cell that runs longer is interrupted,
# scores 0, and the rest of the notebook is still executed and graded.
c.Execute.timeout = 20
c.Execute.interrupt_on_timeout = True
c.Execute.error_on_timeout = {
    "ename": "CellTimeoutError",
    "evalue": "该单元运行超过时间限制，已被中断（死循环？），本单元得 0 分。",
    "traceback": ["CellTimeoutError: 该单元运行超过时间限制，已被中断（死循环？），本单元得 0 分。"],
}
# a cell that kills its kernel (os._exit, a signal) or cannot be interrupted costs that cell only, as in
# make grade-class: the kernel is restarted, the earlier cells replayed, and grading goes on (grading/kernel_limits.py);
# every kernel gets the same memory cap as there (a cell asking for far more gets a MemoryError).
# A re-grade keeps the manual marks and comments of every answer that did not change, and re-opens (with the
# previous mark named in the comment) those that did (grading/manual_marks.py)
# Each submission is graded against its own student's quiz variant: the submitter is pinned in every hidden test
# and the kernel starts as them (ATTNLIB_STUDENT); a notebook that showed another variant is named (grading/variants.py)
c.Autograde.autograde_preprocessors = autograde_steps(LimitedExecute)
# quiet about a test cell the student left as released (grading/nbgrader_autograde.py)
c.Autograde.sanitize_preprocessors = sanitize_steps()
c.LimitedKernelManager.memory_limit = int(DEFAULT_MEMORY_GB * 2**30)

# --- late submissions: a class sets its due date with `nbgrader db assignment add A --duedate=...` and its
# penalty with `c.CourseLatePenalty.percent_per_day = 10` in the class folder's nbgrader_config.py (grading/term.py)
c.AssignLatePenalties.plugin_class = CourseLatePenalty

# --- nbgrader export: grades.csv with a status column; nothing that was not graded becomes a number
c.ExportApp.plugin_class = CourseCsvExport

# --- Validate (command line and JupyterLab's button): Chinese, with the test cells' own explanations
configure_validate(c)
install_validate()

# --- feedback: in Chinese, items named as in the notebook (练习 1, 第 3 题), no hidden test source, no traceback
# quoting it, no empty Out[n]: after test cells, no remote scripts; math typeset when the page is generated
# and, in test cells with hidden tests, no input or expected value of a check (--HiddenCheckDetails.shown=True
# shows them). Every run rewrites the pages: after manual grading the feedback must say what changed
c.GenerateFeedback.preprocessors = [
    GetGradesAndPending, HiddenCheckDetails, QuietClearHiddenTests, HideTestTracebacks, LabelAndTidy,
    CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.force = True
quiet_rewrites()  # ... without nbgrader's English warning that it replaces the old pages
c.HTMLExporter.template_name = TEMPLATE_NAME
c.HTMLExporter.extra_template_basedirs = [
    str(TEMPLATES),
    os.path.join(os.path.dirname(sys.modules["nbgrader"].__file__), "server_extensions", "formgrader", "templates"),
]
c.HTMLExporter.filters = {"offline_math": offline_math, "offline_mathjax": offline_mathjax}
install_formgrader_feedback()  # the formgrader's "Generate Feedback" keeps this template too
