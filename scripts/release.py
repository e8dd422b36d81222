"""Regenerate the student notebooks ``notebooks/<assignment>/`` from ``solutions/<assignment>/``.

``make release`` runs this.  Every assignment under ``solutions/`` is generated
by ``nbgrader generate_assignment`` in a temporary course directory (so no
gradebook lands in the repository), and the result replaces the committed
release folder.  ``tests/test_release.py`` checks that the committed
``notebooks/`` equals a fresh generation.

Each released notebook is then written in the form JupyterLab keeps: when a
notebook opens, JupyterLab starts its kernel and writes the kernel's
``language_info`` (name, version, mimetype, lexers ...) and its kernelspec into
the notebook's metadata, and any difference marks the document as modified
before the student has typed anything.  nbgrader copies the sources' short
``{"name": "python"}``, so the release carries what :func:`kernel_metadata`
says the kernel will answer.  ``make lab`` applies the same function to each
notebook it copies, since ``language_info`` names the Python version.
"""

from __future__ import annotations

import pathlib
import shutil
import sys
import tempfile

import nbformat

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from grading.course import RELEASE, SOLUTIONS, Course, assignments  # noqa: E402


def kernel_metadata(kernel_name: str) -> dict:
    """The notebook metadata JupyterLab writes once the kernel ``kernel_name`` is running.

    JupyterLab's notebook panel sets ``kernelspec`` to the spec's name, display
    name and language, and ``language_info`` to the ``language_info`` of the
    kernel's ``kernel_info_reply``; the document becomes dirty unless both are
    already there, equal as JSON.  The course's kernel is ipykernel in this
    environment, which answers with its class attribute
    ``IPythonKernel.language_info``, so no kernel has to start
    (``tests/test_release.py`` asks a running kernel and compares).

    Returns
    -------
    dict
        ``{"kernelspec": {...}, "language_info": {...}}``.

    Raises
    ------
    ValueError
        The kernel ``kernel_name`` is not ipykernel.
    """
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(kernel_name)
    if "ipykernel" not in " ".join(spec.argv):
        raise ValueError(f"kernel {kernel_name!r} is not ipykernel: {spec.argv}")
    return {"kernelspec": {"name": kernel_name, "display_name": spec.display_name, "language": spec.language},
            "language_info": dict(IPythonKernel.language_info)}


def as_jupyterlab_keeps(path: pathlib.Path, known: dict) -> None:
    """Rewrite the notebook at ``path`` with the kernel metadata JupyterLab would write into it.

    ``known`` caches :func:`kernel_metadata` by kernel name across notebooks.
    The file is written as the Jupyter server saves a notebook (``nbformat.write``).
    """
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    name = nb.metadata.get("kernelspec", {}).get("name", "python3")
    if name not in known:
        known[name] = kernel_metadata(name)
    nb.metadata.update(known[name])
    nbformat.write(nb, path, version=nbformat.NO_CONVERT)


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
    known: dict = {}
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
            for notebook in sorted(out.rglob("*.ipynb")):  # opened in JupyterLab, they stay unmodified
                as_jupyterlab_keeps(notebook, known)
    return names


def main(argv: list[str] | None = None) -> int:
    """Regenerate every assignment, or only those named on the command line (``release.py ch16-gqa``)."""
    argv = sys.argv[1:] if argv is None else argv
    names = assignments()
    unknown = sorted(set(argv) - set(names))
    if unknown:
        print(f"solutions/ 中没有这些作业：{', '.join(unknown)}", file=sys.stderr)
        return 2
    if argv:
        generate(RELEASE, sorted(argv))
        for name in sorted(argv):
            print(f"已生成学生版 notebooks/{name}/")
        return 0
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
