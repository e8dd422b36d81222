"""The Formgrader on a class folder: ``make formgrader COURSE=DIR`` (JupyterLab rooted at the class folder).

nbgrader's Formgrader marks the course of the folder JupyterLab starts in,
with that folder's ``nbgrader_config.py``.  This makes the class folder one
(``grading.course.class_folder``: the course configuration, a link to the
source notebooks), then starts this environment's JupyterLab there, so the
gradebook it opens is ``DIR/gradebook.db`` and nothing is written into the
checkout.  Open it from the menu Nbgrader → Formgrader; Ctrl+C stops it.
"""

from __future__ import annotations

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.course import REPO, class_folder  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("用法：make formgrader COURSE=课程目录", file=sys.stderr)
        return 2
    course = pathlib.Path(argv[0]).resolve()
    if course == REPO or not (course / "submitted").is_dir():
        print(f"{course} 不是班级的课程目录（里面应有 submitted/<学生>/<练习>/，且不是仓库本身）："
              "请用 COURSE= 指向班级的文件夹。", file=sys.stderr)
        return 2
    class_folder(course)
    jupyter = pathlib.Path(sys.executable).parent / "jupyter"
    os.chdir(course)
    os.execv(str(jupyter), [str(jupyter), "lab", f"--ServerApp.root_dir={course}"])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
