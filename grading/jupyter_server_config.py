"""Settings of every Jupyter server this course's environment starts; ``make`` copies this file into
``.venv/etc/jupyter/``, where a server started from ``.venv`` reads it.

* Root may start one: students and instructors on Docker images and cloud VMs work as root, and the 教师指南's
  ``.venv/bin/jupyter lab`` must open as typed (``make lab`` passes ``--allow-root`` too).
* The environment's own ``bin/`` comes first on the server's ``PATH``.  The guides type ``.venv/bin/jupyter lab``
  without activating the environment, yet the Formgrader's gradebook runs ``alembic`` and the lab's terminal is
  where the 学生指南 has ``nbgrader validate`` typed: both must be this environment's, found by name.
"""

import os
import sys

c = get_config()  # noqa: F821 -- defined by traitlets when it loads this file

c.ServerApp.allow_root = True

_bin = os.path.join(sys.prefix, "bin")
if _bin not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join(filter(None, [_bin, os.environ.get("PATH", "")]))
