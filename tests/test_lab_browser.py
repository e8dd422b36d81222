"""A released notebook opened in the student's real JupyterLab is not marked modified before anyone types.

JupyterLab starts a notebook's kernel when the notebook opens and writes the
kernel's ``language_info`` and kernelspec into the notebook's metadata; if the
file did not already hold exactly that, the document is dirty at once (the
tab shows the "modified" dot and closing it asks to save).  ``make release``
writes what the kernel answers (``scripts/release.py``), and this test checks
it the way a student meets it: JupyterLab started as ``make lab`` starts it
(``scripts/lab.py``: same command, environment and working directory), on a
copy of released notebooks, in the system's headless Chromium driven by
Playwright (``tests/jupyter_servers.chromium``).  Each notebook is opened, its kernel waited for until JupyterLab has
applied the kernel's metadata, and the document's dirty flag read.

``make test`` installs Chromium when it runs as root; elsewhere this test is
skipped with the command that installs it (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import shutil
import tempfile

import jupyter_servers
import pytest
from lessons import ROOT

from conftest import load_script

lab = load_script("lab")
pytestmark = [pytest.mark.browser, pytest.mark.grading]

TOKEN = "lab-browser-test"
#: A chapter exercise and a quiz: the two kinds of released notebook.
OPENED = ("ch05-softmax/ch05-softmax.ipynb", "quiz-sdpa/quiz-sdpa.ipynb")

#: Opens each notebook in the page's JupyterLab and reports, once JupyterLab has written the
#: kernel's language_info and kernelspec into the model, whether the document is dirty.
OPEN_AND_READ = """
(async (paths) => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const deadline = Date.now() + 60000;
  while (!window.jupyterapp) {
    if (Date.now() > deadline) return JSON.stringify({error: "JupyterLab did not start"});
    await sleep(100);
  }
  const app = window.jupyterapp;
  await app.restored;
  const sorted = (key, value) => (value && typeof value === "object" && !Array.isArray(value))
    ? Object.fromEntries(Object.entries(value).sort()) : value;
  const same = (a, b) => JSON.stringify(a, sorted) === JSON.stringify(b, sorted);
  const open = async (path) => {
    const panel = await app.commands.execute("docmanager:open", {path, factory: "Notebook"});
    await panel.context.ready;
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session.kernel;
    const info = await kernel.info;
    const spec = await kernel.spec;
    const model = panel.context.model;
    while (!(same(model.getMetadata("language_info"), info.language_info)
             && (model.getMetadata("kernelspec") || {}).display_name === spec.display_name)) {
      if (Date.now() > deadline) break;
      await sleep(100);
    }
    await sleep(300);  // anything else touching the model on load has had its turn
    return [path, {dirty: model.dirty, language_info: model.getMetadata("language_info")}];
  };
  const report = Object.fromEntries(await Promise.all(paths.map(open)));  // the kernels start side by side
  return JSON.stringify(report);
})
"""


@contextlib.contextmanager
def student_lab(released: pathlib.Path, tmp: pathlib.Path):
    """JupyterLab as ``make lab`` starts it, on a copy of ``released``; yields its base URL; always stopped."""
    work = tmp / "work"
    for path in OPENED:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(released / path, work / path)
    expose = ["--LabApp.expose_app_in_browser=True"]  # window.jupyterapp, for the probe
    with jupyter_servers.lab_server(work, tmp, lab.student_environment(), TOKEN, expose) as base:
        yield base


def open_in_student_lab(released: pathlib.Path) -> dict:
    """``{path: {"dirty": bool, "language_info": ...}}`` for each of :data:`OPENED` opened in a real JupyterLab."""
    with tempfile.TemporaryDirectory(prefix="lab-browser-") as name:
        tmp = pathlib.Path(name)
        with student_lab(released, tmp) as base, jupyter_servers.chromium() as page:
            page.goto(f"{base}/lab?token={TOKEN}", wait_until="domcontentloaded")
            # the probe runs in the lab's document once JupyterLab has exposed itself (it waits for it too)
            page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
            value = page.evaluate(f"{OPEN_AND_READ}({json.dumps(OPENED)})")
    report = json.loads(value)
    assert "error" not in report, report
    return report


def test_a_released_notebook_opens_unmodified_in_the_students_jupyterlab():
    report = open_in_student_lab(ROOT / "notebooks")
    assert sorted(report) == sorted(OPENED)
    dirty = {path: seen["language_info"] for path, seen in report.items() if seen["dirty"]}
    assert not dirty, f"这些笔记本一打开就显示为已修改，请运行 make release（JupyterLab 写入的 language_info）：{dirty}"
