"""``make lab`` only: JupyterLab's terminal finds the course's ``nbgrader`` and ``python``.

``scripts/lab.py`` starts JupyterLab with the course's ``.venv/bin`` first on
``PATH`` and names that folder in ``ATTENTION_LAB_BIN``.  A terminal started
by Jupyter would be a login shell when JupyterLab's own output is not a
terminal, and a login shell reads ``/etc/profile``, which resets ``PATH``.
So the terminal is an interactive bash that reads the student's usual
``~/.bashrc`` and then puts that folder first again (``bashrc`` beside this
file); without bash, a plain ``sh`` that keeps the environment.
"""

import pathlib
import shutil

HERE = pathlib.Path(__file__).resolve().parent  # noqa: F821 (traitlets defines __file__ here)

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)
_bash = shutil.which("bash")
c.ServerApp.terminado_settings = {
    "shell_command": [_bash, "--rcfile", str(HERE / "bashrc"), "-i"] if _bash else [shutil.which("sh") or "/bin/sh"]}
