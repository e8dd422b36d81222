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

JupyterLab starts from the repository root (where nbgrader finds the course's
``nbgrader_config.py``: Validate explains failures in Chinese there) with
``grading/student_lab/`` first on ``JUPYTER_CONFIG_PATH``, which hides
nbgrader's instructor tools from the student.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys

from release import as_jupyterlab_keeps  # a neighbour in scripts/

ROOT = pathlib.Path(__file__).resolve().parents[1]
RELEASE = ROOT / "notebooks"
WORKING_COPY = ROOT / "student-work"
STUDENT_SETTINGS = ROOT / "grading" / "student_lab"


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


def lab_command(lab_args=(), work: pathlib.Path = WORKING_COPY) -> list[str]:
    """JupyterLab on the working copy (started from the repository root, where nbgrader finds the course config)."""
    return [str(pathlib.Path(sys.executable).parent / "jupyter"), "lab", f"--notebook-dir={work}", *lab_args]


def student_environment(base=None) -> dict:
    """``base`` (default: this process's environment) with the student's settings first on JUPYTER_CONFIG_PATH.

    ``grading/student_lab/`` hides nbgrader's instructor tools (formgrader, Create Assignment) from the student.
    """
    env = dict(os.environ if base is None else base)
    paths = [str(STUDENT_SETTINGS), *filter(None, env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="在学生自己的作业目录上打开 JupyterLab (JupyterLab on your copy).")
    parser.add_argument("--sync-only", action="store_true", help="只同步新发布的笔记本，不启动 JupyterLab")
    args, lab_args = parser.parse_known_args(argv)
    added = sync_working_copy(RELEASE, WORKING_COPY)
    for path in added:
        print(f"新的练习：{path.relative_to(ROOT)}")
    print(f"你的作业目录是 {WORKING_COPY.relative_to(ROOT)}/：在这里作答，重新发布练习不会覆盖它。")
    if args.sync_only:
        return 0
    return subprocess.run(lab_command(lab_args), env=student_environment(), cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
