"""The class's nbgrader config on the course's JupyterHub, read by every user's server.

``grading/hub/jupyterhub_config.py`` puts this folder on every server's
``JUPYTER_CONFIG_PATH`` (on another hub, copy this file to
``/etc/jupyter/nbgrader_config.py``): the course id, the exchange
(``$NBGRADER_EXCHANGE``), Validate in Chinese for the students, and the
course's Chinese offline feedback page for the formgrader's "Generate Feedback"
too (``grading/nbgrader_formgrader.py``).

On ``JUPYTER_CONFIG_PATH`` it takes priority over a user's own
``~/.jupyter/nbgrader_config.py``, so it sets nothing an instructor must
override: the instructor's file loads the course directory's
``nbgrader_config.py`` (course root, gradebook, Chinese feedback).

A student's server names the student's submissions after the hub user
(``$NBGRADER_STUDENT_ID``, set by the hub config): nbgrader would otherwise
use the system user running the server, which under
``SimpleLocalProcessSpawner`` is the same for everyone.
"""

import os
import pathlib
import sys

REPO = str(pathlib.Path(__file__).resolve().parents[2])
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from grading import nbgrader_formgrader  # noqa: E402
from grading.nbgrader_validate import configure as configure_validate  # noqa: E402
from grading.nbgrader_validate import install as install_validate  # noqa: E402

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)
c.CourseDirectory.course_id = "attention-zh"
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
configure_validate(c)
install_validate()
nbgrader_formgrader.install()

if os.environ.get("NBGRADER_STUDENT_ID"):
    c.CourseDirectory.student_id = os.environ["NBGRADER_STUDENT_ID"]
