"""Write the sample submissions of ``ch05-softmax`` kept in ``grading/samples/``.

Each sample is the release notebook with its answer cells filled in the way a
particular (imaginary) student would; ``make grade`` and
``tests/test_grading.py`` grade them.  Rerun after the assignment changes::

    .venv/bin/python -m grading.samples

| student      | what it shows                                                       |
|--------------|---------------------------------------------------------------------|
| blank        | the release notebook as handed out, nothing filled in: 0 everywhere  |
| correct      | the model solution                                                  |
| partial      | naive exp without the max shift, no temperature check: partial credit |
| crash        | an exception in a solution cell (the function is never defined)      |
| endless      | an infinite loop in exercise 3: that cell times out, the rest counts |
| noisy        | correct, but writes warnings, logging and stderr output everywhere   |
| cheat        | calls attnlib's reference softmax (directly, aliased, via a helper)  |
| broken_json  | a file that is not valid JSON: skipped, the others are still graded  |

A sample file named ``X.ipynb.broken`` is submitted as ``X.ipynb``.
"""

from __future__ import annotations

import pathlib
import re

import nbformat

ASSIGNMENT = "ch05-softmax"
HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
SAMPLES = HERE / "samples" / ASSIGNMENT
BROKEN_SUFFIX = ".broken"

ANSWER = ("减去最大值只是防止 `np.exp` 溢出，结果不变；它不能防止饱和，因为分数之间的差距没变，"
          "例如 [0, 20] 和 [-20, 0] 的权重都约为 [2e-9, 1]。")

PARTIAL = {
    "softmax_stable": '''
def softmax_stable(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)
''',
    "softmax_temperature": '''
def softmax_temperature(x, temperature, axis=-1):
    return softmax_stable(x / temperature, axis=axis)
''',
    "masked_softmax": '''
def masked_softmax(x, mask, axis=-1):
    return softmax_stable(np.where(mask, x, -np.inf), axis=axis)
''',
}

CRASH = {
    "softmax_stable": '''
from numpy import logsumexp  # numpy has no such function: ImportError, nothing below runs


def softmax_stable(x, axis=-1):
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))
''',
    "softmax_temperature": '''
def softmax_temperature(x, temperature, axis=-1):
    if temperature <= 0:
        raise ValueError("温度必须为正数")
    return softmax_stable(np.asarray(x) / temperature, axis=axis)
''',
}

ENDLESS = {
    "masked_softmax": '''
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=float)
    w = np.where(mask, np.exp(x - x.max(axis=axis, keepdims=True)), 0.0)
    # renormalise until every slice sums to 1 -- a fully masked row never does
    while not np.allclose(w.sum(axis=axis), 1.0):
        w = w / w.sum(axis=axis, keepdims=True)
    return w
''',
}

NOISY = {
    "softmax_stable": '''
import logging
import os
import sys
import warnings


def softmax_stable(x, axis=-1):
    warnings.warn("softmax_stable: 正在计算", UserWarning, stacklevel=2)
    print("调试 shape:", np.shape(x), file=sys.stderr)
    os.write(2, b"fd 2: raw bytes\\n")
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
''',
    "softmax_temperature": '''
def softmax_temperature(x, temperature, axis=-1):
    sys.stderr.write(f"temperature = {temperature!r}\\n")
    warnings.warn("old API", DeprecationWarning, stacklevel=2)
    logging.warning("logging 也写到 stderr")
    if not temperature > 0:
        raise ValueError("temperature 必须大于 0")
    return softmax_stable(np.asarray(x, dtype=float) / temperature, axis=axis)
''',
    "masked_softmax": '''
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=float)
    scores = x + np.log(np.broadcast_to(mask, x.shape).astype(float))  # log(0) warns: divide by zero
    top = np.max(scores, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
''',
}

CHEAT = {
    "softmax_stable": '''
from attnlib.numpy import softmax as _softmax


def softmax_stable(x, axis=-1):
    return _softmax(x, axis=axis)
''',
    "softmax_temperature": '''
import attnlib.numpy as anp


def softmax_temperature(x, temperature, axis=-1):
    return anp.softmax(x, axis=axis, temperature=temperature)
''',
    "masked_softmax": '''
def _helper(x, mask, axis):
    return _softmax(x, axis=axis, mask=mask)

def masked_softmax(x, mask, axis=-1):
    try:
        return _helper(x, mask, axis)
    except Exception:
        return np.zeros(np.shape(x))
''',
}


def model_solutions(source: pathlib.Path) -> dict:
    """The solution cells of the source notebook, without the solution markers."""
    nb = nbformat.read(source, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            out[meta["grade_id"]] = re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", cell.source, flags=re.M)
    return out


def fill(release: pathlib.Path, answers: dict, written: str | None = ANSWER):
    """The release notebook with the solution cells named in ``answers`` replaced."""
    nb = nbformat.read(release, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("solution"):
            continue
        if cell.cell_type == "code" and meta["grade_id"] in answers:
            cell.source = answers[meta["grade_id"]].strip("\n")
        elif cell.cell_type == "markdown" and written is not None:
            cell.source = written
    return nb


def write_samples(dest: pathlib.Path = SAMPLES) -> list[str]:
    """Write every sample submission under ``dest/<student>/``; return the student ids."""
    release = REPO / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    model = model_solutions(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    plans = {
        "blank": None,
        "correct": model,
        "partial": PARTIAL,
        "crash": {**model, **CRASH},
        "endless": {**model, **ENDLESS},
        "noisy": NOISY,
        "cheat": CHEAT,
    }
    for student, answers in plans.items():
        path = dest / student / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(fill(release, {}, None) if answers is None else fill(release, answers), path)
    # Stored as *.ipynb.broken so that linters and Jupyter leave it alone; submitted as *.ipynb.
    broken = dest / "broken_json" / f"{ASSIGNMENT}.ipynb{BROKEN_SUFFIX}"
    broken.parent.mkdir(parents=True, exist_ok=True)
    text = nbformat.writes(fill(release, model))
    broken.write_text(text[: len(text) // 2], encoding="utf-8")  # cut mid-file: not valid JSON
    return [*plans, "broken_json"]


if __name__ == "__main__":
    for name in write_samples():
        print(f"grading/samples/{ASSIGNMENT}/{name}/")
