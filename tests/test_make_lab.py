"""``make lab`` started the way the student starts it: as root too, a terminal in the lab, and stopped by SIGTERM.

``scripts/lab.py`` itself is run (what ``make lab`` runs), on a temporary
working copy (its test-only ``--work``), on a loopback port with a known token.
In JupyterLab's terminal (opened through the server's terminal API and
websocket, as the browser does) the student types what every notebook tells
them: ``nbgrader validate chNN.ipynb`` in the notebook's own folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import jupyter_servers
import pytest
from lessons import ROOT

from conftest import load_script

lab = load_script("lab")
pytestmark = pytest.mark.grading
TOKEN = "make-lab-test"
CH05 = "ch05-softmax"
STUDENT_GUIDE = ROOT / "book" / "student-guide.md"


def guide_block(containing: str) -> list[str]:
    """The command lines of the 学生指南's one ``bash`` block that contains ``containing``."""
    blocks = re.findall(r"```bash\n(.*?)```", STUDENT_GUIDE.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if containing in b]
    return [line for line in block.strip().splitlines() if line.strip()]


@contextlib.contextmanager
def make_lab(tmp: pathlib.Path, *extra: str):
    """``scripts/lab.py`` (what ``make lab`` runs) serving a working copy in ``tmp/work``; yields (url, process)."""
    port = jupyter_servers.free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "NBGRADER_EXCHANGE": str(tmp / "none"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"), "BROWSER": "true"}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # make does not put .venv/bin on PATH
    env.pop("JUPYTER_CONFIG_PATH", None)
    log_path = tmp / "lab.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "lab.py"), f"--work={tmp / 'work'}", "--no-browser",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={TOKEN}", *extra],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while jupyter_servers.status(base, TOKEN) != 200:
                assert process.poll() is None and time.monotonic() < deadline, \
                    f"make lab 没有启动 JupyterLab（退出码 {process.poll()}）：\n{log_path.read_text()[-3000:]}"
                time.sleep(0.3)
            yield base, process
        finally:
            if process.poll() is None:
                jupyter_servers.stop(process)


def test_as_root_jupyterlab_gets_allow_root_and_otherwise_not():
    assert "--allow-root" in lab.lab_command([], root=True)
    assert "--allow-root" not in lab.lab_command([], root=False)
    assert lab.lab_command(["--allow-root"], root=True).count("--allow-root") == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="以 root 身份运行 make lab 的检查需要 root")
def test_make_lab_as_root_serves_and_nbgrader_validate_works_in_its_terminal(tmp_path):
    typed = guide_block(f"nbgrader validate {CH05}.ipynb")  # what the 学生指南 says to type in the lab's terminal
    assert typed == [f"cd {CH05}", f"nbgrader validate {CH05}.ipynb"]
    with make_lab(tmp_path) as (base, _):
        typed_line = " && ".join(typed) + '; echo "命令""结束了"'
        out = asyncio.run(jupyter_servers.terminal_output(base, TOKEN, typed_line, "命令结束了\r\n"))
    assert "command not found" not in out and "No nbgrader_config.py" not in out, out[-3000:]
    assert "有 4 个计分的单元还没有拿到满分" in out, out[-3000:]  # the course's Chinese validator
    assert "Partial credit" not in out and "passed some but not all" not in out, out[-3000:]


def test_sigterm_stops_jupyterlab_too(tmp_path):
    with make_lab(tmp_path) as (_, process):
        (server,) = [s for s in _servers(tmp_path / "runtime")]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) is not None
        deadline = time.monotonic() + 30
        while jupyter_servers.alive(server["pid"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not jupyter_servers.alive(server["pid"]), "lab.py 收到 SIGTERM 后 JupyterLab 还在运行"


def _servers(runtime: pathlib.Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in runtime.glob("jpserver-*.json")]


def test_every_table_that_names_make_lab_says_it_opens_the_working_copy():
    """A student who follows any of them answers in student-work/, never in the release folder notebooks/."""
    for page in (ROOT / "README.md", ROOT / "book" / "intro.md"):
        rows = [line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("| `make lab`")]
        assert rows, page
        for row in rows:
            assert "student-work/" in row, (page.name, row)
            assert "在 `notebooks/` 目录上启动" not in row, (page.name, row)
    assert lab.WORKING_COPY.name == "student-work"
