"""The student notebooks: generated from solutions/, leak nothing, and fail every test when blank."""

from __future__ import annotations

import importlib.util
import io
import os
import pathlib
import re
import subprocess
import sys

import nbformat
import pytest

from grading import nbgrader_validate

REPO = pathlib.Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
RELEASE = REPO / "notebooks"

pytestmark = pytest.mark.grading


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


release = _load("release_script", REPO / "scripts" / "release.py")
ASSIGNMENTS = release.assignments()
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[^\n]*\n(.*?)^[ \t]*### END HIDDEN TESTS", re.S | re.M)
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION", re.S | re.M)


def notebooks(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(folder.glob("*/*.ipynb"))


def nbgrader_meta(cell) -> dict:
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def released_text(path: pathlib.Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(cell.source for cell in nb.cells)


def nbgrader_cli(*args: str) -> str:
    env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ["PATH"]]))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> pathlib.Path:
    """A fresh generation of every assignment, in a temporary folder."""
    out = tmp_path_factory.mktemp("release")
    assert release.generate(out) == ASSIGNMENTS
    return out


def test_there_is_a_release_for_every_source_and_nothing_else():
    assert "ch05-softmax" in ASSIGNMENTS
    assert sorted(p.name for p in RELEASE.iterdir() if p.is_dir()) == ASSIGNMENTS


def test_committed_release_equals_a_fresh_generation(fresh):
    for name in ASSIGNMENTS:
        committed = sorted(p.relative_to(RELEASE / name) for p in (RELEASE / name).rglob("*") if p.is_file())
        generated = sorted(p.relative_to(fresh / name) for p in (fresh / name).rglob("*") if p.is_file())
        assert committed == generated, f"{name}: 文件列表不同，请运行 make release"
        for path in notebooks(RELEASE):
            if path.parent.name != name:
                continue
            ours = nbformat.read(path, as_version=4)
            theirs = nbformat.read(fresh / name / path.name, as_version=4)
            assert ours.metadata.get("kernelspec") == theirs.metadata.get("kernelspec")
            assert len(ours.cells) == len(theirs.cells), f"{path}: 单元数不同，请运行 make release"
            for a, b in zip(ours.cells, theirs.cells, strict=True):
                assert (a.cell_type, a.source, nbgrader_meta(a)) == (b.cell_type, b.source, nbgrader_meta(b)), \
                    f"{path}: 单元 {nbgrader_meta(a).get('grade_id', a.get('id'))} 与新生成的不同，请运行 make release"


def test_release_notebooks_hold_no_solution_and_no_hidden_test():
    for path in notebooks(RELEASE):
        text = released_text(path)
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
            assert marker not in text, f"{path} 含有 {marker}"
        assert not any(cell.outputs for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")


def _secrets(source: str, region: re.Pattern, visible: str) -> set[str]:
    """Distinctive lines, long numbers and string literals of the regions, absent from ``visible``."""
    found = set()
    for block in region.findall(source):
        found |= {line.strip() for line in block.splitlines() if len(line.strip()) >= 25}
        found |= set(re.findall(r"\d+\.\d{4,}", block))
        found |= {a or b for a, b in re.findall(r'"([^"\\\n]{6,})"|\'([^\'\\\n]{6,})\'', block)}
    return {s for s in found if s not in visible}


def test_release_notebooks_leak_no_hidden_value_or_solution_line():
    for path in notebooks(SOLUTIONS):
        source = released_text(path)
        visible = HIDDEN.sub("", SOLUTION.sub("", source))
        secrets = _secrets(source, HIDDEN, visible) | _secrets(source, SOLUTION, visible)
        if path.parent.name == "ch05-softmax":  # the check really looks: the pilot has hidden literals
            assert "0.8807970779778823" in secrets
        released = released_text(RELEASE / path.parent.name / path.name)
        leaked = sorted(s for s in secrets if s in released)
        assert not leaked, f"{path.parent.name} 的学生版泄露了：{leaked[:5]}"


def _passed(path: pathlib.Path) -> str:
    """What ``nbgrader validate`` says of a source notebook that passes: a quiz's validate only reads the answers'
    format and says so instead of "all passed" (in wrapped lines, so only their start is matched)."""
    return "每道题的答案格式都能读懂" if path.parent.name.startswith("quiz-") else nbgrader_validate.ALL_PASSED


def _validate_every_notebook(folder: pathlib.Path, flags: tuple[str, ...], says) -> None:
    """``nbgrader validate FLAGS`` over every notebook under ``folder`` in one command; each must get ``says(path)``.

    nbgrader starts once for all the notebooks (each still runs in a kernel of its own); only when a message is
    missing is each notebook validated alone, to name the ones that fail.
    """
    paths = notebooks(folder)
    assert {p.parent.name for p in paths} == set(ASSIGNMENTS)
    out = nbgrader_cli("validate", *flags, *map(str, paths))
    wanted = [says(p) for p in paths]
    if all(out.count(message) == wanted.count(message) for message in set(wanted)):
        return
    failing = {p.parent.name: text[-1500:] for p in paths
               if (text := nbgrader_cli("validate", *flags, str(p))).count(says(p)) != 1}
    pytest.fail(f"nbgrader validate {' '.join(flags)} 没有得到预期的结论：{sorted(failing)}\n{failing}\n{out[-3000:]}")


def test_every_source_notebook_passes_nbgrader_validate():
    _validate_every_notebook(SOLUTIONS, (), _passed)


def test_every_release_notebook_fails_every_graded_test():
    _validate_every_notebook(RELEASE, ("--invert",), lambda path: nbgrader_validate.NONE_PASSED)


def test_every_test_cell_states_its_points_and_checks_them_with_the_helpers():
    pilot = nbformat.read(SOLUTIONS / "ch05-softmax" / "ch05-softmax.ipynb", as_version=4)
    tests = [c for c in pilot.cells if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]
    assert len(tests) >= 3
    for cell in tests:
        points = nbgrader_meta(cell)["points"]
        assert f"Checks(points={points}," in cell.source  # partial credit never exceeds the cell's points
        assert cell.source.rstrip().endswith("checks.score()")
        assert "### BEGIN HIDDEN TESTS" in cell.source
        assert 'forbid="softmax"' in cell.source
    written = [c for c in pilot.cells if c.cell_type == "markdown" and nbgrader_meta(c).get("grade")]
    assert written and all(nbgrader_meta(c).get("solution") for c in written)


def test_quiz_answer_cells_are_released_as_an_empty_answer():
    """A solution that is just ``answer = ...`` becomes ``answer = ""``; code exercises keep nbgrader's stub."""
    sys.path.insert(0, str(REPO))
    from grading.nbgrader_release import is_answer_solution

    assert is_answer_solution('# 第 1 题\n### BEGIN SOLUTION\nanswer = "B"\n### END SOLUTION')
    assert not is_answer_solution('### BEGIN SOLUTION\nanswer = "B"\nprint(answer)\n### END SOLUTION')
    assert not is_answer_solution("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION")
    assert not is_answer_solution('answer = "B"')
    for name in ("quiz-sdpa", "quiz-qkv", "quiz-modern", "quiz-frontier", "quiz-practice"):
        nb = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
        answers = [c for c in nb.cells if re.fullmatch(r"q\d\d", c.metadata.get("nbgrader", {}).get("grade_id", ""))]
        assert len(answers) == 10
        assert all(c.source.splitlines()[-1] == 'answer = ""' for c in answers)
    ch05 = nbformat.read(RELEASE / "ch05-softmax" / "ch05-softmax.ipynb", as_version=4)
    assert "raise NotImplementedError()" in "".join(c.source for c in ch05.cells)


def test_kept_samples_read_as_the_current_release():
    """A sample submission is the current release with answers filled in: its fixed cells and checksums match.

    After a change under solutions/: ``make release``, then ``python -m grading.refresh_samples``
    (and ``python -m grading.samples`` for ch05-softmax).
    """
    sys.path.insert(0, str(REPO))
    from grading.refresh_samples import nbgrader_meta as meta
    from grading.refresh_samples import sample_notebooks

    checked = 0
    for name in ASSIGNMENTS:
        released = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
        release = {meta(c).get("grade_id"): c for c in released.cells}
        for path in sample_notebooks(name):
            for cell in nbformat.read(path, as_version=4).cells:
                new = release.get(meta(cell).get("grade_id"))
                if new is None:
                    continue
                checked += 1
                where = f"{path.relative_to(REPO)} 的单元 {meta(cell)['grade_id']}"
                fix = "请运行 python -m grading.refresh_samples"
                assert meta(cell) == meta(new), f"{where} 的 nbgrader 元数据过期，{fix}"
                if not meta(new).get("solution"):
                    assert cell.source == new.source, f"{where} 与学生版不同，{fix}"
    assert checked > 100


@pytest.fixture(scope="module")
def lab_metadata():
    """``kernel name -> metadata JupyterLab writes`` once that kernel runs, asked of a running kernel (cached).

    On opening a notebook, JupyterLab 4 starts its kernel and sets
    ``metadata.kernelspec`` to the spec's name, display name and language and
    ``metadata.language_info`` to the ``language_info`` of the kernel's
    ``kernel_info_reply``; a value not already there (as JSON) marks the
    document modified.  ``release.kernel_metadata`` predicts this without a
    kernel; here the kernel itself answers.  ``tests/test_lab_browser.py``
    checks it in a real JupyterLab.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import start_new_kernel

    answers = {}

    def ask(name: str) -> dict:
        if name not in answers:
            spec = KernelSpecManager().get_kernel_spec(name)
            manager, client = start_new_kernel(kernel_name=name, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
            try:
                info = client.kernel_info(reply=True, timeout=60)["content"]["language_info"]
            finally:
                client.stop_channels()
                manager.shutdown_kernel(now=True)
            answers[name] = {"kernelspec": {"name": name, "display_name": spec.display_name,
                                            "language": spec.language}, "language_info": info}
        return answers[name]
    return ask


def test_a_released_notebook_is_already_what_jupyterlab_keeps(lab_metadata):
    """Opening a released notebook in JupyterLab and saving it changes nothing: it does not open as modified.

    JupyterLab also upgrades nbformat_minor < 5 and gives every cell without one
    an ``id``; the server saves with ``nbformat.write``.  After a change: ``make release``.
    """
    for path in notebooks(RELEASE):
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
        where = f"{path.relative_to(REPO)}：JupyterLab 打开它时会改写"
        assert (nb.nbformat, nb.nbformat_minor) >= (4, 5), f"{where} nbformat_minor，请运行 make release"
        assert all("id" in cell for cell in nb.cells), f"{where}单元的 id，请运行 make release"
        want = lab_metadata(nb.metadata.get("kernelspec", {}).get("name", "python3"))
        for key in ("kernelspec", "language_info"):
            assert nb.metadata.get(key) == want[key], \
                f"{where} metadata.{key}（内核给出 {want[key]}，文件里是 {nb.metadata.get(key)}），请运行 make release"
        saved = io.StringIO()
        nbformat.write(nb, saved, version=nbformat.NO_CONVERT)
        assert saved.getvalue() == text, f"{path.relative_to(REPO)}：保存一次格式就会变，请运行 make release"
