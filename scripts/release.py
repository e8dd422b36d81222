"""Regenerate the student notebooks ``notebooks/<assignment>/`` from ``solutions/<assignment>/``.

``make release`` runs this.  Every assignment under ``solutions/`` is generated
by ``nbgrader generate_assignment`` in a temporary course directory (so no
gradebook lands in the repository), and the result replaces the committed
release folder.  ``tests/test_release.py`` checks that the committed
``notebooks/`` equals a fresh generation.
"""

from __future__ import annotations

import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.course import RELEASE, SOLUTIONS, Course, assignments  # noqa: E402


def generate(dest: pathlib.Path, names=None, source: pathlib.Path = SOLUTIONS) -> list[str]:
    """Generate the release version of each assignment into ``dest/<assignment>/``.

    Parameters
    ----------
    dest : path
        Output folder; each assignment's subfolder is replaced.
    names : list of str, optional
        Assignment ids (default: every assignment under ``source``).
    source : path
        Folder of instructor notebooks.

    Returns
    -------
    list of str
        The assignment ids generated.
    """
    dest = pathlib.Path(dest)
    with tempfile.TemporaryDirectory(prefix="attn-release-") as tmp:
        course = Course(tmp)
        names = course.add_sources(names, source)
        # one nbgrader run for all of them: the temporary course holds exactly these assignments
        course.nbgrader("generate_assignment", "*", "--force")
        for name in names:
            out = dest / name
            if out.exists():
                shutil.rmtree(out)
            shutil.copytree(course.path("notebooks", name), out)
    return names


def main() -> int:
    names = assignments()
    stale = sorted(p.name for p in RELEASE.iterdir() if p.is_dir() and p.name not in names) if RELEASE.exists() else []
    for name in stale:  # an assignment removed from solutions/ leaves no orphan behind
        shutil.rmtree(RELEASE / name)
    generate(RELEASE, names)
    for name in names:
        print(f"已生成学生版 notebooks/{name}/")
    for name in stale:
        print(f"已删除过期的 notebooks/{name}/（solutions/ 中已没有）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
