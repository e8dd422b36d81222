"""A throw-away nbgrader course directory that uses the repository's ``nbgrader_config.py``.

Both ``scripts/release.py`` and ``scripts/grade_samples.py`` run nbgrader in one
of these, so no gradebook, log or per-class folder ever lands in the repository.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
RELEASE = REPO / "notebooks"


class NbgraderError(RuntimeError):
    """An nbgrader command failed; the message holds the tail of its log."""


def assignments(source: pathlib.Path = SOLUTIONS) -> list[str]:
    """Every assignment id under ``source``: a folder holding at least one notebook."""
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


CLASS_CONFIG = "nbgrader_config.py"


def config_lines(root: pathlib.Path) -> list[str]:
    """An ``nbgrader_config.py`` for a course at ``root``: the repository's configuration, rooted there."""
    return [
        "c = get_config()  # noqa: F821",
        f"load_subconfig({str(REPO / 'nbgrader_config.py')!r})  # noqa: F821",
        f"c.CourseDirectory.root = {str(root)!r}",
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(root / 'gradebook.db')!r}",
    ]


def class_folder(course, source: pathlib.Path = SOLUTIONS) -> list[str]:
    """Make a class folder usable by every nbgrader command and the Formgrader, run from anywhere.

    A class folder holds ``submitted/`` (and what grading adds).  Without a configuration of its own,
    ``nbgrader export`` run inside it writes nbgrader's CSV without the ``status`` column, and the Formgrader
    opened there finds no assignment.  Where they are missing, this writes ``COURSE/nbgrader_config.py`` (the
    repository's configuration, rooted at the folder) and links ``COURSE/solutions`` to the source folder;
    anything already there is left alone.  Returns the names it wrote.
    """
    course = pathlib.Path(course).resolve()
    written = []
    if not (course / CLASS_CONFIG).exists():
        header = "# this class's nbgrader settings: the repository's, rooted here (written by make grade-class)"
        (course / CLASS_CONFIG).write_text("\n".join([header, *config_lines(course)]) + "\n", encoding="utf-8")
        written.append(CLASS_CONFIG)
    if not (course / "solutions").exists() and pathlib.Path(source).resolve() != (course / "solutions").resolve():
        (course / "solutions").symlink_to(pathlib.Path(source).resolve(), target_is_directory=True)
        written.append("solutions")
    return written


class Course:
    """A temporary nbgrader course rooted at ``root`` (which must exist and should be empty).

    Parameters
    ----------
    root : path
    overrides : dict, optional
        Extra config lines, e.g. ``{"Execute.timeout": 5}``.
    """

    def __init__(self, root, overrides: dict | None = None):
        self.root = pathlib.Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        lines = [*config_lines(self.root), f"c.Exchange.root = {str(self.root / 'exchange')!r}"]
        for key, value in (overrides or {}).items():
            lines.append(f"c.{key} = {value!r}")
        (self.root / "nbgrader_config.py").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def add_sources(self, names=None, source: pathlib.Path = SOLUTIONS) -> list[str]:
        """Copy assignment folders from ``source`` into the course's ``solutions/``; return their ids."""
        names = assignments(source) if names is None else list(names)
        for name in names:
            shutil.copytree(source / name, self.root / "solutions" / name, dirs_exist_ok=True)
        return names

    def nbgrader(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``nbgrader ARGS`` in the course directory with this environment's Python."""
        # nbgrader runs the ``alembic`` console script by name: put this environment's bin/ first.
        env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent),
                                                     os.environ.get("PATH", "")]))
        proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=self.root, env=env,
                              capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise NbgraderError(f"nbgrader {' '.join(args)} 失败 (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        return proc

    def path(self, *parts: str) -> pathlib.Path:
        return self.root.joinpath(*parts)

    def submit(self, assignment: str, student: str, notebook) -> pathlib.Path:
        """File ``notebook`` as ``student``'s submission: ``submitted/<student>/<assignment>/<assignment>.ipynb``.

        ``notebook`` is an nbformat notebook or the file's text (which may be damaged on purpose); returns the path.
        """
        import nbformat  # only the course's users need it, not the release script's import

        dest = self.path("submitted", student, assignment)
        dest.mkdir(parents=True)
        path = dest / f"{assignment}.ipynb"
        if isinstance(notebook, str):
            path.write_text(notebook, encoding="utf-8")
        else:
            nbformat.write(notebook, str(path))
        return path
