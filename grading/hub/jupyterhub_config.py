"""JupyterHub 6.1 for one class of the course on one machine (``tests/test_hub_exchange.py`` runs exactly this).

One instructor and the students, each with a single-user JupyterLab started
from this repository's ``.venv``; nbgrader's exchange is one shared folder.

* Users and roles: the instructors are in the JupyterHub group
  ``formgrade-attention-zh``, the students in ``nbgrader-attention-zh``
  (nbgrader's naming).  An instructor's server keeps every nbgrader tool
  (formgrader); a student's server gets the student settings of
  ``grading/student_lab/`` (no formgrader, no Create Assignment; the
  Assignments panel and Validate stay), and so, as with ``make lab``, JupyterLab
  in Chinese by default (``grading/student_lab/lab_settings/``) and the
  Chinese copy of nbgrader's JupyterLab plugin (Validate dialog, Assignments
  panel; ``grading/nbgrader_lab.py``): the hub writes that copy once, when it
  starts, into ``$ATTENTION_HUB_DATA`` and puts the folder first on every
  student server's ``JUPYTER_PATH``.  The instructor's server keeps nbgrader's
  own plugin.
* Every server puts ``grading/hub/`` on ``JUPYTER_CONFIG_PATH``: its
  ``nbgrader_config.py`` is the class's nbgrader config (course id, exchange).
* ``SimpleLocalProcessSpawner`` runs every server as the system user running
  the hub, with ``$ATTENTION_HUB_HOMES/<username>`` as home: no isolation
  between users at all -- a test and demo set-up, not one for a graded class
  (see the instructor guide).  ``DummyAuthenticator`` lets the listed users in
  with any password: replace it before anyone else can reach the hub.

Paths come from the environment: ``NBGRADER_EXCHANGE`` (default
``/srv/nbgrader/exchange``), ``ATTENTION_HUB_HOMES`` (default
``/srv/attention-hub/home``) and ``ATTENTION_HUB_DATA`` (default
``.venv/share/attention-hub`` beside the environment every server runs from,
so every server can read it).  Start it from the repository root, with
npm's ``configurable-http-proxy`` on PATH (``make test`` installs it into
``.venv/hub-proxy``)::

    PATH="$PWD/.venv/hub-proxy/node_modules/.bin:$PATH" .venv/bin/jupyterhub -f grading/hub/jupyterhub_config.py
"""

import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = str(HERE.parents[1])
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from grading.nbgrader_lab import with_chinese_nbgrader  # noqa: E402

STUDENT_SETTINGS = HERE.parent / "student_lab"
VENV_BIN = pathlib.Path(sys.executable).parent

COURSE_ID = "attention-zh"
INSTRUCTORS = ["instructor"]
STUDENTS = ["student1", "student2"]
INSTRUCTOR_GROUP = f"formgrade-{COURSE_ID}"
STUDENT_GROUP = f"nbgrader-{COURSE_ID}"
EXCHANGE = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
HOMES = os.environ.get("ATTENTION_HUB_HOMES", "/srv/attention-hub/home")
DATA = pathlib.Path(os.environ.get("ATTENTION_HUB_DATA", str(VENV_BIN.parent / "share" / "attention-hub")))
#: The students' JUPYTER_PATH: the Chinese copy of nbgrader's plugin, written now, once, when the hub starts.
STUDENT_JUPYTER_PATH = with_chinese_nbgrader({}, DATA)["JUPYTER_PATH"]


def is_instructor(spawner) -> bool:
    """Whether the server being started belongs to one of the course's instructors."""
    return any(group.name == INSTRUCTOR_GROUP for group in spawner.user.groups)


def config_path(spawner) -> str:
    """JUPYTER_CONFIG_PATH of a server: the class's nbgrader config, after the student settings for a student."""
    paths = [str(HERE)] if is_instructor(spawner) else [str(STUDENT_SETTINGS), str(HERE)]
    return os.pathsep.join(paths)


def jupyter_path(spawner) -> str:
    """JUPYTER_PATH of a server: the Chinese nbgrader plugin first for a student; nothing added for an instructor."""
    return "" if is_instructor(spawner) else STUDENT_JUPYTER_PATH


def student_id(spawner) -> str:
    """The name nbgrader puts on a student's submissions: the hub user ("" for an instructor)."""
    return "" if is_instructor(spawner) else spawner.user.name


c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

# --- who may log in, and who teaches
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = set(INSTRUCTORS + STUDENTS)
c.JupyterHub.load_groups = {INSTRUCTOR_GROUP: {"users": INSTRUCTORS}, STUDENT_GROUP: {"users": STUDENTS}}

# --- one JupyterLab per user, started from this repository's environment
c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"
c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(HOMES, "{username}")
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.args = ["--ServerApp.allow_root=True"] if os.geteuid() == 0 else []
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),  # nbgrader runs `alembic` by name
    "NBGRADER_EXCHANGE": EXCHANGE,
    "JUPYTER_CONFIG_PATH": config_path,
    "JUPYTER_PATH": jupyter_path,
    "NBGRADER_STUDENT_ID": student_id,
}
