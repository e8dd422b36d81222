"""Bring the kept sample submissions up to date with the released notebooks, keeping the students' answers.

After an assignment's instructions or tests change (and ``make release`` has
regenerated ``notebooks/``), every cell of a sample that a student cannot
change (instructions, test cells) must read as in the new release and carry
its new checksum, while every cell a student answers keeps the sample's
answer.  Run::

    .venv/bin/python -m grading.refresh_samples [assignment ...]

(default: every assignment with samples).  ``ch05-softmax``'s samples are
written from scratch by ``python -m grading.samples`` instead.

A quiz's sample is rebuilt from the release instead (:func:`rebuild`): a new
locked cell, such as the ``qNN_show`` cell that shows a question's options,
arrives with it.  A quiz sample is submitted under its folder's name as the
student id, so its answers are written in the letters that student sees
(:func:`attnlib.variants.order` gives them); rebuilding keeps them as they are.
"""

from __future__ import annotations

import copy
import pathlib
import sys

import nbformat

HERE = pathlib.Path(__file__).resolve().parent
SAMPLES = HERE / "samples"
RELEASE = HERE.parent / "notebooks"


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def refresh(sample: nbformat.NotebookNode, release: nbformat.NotebookNode) -> int:
    """Copy the release's fixed cells (and every cell's nbgrader metadata) into ``sample``; return cells changed."""
    released = {nbgrader_meta(c)["grade_id"]: c for c in release.cells if nbgrader_meta(c).get("grade_id")}
    changed = 0
    for cell in sample.cells:
        new = released.get(nbgrader_meta(cell).get("grade_id"))
        if new is None:
            continue
        before = (cell.source, dict(cell.metadata))
        cell.metadata["nbgrader"] = copy.deepcopy(new.metadata["nbgrader"])
        if not nbgrader_meta(new).get("solution"):  # instructions and tests: the student cannot change them
            cell.source = new.source
        changed += before != (cell.source, dict(cell.metadata))
    return changed


def rebuild(sample: nbformat.NotebookNode, release: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release notebook with the answer (solution) cells of ``sample`` put in, matched by grade id."""
    answers = {nbgrader_meta(c)["grade_id"]: c.source for c in sample.cells
               if nbgrader_meta(c).get("solution") and nbgrader_meta(c).get("grade_id")}
    rebuilt = copy.deepcopy(release)
    for cell in rebuilt.cells:
        if nbgrader_meta(cell).get("solution") and nbgrader_meta(cell)["grade_id"] in answers:
            cell.source = answers[nbgrader_meta(cell)["grade_id"]]
    return rebuilt


def sample_notebooks(assignment: str) -> list[pathlib.Path]:
    """Every readable sample notebook of ``assignment`` (the deliberately broken JSON file is left alone)."""
    return sorted((SAMPLES / assignment).glob(f"*/{assignment}.ipynb"))


def main(argv: list[str]) -> int:
    names = argv or sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and p.name != "ch05-softmax")
    for name in names:
        release = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
        for path in sample_notebooks(name):
            sample = nbformat.read(path, as_version=4)
            if name.startswith("quiz-"):
                rebuilt = rebuild(sample, release)
                n = int(rebuilt != sample)
                if n:
                    nbformat.write(rebuilt, path)
                print(f"{path.relative_to(HERE.parent)}: {'已按学生版重建' if n else '没有变化'}")
                continue
            n = refresh(sample, release)
            if n:
                nbformat.write(sample, path)
            print(f"{path.relative_to(HERE.parent)}: {n} 个单元已更新")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
