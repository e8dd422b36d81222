"""``make lab``'s working copy: released notebooks are copied once, new chapters added, students' work never lost."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, load_script

lab = load_script("lab")
release = load_script("release")


def _fill(path, answer: str) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][-1]["source"] = [answer]
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


def test_a_filled_notebook_survives_release_and_sync(tmp_path):
    released, work = tmp_path / "notebooks", tmp_path / "student-work"
    release.generate(released, ["ch05-softmax"])
    assert [p.relative_to(work).as_posix() for p in lab.sync_working_copy(released, work)] == [
        "ch05-softmax/ch05-softmax.ipynb"]
    mine = work / "ch05-softmax" / "ch05-softmax.ipynb"
    _fill(mine, "我的回答：减去最大值只防溢出。")
    filled = mine.read_bytes()
    # the instructor regenerates the release, and a chapter is added
    release.generate(released, ["ch05-softmax", "ch13-misconceptions"])
    added = lab.sync_working_copy(released, work)
    assert [p.relative_to(work).as_posix() for p in added] == ["ch13-misconceptions/ch13-misconceptions.ipynb"]
    assert mine.read_bytes() == filled, "the student's notebook must never be overwritten"
    assert lab.sync_working_copy(released, work) == []  # nothing new, nothing touched


def test_sync_only_command_prints_the_folder_in_chinese(tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "WORKING_COPY", tmp_path / "student-work")
    monkeypatch.setattr(lab, "RELEASE", ROOT / "notebooks")
    lines = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: lines.append(" ".join(map(str, a))))
    monkeypatch.setattr(lab, "ROOT", tmp_path)
    assert lab.main(["--sync-only"]) == 0
    assert any("你的作业目录是 student-work/" in line for line in lines)
    assert (tmp_path / "student-work" / "ch05-softmax" / "ch05-softmax.ipynb").is_file()


def test_the_working_copy_is_outside_everything_the_repository_regenerates():
    ignored = subprocess.run(["git", "check-ignore", "-q", "student-work/x.ipynb"], cwd=ROOT, check=False)
    assert ignored.returncode == 0, "git must ignore student-work/ so a pull never conflicts with a student's answers"
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    assert "  - student-work\n" in config, "the book must not read the student's notebooks"
    assert lab.WORKING_COPY.name == "student-work" and lab.RELEASE == ROOT / "notebooks"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "lab: $(STAMP)\n\t$(PY) scripts/lab.py" in makefile and sys.executable


def test_a_copied_notebook_names_the_python_of_this_machine(tmp_path):
    """A release made with another Python would open as modified: the copy gets this kernel's language_info."""
    from ipykernel.ipkernel import IPythonKernel

    released, work = tmp_path / "notebooks", tmp_path / "student-work"
    path = released / "ch05-softmax" / "ch05-softmax.ipynb"
    path.parent.mkdir(parents=True)
    nb = json.loads((ROOT / "notebooks" / "ch05-softmax" / "ch05-softmax.ipynb").read_text(encoding="utf-8"))
    nb["metadata"]["language_info"]["version"] = "3.0.0"
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    (copy,) = lab.sync_working_copy(released, work)
    assert json.loads(copy.read_text(encoding="utf-8"))["metadata"]["language_info"] == IPythonKernel.language_info
