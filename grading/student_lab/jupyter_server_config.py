"""The student's Jupyter server (``make lab``): nbgrader's Assignment List explains a missing exchange in Chinese.

Loaded by the server at start-up because ``scripts/lab.py`` puts this folder
first on ``JUPYTER_CONFIG_PATH`` (the instructor tools are switched off by
``jupyter_server_config.json`` beside it).
"""

import pathlib
import sys

ROOT = str(pathlib.Path(__file__).resolve().parents[2])  # noqa: F821 (traitlets defines __file__ here)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import nbgrader.server_extensions.assignment_list.handlers  # noqa: E402, F401 (install() patches it)

from grading import nbgrader_lab  # noqa: E402

nbgrader_lab.install()
