"""`make lab` serves a Chinese copy of nbgrader's JupyterLab plugin (grading/nbgrader_lab.py), from the pinned one.

The browser side is checked in tests/test_student_lab_browser.py; here, without a browser: every English text
the copy replaces is found in the installed plugin, none is left in the copy, and the copy's entry script and
renamed chunk are the files its package.json and entry script name.
"""

from __future__ import annotations

import json
import os

from conftest import load_script
from grading import nbgrader_lab

lab = load_script("lab")


def test_the_copy_is_chinese_and_consistent(tmp_path):
    target = nbgrader_lab.write_chinese_labextension(tmp_path)
    package = json.loads((target / "package.json").read_text(encoding="utf-8"))
    entry = target / package["jupyterlab"]["_build"]["load"]
    assert entry.is_file()
    scripts = {p.name: p.read_text(encoding="utf-8") for p in (target / "static").glob("*.js")}
    everything = "".join(scripts.values())
    for old, new in nbgrader_lab.CHINESE_PLUGIN:
        assert old not in everything and new in everything, old
    for name in scripts:  # the entry script names every chunk by the hash in its file name
        parts = name.split(".")
        if len(parts) == 3 and parts[0] != "remoteEntry":
            assert f'{parts[0]}:"{parts[1]}"' in scripts[entry.name], name
    original = nbgrader_lab.installed_labextension()
    assert "Error fetching courses!" in "".join(p.read_text(encoding="utf-8") for p in original.glob("static/*.js"))


def test_make_lab_puts_the_copy_first_on_jupyter_path(tmp_path):
    env = lab.with_chinese_nbgrader({"JUPYTER_PATH": "/elsewhere"}, tmp_path)
    assert env["JUPYTER_PATH"].split(os.pathsep) == [str(tmp_path), "/elsewhere"]
    assert (tmp_path / "labextensions" / "@jupyter" / "nbgrader" / "package.json").is_file()
