"""The student's Assignment List without a class exchange: say so in Chinese, and say how work is handed in.

On a student's own machine (``make lab``) there is no nbgrader exchange: the
course config names ``$NBGRADER_EXCHANGE`` or ``/srv/nbgrader/exchange``, which
exists only on a class's JupyterHub.  nbgrader's Assignment List then shows,
three times, an English paragraph about setting up the exchange, meant for the
instructor.  :func:`install`, called by the student's server configuration
``grading/student_lab/jupyter_server_config.py`` when ``make lab`` starts,
replaces that paragraph with :data:`NO_EXCHANGE`.  Where the exchange exists
(a class), nothing changes.
"""

from __future__ import annotations

import functools
import sys

HANDLERS = "nbgrader.server_extensions.assignment_list.handlers"
#: The start of nbgrader's own message when the exchange directory is missing.
NBGRADER_MESSAGE = "The exchange directory does not exist"
NO_EXCHANGE = (
    "这台电脑上没有课程的作业交换目录（nbgrader exchange）：你是在自己的电脑上用 make lab 学习，"
    "不在课程的 JupyterHub 上，所以这里不能领取或提交作业。"
    "作答就在 student-work/ 里的笔记本中进行；自查用笔记本工具栏上的 Validate 按钮；"
    "提交时按老师的要求交上笔记本文件（见学生指南“提交”一节）。"
)
_LISTS = ("list_released_assignments", "list_submitted_assignments")


def explain_missing_exchange(result: dict) -> dict:
    """``result`` of an assignment listing, with nbgrader's missing-exchange paragraph replaced by Chinese."""
    if not result.get("success") and NBGRADER_MESSAGE in str(result.get("value", "")):
        return {"success": False, "value": NO_EXCHANGE}
    return result


def _explained(method):
    @functools.wraps(method)
    def listing(self, *args, **kwargs):
        return explain_missing_exchange(method(self, *args, **kwargs))

    listing.explains_missing_exchange = True
    return listing


def install() -> None:
    """Wrap the Assignment List's listings in the running server (once; a no-op where it is not loaded)."""
    module = sys.modules.get(HANDLERS)
    if module is None:
        return
    for name in _LISTS:
        method = getattr(module.AssignmentList, name)
        if not getattr(method, "explains_missing_exchange", False):
            setattr(module.AssignmentList, name, _explained(method))
