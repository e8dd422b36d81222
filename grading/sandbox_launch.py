"""Start a command as an unprivileged user in its own view of the file system (run as root).

Usage::

    python grading/sandbox_launch.py --uid U --gid G [--reach PATH]... [--hide PATH]... -- COMMAND...

Run by ``grading.kernel_limits.LimitedKernelManager`` in front of a student's
kernel.  In a private mount namespace (the grader's own view is untouched):

1. every folder on the way to a ``--reach`` path that the user could not
   traverse (``/root`` when the interpreter lives in ``/root/.pyenv``) is
   replaced by an empty, traversable folder holding only that path, so the
   kernel can run the course's Python and nothing else there becomes visible;
2. every ``--hide`` path (the class's submissions, gradebook, source notebooks)
   is covered by an empty folder or file that only root may open;
3. the process drops to ``--uid``/``--gid`` with no supplementary groups and
   ``no_new_privs`` (no setuid program can give rights back), then execs
   ``COMMAND``.

Only the standard library is used: this file runs before the kernel's imports.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import stat
import sys
import tempfile

CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None):
    """The ``mount(2)`` system call."""
    enc = [None if x is None else x.encode() for x in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def blocked_folders(paths: list[str], uid: int, gid: int) -> dict[str, set[str]]:
    """``{folder: names of its children on the way to paths}`` for the folders ``uid`` cannot traverse."""
    blocked: dict[str, set[str]] = {}
    for path in paths:
        parts = os.path.abspath(path).strip("/").split("/")
        for depth in range(len(parts) - 1):
            folder = "/" + "/".join(parts[:depth])
            st = os.stat(folder)
            bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
            if not st.st_mode & bit:
                blocked.setdefault(folder, set()).add(parts[depth])
    return blocked


def open_folder(folder: str, children: set[str], stage: str) -> None:
    """Replace ``folder`` by a traversable empty tmpfs that holds only ``children`` (bound from the original)."""
    staged = {}
    for name in children:
        staged[name] = os.path.join(stage, f"reach-{len(staged)}")
        os.mkdir(staged[name])
        mount(os.path.join(folder, name), staged[name], None, MS_BIND | MS_REC)
    mount("tmpfs", folder, "tmpfs", 0, "mode=0711,size=64k")
    for name, source in staged.items():
        os.mkdir(os.path.join(folder, name))
        mount(source, os.path.join(folder, name), None, MS_BIND | MS_REC)
        _check(_libc.umount2(source.encode(), MNT_DETACH), f"umount {source}")


def hide(path: str, stage: str) -> None:
    """Cover ``path`` with an empty folder or file that only root may open."""
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", 0, "mode=0700,size=4k")
    elif os.path.exists(path):
        fd, empty = tempfile.mkstemp(dir=stage)  # mode 0600, owned by root
        os.close(fd)
        mount(empty, path, None, MS_BIND)


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good: no supplementary groups, no way back through setuid programs."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--gid", type=int, required=True)
    parser.add_argument("--reach", action="append", default=[])
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the grader
    stage = tempfile.mkdtemp(prefix="attn-sandbox-")
    for folder, children in sorted(blocked_folders(args.reach, args.uid, args.gid).items()):
        open_folder(folder, children, stage)
    for path in args.hide:
        hide(os.path.abspath(path), stage)
    for name in os.listdir(stage):  # the mounts hold what they need; leave nothing behind in /tmp
        (os.rmdir if os.path.isdir(os.path.join(stage, name)) else os.unlink)(os.path.join(stage, name))
    os.rmdir(stage)
    drop_privileges(args.uid, args.gid)
    os.execvp(command[0], command)


if __name__ == "__main__":
    try:
        main()
    except OSError as exc:
        print(f"沙箱无法建立（sandbox failed）：{exc}", file=sys.stderr)
        sys.exit(126)
