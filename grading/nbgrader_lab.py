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
import hashlib
import json
import logging
import os
import pathlib
import shutil
import sys

from jupyter_core.paths import jupyter_path
from traitlets.log import get_logger

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


_told: list = []  # whether the server's log already said once that there is no exchange


class _Held(logging.Filter):
    """Holds back every record logged while it is installed (to be dropped or let through afterwards)."""

    def __init__(self):
        super().__init__()
        self.records = []

    def filter(self, record):
        self.records.append(record)
        return False


def _explained(method):
    @functools.wraps(method)
    def listing(self, *args, **kwargs):
        # nbgrader logs the missing exchange as a critical line and a traceback in the student's terminal, each
        # time the list is refreshed; that is no error on a student's own machine: one calm line says it, once
        loggers = list({id(x): x for x in (self.log, get_logger()) if isinstance(x, logging.Logger)}.values())
        held = _Held()
        for logger in loggers:
            logger.addFilter(held)
        try:
            result = method(self, *args, **kwargs)
        finally:
            for logger in loggers:
                logger.removeFilter(held)
        explained = explain_missing_exchange(result)
        if explained is result:
            for record in held.records:
                logging.getLogger(record.name).handle(record)
        elif not _told:
            _told.append(True)
            self.log.info("这台电脑上没有 nbgrader 的作业交换目录：作业列表（Assignments）里已用中文向学生说明。")
        return explained

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


# --- the nbgrader plugin's own words in the student's browser ----------------------------------------------
#
# nbgrader's JupyterLab plugin writes its dialogs and panels with English literals (it has no translations, and
# JupyterLab's Chinese language pack does not cover it).  ``make lab`` and a class's JupyterHub (the students'
# servers) serve a copy of the plugin in which those literals are Chinese (:func:`with_chinese_nbgrader`): the
# copy goes first on ``JUPYTER_PATH``, where JupyterLab takes the first plugin of a name it finds.  Two
# behaviours change with the words: the Validate dialog shows the sentence the server's validator chose when
# everything passed (``message``: on a quiz, that only the format was checked), and an Assignment List error is
# shown once, not in each of its three lists.
# Every text replaced must be found in the pinned nbgrader's files (a new nbgrader fails the tests).

LABEXTENSION = ("@jupyter", "nbgrader")
#: ``(old, new)`` pairs replaced in the plugin's scripts.
CHINESE_PLUGIN = (
    ('title:"Validation Results"', 'title:"自查结果（Validate）"'),
    ('i.innerText="Success! Your notebook passes all the tests."',
     'i.innerText=e.message||"全部通过！每个测试单元都拿到了满分。"'),
    ('"The following cell failed:"', '"没有拿到满分的单元："'),
    ('"The following cell passed:"', '"通过了的单元："'),
    ('"The source of the following cell has changed, but it should not have!"',
     '"这个单元被改动过（评分时用的是原来的测试）："'),
    ("`The following ${e.type_changed[s].old_type} cell has changed to a ${e.type_changed[s].new_type} cell, "
     "but it should not have!`",
     "`这个单元原来是 ${e.type_changed[s].old_type} 单元，被改成了 ${e.type_changed[s].new_type} 单元，请改回去：`"),
    ('"There was an error running the validate command:"', '"自查没能运行，出错信息如下："'),
    ('"Validating..."', '"自查中……"'),
    ('"Validation failed"', '"自查失败"'),
    ('"Error validating assignment."', '"自查时出错。"'),
    # the Assignment List
    ('this.default_course_element.innerText="Error fetching courses!"',
     'this.default_course_element.innerText="（没有课程）"'),
    ('"No courses found."', '"（没有课程）"'),
    ("s[t].children.namedItem(this.list_error_ids[t]).hidden=!1,"
     "s[t].children.namedItem(this.list_error_ids[t]).innerText=e",
     "s[t].children.namedItem(this.list_error_ids[t]).hidden=t>0,"
     "s[t].children.namedItem(this.list_error_ids[t]).innerText=t>0?\"\":e"),
    ("Released, downloaded, and submitted assignments for course:", "课程的作业："),
    ("Loading, please wait...", "正在加载……"),
    (r"\n        Released assignments\n", r"\n        已发布的作业（可以领取）\n"),
    (r"\n        Downloaded assignments\n", r"\n        已领取的作业\n"),
    (r"\n        Submitted assignments\n", r"\n        已提交的作业\n"),
    ("<div> There are no assignments to fetch. </div>", "<div> 没有可以领取的作业。 </div>"),
    ("<div> There are no downloaded assignments. </div>", "<div> 没有已领取的作业。 </div>"),
    ("<div> There are no submitted assignments. </div>", "<div> 没有已提交的作业。 </div>"),
    ('title="Refresh assignments list"', 'title="刷新作业列表"'),
)


#: The end of the plugin's last stylesheet (the Validate dialog's), loaded with the plugin when JupyterLab starts.
_STYLE_END = ("#validation-message pre {\n    border: solid var(--jp-border-color2) 1px;\n    padding: 5px;\n"
              "    margin: 1em;\n}`")
#: One rule added to that stylesheet, for the student's notebooks: an output whose rendered form is empty takes no
#: room and shows no ``[n]:`` prompt.  A test cell ends with its score (``attnlib.grading.Score``): nbgrader reads
#: the partial credit from that execute_result, whose HTML form is empty -- without the rule JupyterLab shows a
#: lone ``[7]:`` under the cell's Chinese summary line.  Every other output (text, figures, errors) keeps its prompt.
EMPTY_OUTPUT_RULE = ("\n\n/* attention-zh: no prompt for an output that shows nothing (a test cell's score) */\n"
                     ".jp-OutputArea-child:has(> .jp-OutputArea-output:empty) {\n    display: none;\n}\n")
EMPTY_OUTPUT_STYLE = (_STYLE_END, _STYLE_END[:-1] + EMPTY_OUTPUT_RULE + "`")
#: Every ``(old, new)`` replacement the copy makes: the Chinese words and the one rule of style.
PLUGIN_CHANGES = (*CHINESE_PLUGIN, EMPTY_OUTPUT_STYLE)


def installed_labextension() -> pathlib.Path:
    """The folder of nbgrader's JupyterLab plugin in this environment."""
    for base in jupyter_path("labextensions"):
        folder = pathlib.Path(base).joinpath(*LABEXTENSION)
        if (folder / "package.json").is_file():
            return folder
    raise FileNotFoundError("nbgrader 的 JupyterLab 插件没有安装（找不到 labextensions/@jupyter/nbgrader）")


def write_chinese_labextension(data_dir: pathlib.Path, source: pathlib.Path | None = None) -> pathlib.Path:
    """Write the Chinese copy of nbgrader's plugin under ``data_dir/labextensions/``; returns its folder.

    Put ``data_dir`` first on ``JUPYTER_PATH`` to serve it.  A script that changes gets a new name (its content
    hash), and so does the entry script naming it, so a browser that cached the English files asks anew.
    """
    source = source or installed_labextension()
    target = data_dir.joinpath("labextensions", *LABEXTENSION)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    static = target / "static"
    package = json.loads((target / "package.json").read_text(encoding="utf-8"))
    entry_name = package["jupyterlab"]["_build"]["load"].removeprefix("static/")
    left = dict(PLUGIN_CHANGES)
    renamed = {}
    for script in sorted(static.glob("*.js")):
        if script.name == entry_name:
            continue
        text = original = script.read_text(encoding="utf-8")
        for old, new in PLUGIN_CHANGES:
            if old in text:
                text = text.replace(old, new)
                left.pop(old, None)
        if text != original:
            renamed[script.name] = _rehashed(script, text)
    if left:
        raise ValueError(f"nbgrader 插件里找不到这些要翻译的文字（nbgrader 的版本变了？）：{sorted(left)}")
    entry = (static / entry_name).read_text(encoding="utf-8")
    for old_name, new_name in renamed.items():
        old_hash, new_hash = old_name.split(".")[1], new_name.split(".")[1]
        assert f'"{old_hash}"' in entry, f"{entry_name} 里找不到 {old_name} 的名字"
        entry = entry.replace(f'"{old_hash}"', f'"{new_hash}"')
    new_entry = _rehashed(static / entry_name, entry)
    package["jupyterlab"]["_build"]["load"] = f"static/{new_entry}"
    (target / "package.json").write_text(json.dumps(package, indent=2), encoding="utf-8")
    return target


def with_chinese_nbgrader(env: dict, data_dir: pathlib.Path) -> dict:
    """``env`` with a Chinese copy of nbgrader's JupyterLab plugin, written into ``data_dir``, first on JUPYTER_PATH.

    ``make lab`` (``scripts/lab.py``) calls it for the student's JupyterLab, and the class's JupyterHub
    (``grading/hub/jupyterhub_config.py``) once at start for every student's server.
    """
    write_chinese_labextension(data_dir)
    paths = [str(data_dir), *filter(None, env.get("JUPYTER_PATH", "").split(os.pathsep))]
    return {**env, "JUPYTER_PATH": os.pathsep.join(dict.fromkeys(paths))}


def _rehashed(script: pathlib.Path, text: str) -> str:
    """Write ``text`` as ``script``'s replacement named ``<chunk>.<hash of text>.js``; remove ``script``."""
    chunk, old_hash, ext = script.name.split(".")
    name = f"{chunk}.{hashlib.sha256(text.encode()).hexdigest()[:len(old_hash)]}.{ext}"
    script.unlink()
    (script.parent / name).write_text(text, encoding="utf-8")
    return name
