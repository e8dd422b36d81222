"""``make lab`` only: ``nbgrader`` typed anywhere in the student's lab reads the course's ``nbgrader_config.py``.

The notebooks tell the student to run ``nbgrader validate chNN.ipynb`` in a
terminal, from the notebook's own folder (``student-work/chNN-…/``), where
nbgrader finds no ``nbgrader_config.py`` and would answer in English.
``scripts/lab.py`` puts this folder on ``JUPYTER_CONFIG_PATH``, where nbgrader
also looks for its configuration, so it loads the repository's.  From the
repository root nbgrader reads that file itself; it is not loaded twice.
"""

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]  # noqa: F821 (traitlets defines __file__ here)

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)
if pathlib.Path(os.getcwd()).resolve() != ROOT:
    load_subconfig(str(ROOT / "nbgrader_config.py"))  # noqa: F821
