"""Autograde cost of the pilot assignment: seconds per submission, and nbgrader's overhead.

Grades ``N`` copies of the correct sample of ``ch05-softmax`` in a temporary
course directory and compares the time per submission with executing the same
notebook directly (nbclient, one fresh kernel), so the ratio shows what
nbgrader adds (gradebook, checksums, cell overwriting) on top of running it.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

REPO = pathlib.Path(__file__).resolve().parent.parent
ASSIGNMENT = "ch05-softmax"
SAMPLE = REPO / "grading" / "samples" / ASSIGNMENT / "correct"
N = 4


def _grade_samples():
    spec = importlib.util.spec_from_file_location("grade_samples", REPO / "scripts" / "grade_samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def execute_seconds(path: pathlib.Path) -> float:
    """Wall time to execute one notebook in a fresh kernel."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True).execute()
    return time.perf_counter() - start


def main() -> None:
    grade_samples = _grade_samples()
    with tempfile.TemporaryDirectory(prefix="attn-bench-") as tmp:
        samples = pathlib.Path(tmp) / "samples"
        for i in range(N):
            shutil.copytree(SAMPLE, samples / ASSIGNMENT / f"student{i + 1}")
        report = grade_samples.run_chain(pathlib.Path(tmp) / "course", [ASSIGNMENT], samples=samples)
        seconds, count = report.autograde_seconds[ASSIGNMENT]
        assert all(r.score == 8.0 for r in report.results), "the correct sample must score 8"
        direct = execute_seconds(SAMPLE / f"{ASSIGNMENT}.ipynb")
    per = seconds / count
    print(f"autograde {ASSIGNMENT}: {count} submissions in {seconds:.1f} s = {per:.2f} s per submission")
    print(f"plain execution of one submission (nbclient): {direct:.2f} s")
    print(f"ratio autograde / plain execution: {per / direct:.2f}")


if __name__ == "__main__":
    main()
