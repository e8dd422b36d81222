"""The fire drill: a class of submissions that try everything that can go wrong in grading.

``tests/test_fire_drill.py`` grades these with ``make grade-class`` (in parallel,
kernels sandboxed as an unprivileged user) and checks that the batch finishes,
that each one is graded as the test states, and that no submission changes
another's score, the gradebook or the course's files.  They are kept in
``grading/fire-drill/<assignment>/<student>/``; rewrite them after a release
changes with::

    .venv/bin/python -m grading.fire_drill

``ch05-softmax`` (the model solution is every student's starting point; each
breaks one thing):

| student          | what it does                                                            |
|------------------|-------------------------------------------------------------------------|
| right            | the model solution                                                      |
| partial          | a partly wrong ``masked_softmax`` (a fully masked row gives nan)        |
| endless          | a loop that never ends inside ``masked_softmax`` (interruptible)        |
| stubborn         | a loop that swallows ``KeyboardInterrupt`` in the exercise-2 cell       |
| hog              | asks for 50 GB in the exercise-3 cell                                   |
| sys_exit         | calls ``sys.exit()`` at the end of the exercise-2 cell                  |
| os_exit          | calls ``os._exit(0)`` at the end of the exercise-2 cell                 |
| deleted_test     | deleted the read-only test cell of exercise 3                           |
| edited_test      | ``partial``'s answers, its read-only test cell edited to print 满分     |
| broken_json      | a file cut in half: not valid JSON                                      |
| other_assignment | the quiz's notebook saved under this assignment's name                  |
| wrong_file       | hands in the quiz's notebook under its own name                         |
| flood            | prints 10 MB in the exercise-2 cell                                     |
| warnings         | correct, with warnings, logging and raw stderr everywhere               |
| delegate         | calls attnlib's reference softmax instead of writing one                |
| snoop            | correct, then tries to read another student's work, write the gradebook |
|                  | and the course folder, read the answers, and become root                |

``quiz-sdpa``: ``formats_ok`` writes the right options (in the letters of its
own variant) in every accepted format, ``formats_bad`` writes eight questions in
rejected formats, ``copied`` hands in ``formats_ok``'s letters as its own (its
options are in another order: it loses the questions whose letters differ).

``snoop``'s cell names the class folder as ``{COURSE}`` and the answers folder
as ``{SOURCE}``; the test puts in the real paths before submitting, as a
student who knows them would.
"""

from __future__ import annotations

import pathlib
import re
import sys

import nbformat

from grading import samples
from grading.course import REPO, SOLUTIONS

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE / "fire-drill"
RELEASE = REPO / "notebooks"
CH05, QUIZ = "ch05-softmax", "quiz-sdpa"
BROKEN_SUFFIX = samples.BROKEN_SUFFIX

STUBBORN = '''

import time

while True:  # Ctrl+C (KeyboardInterrupt) cannot stop it
    try:
        time.sleep(0.05)
    except KeyboardInterrupt:
        print("不停")
'''

HOG = '''
import resource

print("RLIMIT_AS", resource.getrlimit(resource.RLIMIT_AS)[0])
hog = np.ones(50 * 10**9 // 8)  # 50 GB
'''

FLOOD = '''

for _ in range(100_000):  # 100,000 lines of 100 bytes: 10 MB
    print("x" * 99)
'''

SNOOP = '''

import os
import pathlib

COURSE, SOURCE = pathlib.Path("{COURSE}"), pathlib.Path("{SOURCE}")
attempts = {
    "read another student's submission": lambda: list((COURSE / "submitted/right").iterdir()),
    "write the class gradebook": lambda: (COURSE / "gradebook.db").open("ab").write(b"x"),
    "write a file in the course folder": lambda: (COURSE / "nbgrader_config.py").write_text("# mine"),
    "read the grader's gradebook copy": lambda: pathlib.Path("../../../gradebook.db").read_bytes(),
    "read the answers": lambda: (SOURCE / "ch05-softmax/ch05-softmax.ipynb").read_text(),
    "become root": lambda: os.setuid(0),
}
for what, attempt in attempts.items():
    try:
        attempt()
        print("SNOOP OK", what)
    except OSError as exc:
        print("SNOOP DENIED", what, type(exc).__name__)
'''


def ch05_plans(model: dict) -> dict:
    """``{student: answers}`` of the ``ch05-softmax`` drill (answers as for ``samples.fill``)."""
    temperature = model["softmax_temperature"]
    return {
        "right": model,
        "partial": {**model, "masked_softmax": samples.PARTIAL["masked_softmax"]},
        "endless": {**model, **samples.ENDLESS},
        "stubborn": {**model, "softmax_temperature": temperature + STUBBORN},
        "hog": {**model, "masked_softmax": HOG + "\n\n" + model["masked_softmax"]},
        "sys_exit": {**model, "softmax_temperature": temperature + "\n\nimport sys\n\nsys.exit()\n"},
        "os_exit": {**model, "softmax_temperature": temperature + "\n\nimport os\n\nos._exit(0)\n"},
        "flood": {**model, "softmax_temperature": temperature + FLOOD},
        "warnings": samples.NOISY,
        "delegate": samples.CHEAT,
        "snoop": {**model, "softmax_temperature": temperature + SNOOP},
    }


def edit_cells(nb, *, delete: str | None = None, replace: tuple | None = None):
    """``nb`` without the cell ``delete`` and with the cell ``replace[0]`` reading ``replace[1]``."""
    name = lambda c: c.metadata.get("nbgrader", {}).get("grade_id")  # noqa: E731
    nb.cells = [c for c in nb.cells if name(c) != delete]
    for cell in nb.cells:
        if replace and name(cell) == replace[0]:
            cell.source = replace[1]
    return nb


def model_answers(assignment: str) -> dict:
    """The model solution's answer cells, without the solution markers."""
    model = samples.model_solutions(SOLUTIONS / assignment / f"{assignment}.ipynb")
    return {k: re.sub(r"\s*### END SOLUTION\s*$", "\n", v) for k, v in model.items()}


def ch05_fixtures() -> dict:
    """``{student: {file name: notebook or text}}`` of the ``ch05-softmax`` drill."""
    release = RELEASE / CH05 / f"{CH05}.ipynb"
    model = model_answers(CH05)
    quiz = nbformat.read(RELEASE / QUIZ / f"{QUIZ}.ipynb", as_version=4)
    own = f"{CH05}.ipynb"
    out = {student: {own: samples.fill(release, answers)} for student, answers in ch05_plans(model).items()}
    out["deleted_test"] = {own: edit_cells(samples.fill(release, model), delete="test_masked_softmax")}
    out["edited_test"] = {own: edit_cells(samples.fill(release, ch05_plans(model)["partial"]),
                                          replace=("test_masked_softmax", "print('满分')\n3.0"))}
    text = nbformat.writes(samples.fill(release, model))
    out["broken_json"] = {own + BROKEN_SUFFIX: text[: len(text) // 2]}
    out["other_assignment"] = {own: quiz}
    out["wrong_file"] = {f"{QUIZ}.ipynb": quiz}
    return out


#: Accepted ways to write each answer, applied to the key (a string of letters) in turn.
ACCEPTED = [
    lambda k: repr(k.lower()), lambda k: repr(" ".join(k)), lambda k: repr("，".join(k)),
    lambda k: repr(list(k)), lambda k: repr("、".join(reversed(k))), lambda k: repr(tuple(k)),
    lambda k: repr("".join(chr(ord(ch) + 0xFEE0) for ch in k)),  # full-width letters
    lambda k: repr(f"  {'; '.join(k)}  "), lambda k: "{" + ", ".join(repr(ch.lower()) for ch in k) + "}",
    lambda k: repr(",".join(k)),
]
#: Rejected answers (the first eight questions); the last two are answered right.
REJECTED = ["2", '"E"', '"答案B"', "None", '""', 'b"B"', '["A", 2]', '"AA"']


def quiz_keys(student: str | None = None) -> dict:
    """``{question id: key letters}`` as ``student`` sees them (None: canonical), from the quiz's source.

    The hidden ``quiz.grade(...)`` calls are the only place the keys live; a question with variants
    (``question=Q1``) shows them in the student's own letters (``attnlib.variants``).
    """
    from attnlib import variants
    from grading.analysis.loading import grade_call

    keys = {}
    for cell in nbformat.read(SOLUTIONS / QUIZ / f"{QUIZ}.ipynb", as_version=4).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        call = grade_call(cell.source) if grade_id.endswith("_test") else None
        if call:
            order = variants.order(student, QUIZ, call["number"], len(call["explanations"]))
            keys[grade_id.removesuffix("_test")] = (variants.canonical_to_shown(call["key"], order)
                                                    if "question" in call else call["key"])
    return keys


def quiz_fixtures() -> dict:
    """``{student: {file name: notebook}}`` of the ``quiz-sdpa`` drill."""
    release = RELEASE / QUIZ / f"{QUIZ}.ipynb"
    ok = {q: f"answer = {ACCEPTED[i % len(ACCEPTED)](k)}"
          for i, (q, k) in enumerate(sorted(quiz_keys("formats_ok").items()))}
    bad = {q: f"answer = {REJECTED[i]}" if i < len(REJECTED) else f'answer = "{k}"'
           for i, (q, k) in enumerate(sorted(quiz_keys("formats_bad").items()))}
    own = f"{QUIZ}.ipynb"
    return {"formats_ok": {own: samples.fill(release, ok)}, "formats_bad": {own: samples.fill(release, bad)},
            "copied": {own: samples.fill(release, ok)}}


def write_fixtures(dest: pathlib.Path = FIXTURES) -> list[pathlib.Path]:
    """Write every drill submission under ``dest/<assignment>/<student>/``; return the files."""
    written = []
    for assignment, fixtures in ((CH05, ch05_fixtures()), (QUIZ, quiz_fixtures())):
        for student, files in fixtures.items():
            folder = dest / assignment / student
            folder.mkdir(parents=True, exist_ok=True)
            for name, content in files.items():
                text = content if isinstance(content, str) else nbformat.writes(content)
                (folder / name).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
                written.append(folder / name)
    return written


def submit(assignment: str, submitted: pathlib.Path, substitutions: dict | None = None) -> list[str]:
    """Copy the kept drill of ``assignment`` into ``submitted/<student>/<assignment>/``; return the students.

    ``substitutions`` maps placeholders such as ``{COURSE}`` to text, replaced in every file.
    """
    students = []
    for folder in sorted((FIXTURES / assignment).iterdir()):
        dest = submitted / folder.name / assignment
        dest.mkdir(parents=True)
        for path in folder.iterdir():
            text = path.read_text(encoding="utf-8")
            for key, value in (substitutions or {}).items():
                text = text.replace(key, value)
            dest.joinpath(path.name.removesuffix(BROKEN_SUFFIX)).write_text(text, encoding="utf-8")
        students.append(folder.name)
    return students


if __name__ == "__main__":
    for path in write_fixtures():
        print(path.relative_to(REPO))
    sys.exit(0)
