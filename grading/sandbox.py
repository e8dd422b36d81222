"""Grade students' code as an unprivileged system user (``make grade-class SANDBOX=nobody``).

nbgrader runs every student cell with the rights of whoever runs the grader.
As root, ``grade_class`` can instead start each kernel through
``grading/sandbox_launch.py``: as a user that owns nothing, in a private view
of the file system where the class's submissions, autograded notebooks,
feedback, gradebook, grades table and the assignment's source notebooks are
covered by empty folders and files only root may open.  Beyond that, ordinary
permissions decide:

* each submission is graded in a worker course folder of mode 0700 owned by
  the grader: the kernel starts inside it (the working folder is entered
  before the user changes), but cannot reach the gradebook copy beside it;
* the scratch folder holding the worker courses is 0711 (traversable, not
  listable), so each kernel reaches its own home folder there and nothing else;
* folders the user cannot traverse on the way to the kernel's Python, the
  virtual environment and attnlib (``/root`` when Python lives in
  ``/root/.pyenv``) are opened for that path only, in the kernel's view.

:func:`Sandbox.check` proves the arrangement before any grading starts: as the
sandbox user, through the same launcher, it imports what a kernel needs and
tries to read and write every covered path; ``grade_class`` refuses to grade
when anything is reachable.  What it does not limit: CPU time within the cell
timeout, the network, the number of processes, ``/tmp``.
"""

from __future__ import annotations

import os
import pathlib
import pwd
import subprocess
import sys
from dataclasses import dataclass

from grading.course import REPO
from grading.kernel_limits import launch_command

#: The class's files a student kernel must not see, relative to the course folder.
COURSE_FILES = ("submitted", "autograded", "feedback", "release", "source", "gradebook.db", "grades.csv")

#: Run as the sandbox user: import what a kernel needs, then try every covered path (one line per success).
PROBE = r"""
import os, sys
import attnlib, ipykernel  # the kernel needs both
for path in sys.argv[1:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
        print("读取 " + path)
    except OSError:
        pass
    target = os.path.join(path, ".sandbox-probe") if os.path.isdir(path) else path
    try:
        open(target, "ab").close()
        print("写入 " + target)
        if target != path:
            os.remove(target)  # leave no trace in a folder the sandbox failed to cover
    except OSError:
        pass
"""


class SandboxError(RuntimeError):
    """The sandbox cannot be used as asked; the message (Chinese) says why and what to do."""


@dataclass(frozen=True)
class Sandbox:
    """Who student kernels run as, what they must reach and what they must not see."""

    user: str
    uid: int
    gid: int
    reach: tuple
    hide: tuple

    def launch(self, command: list) -> list:
        """``command`` wrapped to start through the launcher as the sandbox user."""
        return launch_command(self.uid, self.gid, self.reach, self.hide, command)

    def check(self) -> None:
        """Raise ``SandboxError`` unless a sandboxed Python runs and reaches none of the covered paths."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/", "PYTHONDONTWRITEBYTECODE": "1"}
        present = [p for p in self.hide if os.path.exists(p)]
        proc = subprocess.run(self.launch([sys.executable, "-c", PROBE, *present]), env=env, cwd="/",
                              capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["（无输出）"])[-1]
            raise SandboxError(f"沙箱用户 {self.user} 无法运行评分用的 Python（{sys.executable}）：{last}")
        reached = [line for line in proc.stdout.splitlines() if line.strip()]
        if reached:
            raise SandboxError(f"沙箱里的学生代码仍能访问班级文件（{'；'.join(reached)}），停止评分。")

    def worker_config(self, homes: pathlib.Path) -> tuple:
        """What the grading workers need to start sandboxed kernels (plain data, picklable)."""
        return (self.uid, self.gid, str(homes), list(self.reach), list(self.hide))


def sandbox_for(user: str, course: pathlib.Path, source: pathlib.Path) -> Sandbox:
    """The sandbox that runs kernels as ``user`` while grading ``course`` against ``source``.

    Raises ``SandboxError`` when not root, when there is no such user, or when it is privileged.
    """
    if os.geteuid() != 0:
        raise SandboxError(f"只有 root 才能让内核以用户 {user} 的身份运行；请用 root 运行评分，或去掉沙箱选项。")
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise SandboxError(f"系统里没有用户 {user}；先创建一个没有任何权限的用户，例如 "
                           f"useradd --system --no-create-home --shell /usr/sbin/nologin {user}") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SandboxError(f"用户 {user} 有 root 权限（uid 或 gid 为 0），不能用作沙箱。")
    course, source = pathlib.Path(course).resolve(), pathlib.Path(source).resolve()
    reach = (sys.prefix, sys.base_prefix, str(REPO))
    hide = tuple(str(course / name) for name in COURSE_FILES) + (str(source),)
    return Sandbox(user, entry.pw_uid, entry.pw_gid, reach, hide)


def open_scratch(scratch: pathlib.Path) -> pathlib.Path:
    """Make ``scratch`` traversable (0711) and give it a ``sandbox/`` folder (0711) for the kernels' homes."""
    scratch.chmod(0o711)
    homes = scratch / "sandbox"
    homes.mkdir(mode=0o711, exist_ok=True)
    homes.chmod(0o711)
    return homes
