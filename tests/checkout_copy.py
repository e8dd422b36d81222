"""Helpers for running documented commands exactly as written without touching the checkout.

* :func:`copy_checkout` -- a throw-away copy of the working tree (what git tracks plus untracked files git does
  not ignore, modification times kept so ``make`` finds its ``.venv`` stamp up to date) with ``.venv`` linked to
  the checkout's own environment.  A command that rewrites the checkout (``make release``, ``make book``,
  ``make lab``'s ``student-work/``, nbgrader in the repository root) is typed there, word for word.
* :func:`as_user` -- the argument list that runs a shell command as an ordinary user (``nobody``).  When the
  checkout's interpreter lives under a directory that user cannot enter (``/root/.pyenv`` here: ``.venv/bin/python``
  is a link into it and ``/root`` is ``drwx------``), the command runs in a private mount namespace whose
  ``/root`` is an empty world-readable tmpfs holding only that interpreter tree, bind-mounted read-only: the
  machine a student has whose Python is installed where everyone can run it.  Nothing on the real file system
  changes (no chmod of ``/root``); the rest of root's home stays invisible to the user.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shlex
import shutil
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
ORDINARY_USER = "nobody"
RUNUSER = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "/usr/sbin/runuser"


def copy_checkout(dest: pathlib.Path, *, owner: str | None = None) -> pathlib.Path:
    """Copy the working tree to ``dest`` (created) and link ``dest/.venv`` to the checkout's; return ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    dest.mkdir(parents=True, exist_ok=True)
    for name in filter(None, listed):
        source = REPO / name
        if not source.is_file():  # deleted in the working tree but still tracked
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)  # keeps mtimes: make's .venv stamp stays newer than requirements/constraints
    (dest / ".venv").symlink_to(REPO / ".venv")
    if owner:
        subprocess.run(["chown", "-R", "-h", f"{owner}:", str(dest)], check=True)
    return dest


@contextlib.contextmanager
def reachable_tmp():
    """A temporary folder an ordinary user can reach (pytest's own tmp root is ``drwx------`` for root)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="attn-user-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _hidden_prefix(user: str) -> pathlib.Path | None:
    """The top directory under ``/root`` holding the real interpreter, when ``user`` cannot reach it; else None."""
    interpreter = (REPO / ".venv" / "bin" / "python").resolve()
    probe = subprocess.run([RUNUSER, "-u", user, "--", "test", "-x", str(interpreter)], check=False)
    if probe.returncode == 0:
        return None
    parts = interpreter.parts
    if parts[:2] != ("/", "root") or len(parts) < 4:
        raise RuntimeError(f"{user} 不能运行 {interpreter}，而它不在 /root 下，无法只暴露这个目录")
    return pathlib.Path(*parts[:3])


def as_user(command: str, *, user: str = ORDINARY_USER, home: pathlib.Path | None = None) -> list[str]:
    """Arguments running ``bash -c command`` as ``user`` (run by root), with the interpreter reachable (see above)."""
    assert os.geteuid() == 0, "只有 root 能切换到普通用户"
    inner = [RUNUSER, "-u", user, "--", "/usr/bin/env"]
    if home is not None:
        inner.append(f"HOME={home}")
    inner += ["bash", "-c", command]
    hidden = _hidden_prefix(user)
    if hidden is None:
        return inner
    stash = f"/tmp/.attn-{user}-{os.getpid()}-{hidden.name}"
    setup = " && ".join([
        f"mkdir -p {stash}",
        f"mount --bind {shlex.quote(str(hidden))} {stash}",
        "mount -t tmpfs -o mode=755,size=1m tmpfs /root",
        f"mkdir /root/{shlex.quote(hidden.name)}",
        f"mount --bind -o ro {stash} /root/{shlex.quote(hidden.name)}",
        f"umount {stash}",
        f"rmdir {stash}",
        f"exec {shlex.join(inner)}",
    ])
    return ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", setup]
