"""The student's Jupyter server (``make lab``): JupyterLab in Chinese; the Assignment List explains a missing exchange.

Loaded by the server at start-up because ``scripts/lab.py`` puts this folder
first on ``JUPYTER_CONFIG_PATH`` (the instructor tools are switched off by
``jupyter_server_config.json`` beside it).  JupyterLab's default settings come from
``lab_settings/overrides.json`` beside this file: the interface is in Chinese (the pinned
``jupyterlab-language-pack-zh-cn``); a student can still pick another language in the menu.
"""

import pathlib
import sys

ROOT = str(pathlib.Path(__file__).resolve().parents[2])  # noqa: F821 (traitlets defines __file__ here)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import nbgrader.server_extensions.assignment_list.handlers  # noqa: E402, F401 (install() patches it)

from grading import nbgrader_lab  # noqa: E402

nbgrader_lab.install()

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)
c.LabApp.app_settings_dir = str(pathlib.Path(__file__).resolve().parent / "lab_settings")  # noqa: F821
