"""The student's own working copy of the exercises, and JupyterLab on it (``make lab``).

``notebooks/`` is the release folder: ``make release`` deletes and regenerates
it, and the tests compare it with a fresh generation, so a student must never
write there.  ``make lab`` therefore opens ``student-work/`` instead (git
ignores it; nothing in ``make release``, ``make book``, ``make test`` or a pull
touches it):

* each released notebook is copied there once, the first time it appears;
* a notebook that already exists there is never overwritten, whatever changed
  in the release (the student's answers are kept);
* a chapter released later is added the next time ``make lab`` runs.

JupyterLab starts in the working copy (a terminal opened in the lab starts
there) with ``grading/student_lab/`` first on ``JUPYTER_CONFIG_PATH``, which hides
nbgrader's instructor tools from the student, and ``grading/student_lab/make_lab/``
after it: with it, the Validate button and ``nbgrader validate chNN.ipynb``
typed in JupyterLab's terminal, in the notebook's own folder, find the
course's ``nbgrader_config.py`` (Chinese explanations), and the environment's
``bin/`` is first on ``PATH``, so ``nbgrader`` is found at all.

As root (Docker images, cloud machines) JupyterLab refuses to start without
``--allow-root``; ``make lab`` passes it then.

One Ctrl+C in the terminal running ``make lab`` stops it and JupyterLab, with no
question asked, in a terminal or without one (:func:`run_lab`).

JupyterLab speaks Chinese (the pinned language pack, made the default by
``grading/student_lab/lab_settings/``), and so does nbgrader's plugin in it: for
the time JupyterLab runs, a Chinese copy of the plugin lies in a temporary
folder first on ``JUPYTER_PATH`` (``grading/nbgrader_lab.py``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

from release import as_jupyterlab_keeps  # a neighbour in scripts/ (it puts the repository root on sys.path)

from grading.nbgrader_lab import with_chinese_nbgrader  # shared with the class's JupyterHub

ROOT = pathlib.Path(__file__).resolve().parents[1]
RELEASE = ROOT / "notebooks"
WORKING_COPY = ROOT / "student-work"
STUDENT_SETTINGS = ROOT / "grading" / "student_lab"
#: Settings only ``make lab`` uses (not a class's JupyterHub): nbgrader anywhere in the lab reads the course config.
LAB_SETTINGS = STUDENT_SETTINGS / "make_lab"
BIN = pathlib.Path(sys.executable).parent


def sync_working_copy(release: pathlib.Path = RELEASE, work: pathlib.Path = WORKING_COPY) -> list[pathlib.Path]:
    """Copy every released file that ``work`` does not have yet; never overwrite one. Returns the new files.

    A copied notebook gets the kernel metadata of this environment (``release.as_jupyterlab_keeps``):
    JupyterLab would otherwise mark it modified on opening when the release was made with another Python.
    """
    added, known = [], {}
    for source in sorted(p for p in release.rglob("*") if p.is_file()):
        if ".ipynb_checkpoints" in source.parts:
            continue
        target = work / source.relative_to(release)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        if target.suffix == ".ipynb":
            as_jupyterlab_keeps(target, known)
        added.append(target)
    return added


def lab_command(lab_args=(), work: pathlib.Path = WORKING_COPY, *, root: bool | None = None) -> list[str]:
    """JupyterLab on the working copy.

    ``root`` (default: whether this process runs as root) adds ``--allow-root``, without which JupyterLab
    refuses to start as root.
    """
    root = os.geteuid() == 0 if root is None else root
    allow = ["--allow-root"] if root and "--allow-root" not in lab_args else []
    return [str(BIN / "jupyter"), "lab", f"--notebook-dir={work}", *allow, *lab_args]


def student_environment(base=None, *, make_lab: bool = True) -> dict:
    """``base`` (default: this process's environment) with the student's settings first on JUPYTER_CONFIG_PATH.

    ``grading/student_lab/`` hides nbgrader's instructor tools (formgrader, Create Assignment) from the student.
    With ``make_lab`` (``make lab`` on the student's own machine, not a class's JupyterHub) the environment's
    ``bin/`` also goes first on ``PATH`` (named in ``ATTENTION_LAB_BIN`` for the lab's terminal) and
    ``grading/student_lab/make_lab/`` on JUPYTER_CONFIG_PATH: ``nbgrader`` typed in the lab's terminal, in any
    folder, is the course's and reads the course's configuration.
    """
    env = dict(os.environ if base is None else base)
    ours = [STUDENT_SETTINGS, LAB_SETTINGS] if make_lab else [STUDENT_SETTINGS]
    paths = [*map(str, ours), *filter(None, env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(dict.fromkeys(paths))
    if make_lab:
        env["PATH"] = os.pathsep.join(dict.fromkeys([str(BIN), *filter(None, env.get("PATH", "").split(os.pathsep))]))
        env["ATTENTION_LAB_BIN"] = str(BIN)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="在学生自己的作业目录上打开 JupyterLab (JupyterLab on your copy).")
    parser.add_argument("--sync-only", action="store_true", help="只同步新发布的笔记本，不启动 JupyterLab")
    parser.add_argument("--work", type=pathlib.Path, default=None, help=argparse.SUPPRESS)  # tests: another copy
    args, lab_args = parser.parse_known_args(argv)
    work = args.work.resolve() if args.work else WORKING_COPY
    added = sync_working_copy(RELEASE, work)
    for path in added:
        print(f"新的练习：{_shown(path)}")
    print(f"你的作业目录是 {_shown(work)}/：在这里作答，重新发布练习不会覆盖它。")
    if args.sync_only:
        return 0
    with tempfile.TemporaryDirectory(prefix="attention-lab-") as data_dir:
        env = with_chinese_nbgrader(student_environment(), pathlib.Path(data_dir))
        return run_lab(lab_command(lab_args, work), env, work)


#: What ``make lab`` prints when asked to stop (Ctrl+C, SIGTERM, SIGHUP).
STOPPING = "正在停止 JupyterLab（关掉内核和终端），稍等几秒……"


def run_lab(command: list[str], env: dict, cwd: pathlib.Path = WORKING_COPY) -> int:
    """Run JupyterLab until it ends; one Ctrl+C, SIGTERM or SIGHUP sent to this script stops it cleanly.

    JupyterLab runs in a process group of its own, so the Ctrl+C typed in the terminal reaches this script (and
    ``make``), never JupyterLab itself: jupyter_server would answer it, in a terminal, with ``Shut down this
    Jupyter server (y/[n])?`` and keep running after 5 s without an answer; without a terminal it would take it
    as a KeyboardInterrupt, which can be swallowed by whatever callback it lands in.  This script turns each of
    these signals into SIGTERM for JupyterLab, which stops it at once (kernels and terminals shut down), and then
    returns JupyterLab's exit status.
    """
    server: subprocess.Popen | None = None
    asked: list[int] = []

    def stop(signum, _frame):
        if not asked:
            print(f"\n{STOPPING}", flush=True)
        asked.append(signum)
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    own_group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    server = subprocess.Popen(command, env=env, cwd=cwd, **own_group)  # a new terminal opens in the working copy
    if asked and server.poll() is None:  # stopped while it was being started
        server.send_signal(signal.SIGTERM)
    return server.wait()


def _shown(path: pathlib.Path) -> str:
    """``path`` relative to the repository root where it lies inside it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
