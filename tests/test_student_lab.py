"""The student's JupyterLab (``make lab``), started for real: student tools only, and Chinese where nbgrader speaks.

A real Jupyter server is started the way ``scripts/lab.py`` starts it (same
command, same environment, from the repository root) on a loopback port, on a
temporary working copy, with no class exchange; the tests talk to it through
the HTTP API that JupyterLab's nbgrader extensions call.  An instructor's
server, started without the student settings, still serves the formgrader.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import urllib.error
import urllib.request

import jupyter_servers
import pytest
from lessons import ROOT

from conftest import load_script
from grading import nbgrader_lab

lab = load_script("lab")
pytestmark = pytest.mark.grading
TOKEN = "student-lab-test"
INSTRUCTOR_ONLY = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                   "@jupyter/nbgrader:course-list")


def _request(base: str, path: str, data: dict | None = None) -> tuple[int, str]:
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(base + path, data=body, method="GET" if data is None else "POST",
                                 headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


@contextlib.contextmanager
def jupyter_server(tmp_path, env):
    """A JupyterLab server on the working copy ``tmp_path / 'work'``; yields its base URL; always stopped."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "notebooks" / "ch05-softmax", work / "ch05-softmax")
    with jupyter_servers.lab_server(work, tmp_path, env, TOKEN) as base:
        yield base


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    with jupyter_server(tmp_path_factory.mktemp("student"), lab.student_environment()) as base:
        yield base


def _page_config(base: str) -> dict:
    status, html = _request(base, "/lab")
    assert status == 200
    return json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                html, re.S).group(1))


def test_the_student_does_not_get_the_instructor_tools(student):
    disabled = _page_config(student)["disabledExtensions"]
    assert set(INSTRUCTOR_ONLY) <= set(disabled)
    for kept in ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:validate-assignment"):
        assert kept not in disabled
    assert _request(student, "/formgrader")[0] == 404


def test_without_an_exchange_the_assignment_list_says_what_to_do_in_chinese(student):
    status, body = _request(student, "/assignments?course_id=attention-zh")
    assert status == 200
    reply = json.loads(body)
    assert reply == {"success": False, "value": nbgrader_lab.NO_EXCHANGE}
    assert "make lab" in reply["value"] and "Validate" in reply["value"] and "学生指南" in reply["value"]


def test_the_validate_button_explains_in_chinese(student):
    status, body = _request(student, "/assignments/validate", {"path": "ch05-softmax/ch05-softmax.ipynb"})
    assert status == 200
    reply = json.loads(body)
    assert reply["success"] is True, reply
    failed = reply["value"]["failed"]
    assert [("没有通过的检查" in cell["error"], "还没有你的回答" in cell["error"]) for cell in failed] == [
        (True, False)] * 3 + [(False, True)]  # three exercises, then the written answer


def test_the_instructor_still_has_the_formgrader(tmp_path):
    with jupyter_server(tmp_path, {k: v for k, v in lab.student_environment().items()
                                   if k != "JUPYTER_CONFIG_PATH"}) as base:
        assert not set(INSTRUCTOR_ONLY) & set(_page_config(base)["disabledExtensions"])
        assert _request(base, "/formgrader")[0] == 200


def test_the_listing_is_left_alone_where_an_exchange_exists():
    listed = {"success": True, "value": [{"course_id": "attention-zh", "assignment_id": "ch05-softmax"}]}
    assert nbgrader_lab.explain_missing_exchange(listed) is listed
    other = {"success": False, "value": "Traceback: something else"}
    assert nbgrader_lab.explain_missing_exchange(other) is other
