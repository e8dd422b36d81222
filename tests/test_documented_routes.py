"""The guides' longer routes, typed exactly as written, in throw-away copies of the checkout.

* The 教师指南's nbgrader command line, end to end, with a local exchange directory in a temporary folder
  (``$NBGRADER_EXCHANGE``, the course config's ``Exchange.root``): in the instructor's course directory
  ``~/attention-zh`` (a copy of the repository, as the guide builds it) ``generate_assignment`` and
  ``release_assignment``; two students ``fetch_assignment`` and ``submit`` (the 学生指南's lines) from their
  homes; the instructor ``collect``\\s, ``autograde``\\s, ``generate_feedback`` and ``release_feedback``; then the
  评分 section's route from a repository root after ``source .venv/bin/activate``: ``collect``,
  ``generate_assignment``, ``autograde``, ``generate_feedback``, ``export``.  Checked: nbgrader finishes every
  step without an error, the gradebook holds the right score for each student, the feedback pages are the
  course's Chinese offline pages (no remote asset, no English nbgrader template), ``grades.csv`` has the status
  column.
* ``make release`` in a copy (the release it writes is byte for byte the committed ``notebooks/``),
  ``make grade`` from the repository root (it works in a temporary course: the checkout must stay unchanged),
  ``make lab`` in a copy as root, typed in a terminal (a pseudo-terminal) and stopped by one Ctrl+C typed into
  it, and, in a copy owned by ``nobody``, as an ordinary user with no terminal (one SIGINT to its process group)
  who first types the 学生指南's two lines in the lab's terminal.  Either way one Ctrl+C must stop ``make lab``
  and JupyterLab within :data:`CTRL_C_BOUND` seconds, without jupyter_server's shutdown question.

Shell commands are run with a login shell's ``PATH`` (no ``.venv/bin``), as a reader's terminal has.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pathlib
import pty
import re
import shutil
import signal
import socket
import subprocess
import termios
import time
import urllib.request

import jupyter_servers
import nbformat
import pytest
from checkout_copy import REPO, as_user, copy_checkout, reachable_tmp
from test_documented_commands import ENGLISH_FALLBACK, REMOTE, _bash_blocks, _plain_env, _spans, normalise

from conftest import load_script

lab = load_script("lab")

pytestmark = pytest.mark.grading
GUIDE = REPO / "book" / "instructor-guide.md"
STUDENT_GUIDE = REPO / "book" / "student-guide.md"
ASSIGNMENT = "ch05-softmax"
COURSE_ID = "attention-zh"
NBGRADER_ERROR = re.compile(r"\| ERROR\]|\[\w+App\] ERROR|^Traceback|NbGraderException|MissingEntry", re.M)
ENGLISH_PAGE = ("Test cell", "Student's answer", "Score:", "(Top)", "Comments:", "No response", "Written response")


def _block(page: pathlib.Path, containing: str) -> list[str]:
    """The command lines (comments dropped) of the one ``bash`` block on ``page`` holding ``containing``."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S)
    (block,) = [b for b in blocks if containing in b]
    return [c for c in _bash_blocks(f"```bash\n{block}```\n") if not c.startswith("#")]


def _span(page: pathlib.Path, pattern: str) -> str:
    (hit,) = {normalise(s) for s in _spans(page.read_text(encoding="utf-8")) if re.fullmatch(pattern, normalise(s))}
    return hit


def _shell(command: str, *, cwd: pathlib.Path, env: dict, timeout: int = 600) -> str:
    run = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout, check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"$ {command}\n{out[-4000:]}"
    assert not NBGRADER_ERROR.search(out), f"$ {command}\n{out[-4000:]}"
    return out


def _answer_everything(notebook: pathlib.Path) -> None:
    """Fill every answer cell of a fetched notebook with the reference solution (what a strong student writes)."""
    solution = nbformat.read(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    nbformat.write(nb, notebook)


def _scores(gradebook: pathlib.Path) -> dict[str, float]:
    """Each student's total score for the assignment, read from the gradebook with nbgrader's own API."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{gradebook}") as gb:
        return {s.student.id: round(s.score, 2) for s in gb.find_assignment(ASSIGNMENT).submissions}


def _check_feedback_page(page: pathlib.Path) -> None:
    text = page.read_text(encoding="utf-8")
    visible = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S))
    assert "总分" in visible and not [w for w in ENGLISH_PAGE if w in visible], page
    assert not REMOTE.search(text), f"{page} 引用了其他网站的资源"


@pytest.mark.slow
def test_the_nbgrader_command_line_route_of_the_instructor_guide_as_written(tmp_path):
    homes, exchange = tmp_path / "home", tmp_path / "exchange"
    exchange.mkdir(mode=0o777)
    instructor = homes / "instructor"
    course = copy_checkout(instructor / COURSE_ID)  # "本仓库私有副本的一份拷贝"
    (instructor / ".jupyter").mkdir()
    (instructor / ".jupyter" / "nbgrader_config.py").write_text(  # the guide's one line, with this course's path
        f"load_subconfig({str(course / 'nbgrader_config.py')!r})\n", encoding="utf-8")
    hub_path = os.pathsep.join([str(REPO / ".venv" / "bin"), "/usr/local/bin:/usr/bin:/bin"])

    def terminal(user: str) -> dict:
        """The environment of a terminal in ``user``'s single-user server (grading/hub/jupyterhub_config.py)."""
        student = user != "instructor"
        config = [str(REPO / "grading" / "student_lab")] * student + [str(REPO / "grading" / "hub")]
        env = dict(_plain_env(), HOME=str(homes / user), PATH=hub_path, NBGRADER_EXCHANGE=str(exchange),
                   JUPYTER_CONFIG_PATH=os.pathsep.join(config), NBGRADER_STUDENT_ID=user if student else "")
        (homes / user).mkdir(parents=True, exist_ok=True)
        return env

    hub = _block(GUIDE, "cd ~/attention-zh")
    assert hub[0] == "cd ~/attention-zh" and len(hub) == 7, hub
    cd, generate, release, collect, autograde, feedback, give_back = hub
    assert all(re.fullmatch(rf"nbgrader \w+ {ASSIGNMENT} --course {COURSE_ID}( --force)?", c) for c in hub[1:]), hub
    out = _shell(" && ".join([cd, generate, release]), cwd=instructor, env=terminal("instructor"))
    assert "Released as" in out and "Skipping existing assignment" not in out, out[-3000:]

    fetch = _span(STUDENT_GUIDE, rf"nbgrader fetch_assignment {ASSIGNMENT} --course {COURSE_ID}")
    submit = _span(STUDENT_GUIDE, rf"nbgrader submit {ASSIGNMENT} --course {COURSE_ID}")
    for student in ("student1", "student2"):
        env = terminal(student)
        _shell(fetch, cwd=homes / student, env=env)
        fetched = homes / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        if student == "student1":
            _answer_everything(fetched)  # student2 hands in the blank release
        _shell(submit, cwd=homes / student, env=env)

    _shell(" && ".join([cd, collect, autograde, feedback, give_back]), cwd=instructor, env=terminal("instructor"))
    # every code exercise right: all but the written answer (2 points, awaiting manual grading); blank: nothing
    assert _scores(course / "gradebook.db") == {"student1": 8.0, "student2": 0.0}
    for student in ("student1", "student2"):
        (page,) = course.glob(f"feedback/{student}/{ASSIGNMENT}/*.html")
        _check_feedback_page(page)
    released = sorted(exchange.glob(f"{COURSE_ID}/feedback/*.html"))  # release_feedback: one page per submission
    assert len(released) == 2, released
    for given in released:
        _check_feedback_page(given)

    # the 评分 section: from a repository root, after `source .venv/bin/activate`, with the same exchange
    root = copy_checkout(tmp_path / "repo")
    activate = _span(GUIDE, r"source \.venv/bin/activate")
    grading = _block(GUIDE, "把成绩库导出为 grades.csv")
    collect_here = _span(GUIDE, r"nbgrader collect <练习编号>").replace("<练习编号>", ASSIGNMENT)
    env = dict(_plain_env(), HOME=str(tmp_path / "home" / "grader"), NBGRADER_EXCHANGE=str(exchange))
    (tmp_path / "home" / "grader").mkdir()
    out = _shell(" && ".join([activate, collect_here, *grading]), cwd=root, env=env)
    assert not ENGLISH_FALLBACK.search(out), out[-3000:]
    assert _scores(root / "gradebook.db") == {"student1": 8.0, "student2": 0.0}
    for student in ("student1", "student2"):
        (page,) = root.glob(f"feedback/{student}/{ASSIGNMENT}/*.html")
        _check_feedback_page(page)
    rows = (root / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0].split(",")[-1] == "status", rows
    mine = sorted(r for r in rows[1:] if f"{ASSIGNMENT}," in r)
    assert [r.split(",")[-1] for r in mine] == ["待人工批改", "已评分"], mine  # a blank written answer needs no grader


def test_make_release_as_written(tmp_path):
    copy = copy_checkout(tmp_path / "repo")
    started = time.monotonic()
    out = _shell("make release", cwd=copy, env=_plain_env())
    assert f"已生成学生版 notebooks/{ASSIGNMENT}/" in out and time.monotonic() - started < 300, out[-2000:]
    fresh = {p.relative_to(copy / "notebooks"): p.read_bytes() for p in (copy / "notebooks").rglob("*") if p.is_file()}
    committed = {p.relative_to(REPO / "notebooks"): p.read_bytes() for p in (REPO / "notebooks").rglob("*")
                 if p.is_file() and ".ipynb_checkpoints" not in p.parts}
    assert fresh.keys() == committed.keys()
    assert [str(p) for p in fresh if fresh[p] != committed[p]] == []


NBGRADER_LEFTOVERS = ("gradebook.db", "submitted", "autograded", "feedback", ".nbgrader.log", "grades.csv", "reports")


def _leftovers() -> dict[str, float]:
    """What nbgrader writes when run in the repository root, with modification times."""
    return {name: (REPO / name).stat().st_mtime for name in NBGRADER_LEFTOVERS if (REPO / name).exists()}


@pytest.mark.slow
def test_make_grade_as_written():
    """``make grade`` from the repository root: the score table of every sample; nothing left in the checkout."""
    before = _leftovers()
    out = _shell("make grade", cwd=REPO, env=_plain_env(), timeout=900)
    for assignment in ("ch05-softmax", "quiz-sdpa"):
        assert f"== {assignment} ==" in out, out[-3000:]
    assert "学生 student" in out and "无法评分" in out and not ENGLISH_FALLBACK.search(out), out[-3000:]
    assert _leftovers() == before, "make grade 在检出目录里留下了 nbgrader 的文件"


# --------------------------------------------------------------------------- make lab

def _lab_env(tmp: pathlib.Path, home: pathlib.Path) -> dict:
    return dict(_plain_env(), HOME=str(home), BROWSER="true", JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
                NBGRADER_EXCHANGE=str(tmp / "no-exchange"))


def _in_a_terminal():
    """For Popen's ``preexec_fn``: a new session whose controlling terminal is its stdin (a terminal).

    The child's process group is the terminal's foreground group, as for a command typed at a prompt: the
    character Ctrl+C written to the terminal sends SIGINT to that group, and ``sys.stdin.isatty()`` is true
    (jupyter_server then asks "Shut down this Jupyter server (y/[n])?" on a Ctrl+C it receives itself).
    """
    def setup():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    return setup


def _serve(args: list[str], cwd: pathlib.Path, env: dict, runtime: pathlib.Path, log: pathlib.Path,
           tty: int | None = None):
    """Start ``make lab``; wait for JupyterLab's runtime file; return (process, base url, token, server pid).

    With ``tty`` (the follower side of a pseudo-terminal) ``make lab`` runs in that terminal, as typed at a
    prompt; without, it runs with no terminal at all (its own session, stdin from /dev/null).
    """
    with log.open("w") as fh:
        if tty is None:
            process = subprocess.Popen(args, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        else:
            process = subprocess.Popen(args, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=tty,
                                       preexec_fn=_in_a_terminal())
    deadline = time.monotonic() + 180
    while True:
        found = list(runtime.glob("jpserver-*.json")) if runtime.is_dir() else []
        if found:
            info = json.loads(found[0].read_text())
            base, token = info["url"].rstrip("/"), info["token"]
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=10) as reply:
                    if reply.status == 200:
                        return process, base, token, info["pid"]
            except OSError:
                pass
        assert process.poll() is None and time.monotonic() < deadline, \
            f"make lab 没有启动 JupyterLab（退出码 {process.poll()}）：\n{log.read_text()[-3000:]}"
        time.sleep(0.3)


#: Seconds within which one Ctrl+C must have stopped ``make lab`` and JupyterLab (it takes about one).
CTRL_C_BOUND = 30


def _stop_with_ctrl_c(process: subprocess.Popen, server_pid: int, log: pathlib.Path, terminal: int | None = None):
    """What a student does in the terminal running ``make lab``: Ctrl+C, once.

    In a terminal (``terminal``: its controlling side) the character Ctrl+C is typed into it, and the terminal
    sends SIGINT to its foreground group; without one, SIGINT goes to ``make lab``'s process group, as a Ctrl+C
    does.  ``make lab`` and JupyterLab must both be gone within :data:`CTRL_C_BOUND` seconds, with no question
    asked (jupyter_server's "Shut down this Jupyter server (y/[n])?" resumes after 5 s without an answer).
    """
    started = time.monotonic()
    if terminal is None:
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.write(terminal, b"\x03")
    try:
        process.wait(timeout=CTRL_C_BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        if jupyter_servers.alive(server_pid):  # JupyterLab runs in a process group of its own (scripts/lab.py)
            os.kill(server_pid, signal.SIGTERM)
        raise AssertionError(f"按一次 Ctrl+C 没有在 {CTRL_C_BOUND} 秒内停下 make lab：\n{log.read_text()[-3000:]}") \
            from None
    while jupyter_servers.alive(server_pid) and time.monotonic() - started < CTRL_C_BOUND:
        time.sleep(0.2)
    if jupyter_servers.alive(server_pid):
        os.kill(server_pid, signal.SIGTERM)
        raise AssertionError(f"按一次 Ctrl+C 之后 JupyterLab 还在运行：\n{log.read_text()[-3000:]}")
    text = log.read_text()
    assert "Shut down this Jupyter server" not in text and "resuming operation" not in text, text[-3000:]
    assert lab.STOPPING in text and "received signal 15, stopping" in text, text[-3000:]


def _check_lab(base: str, token: str, copy: pathlib.Path) -> None:
    with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=30) as reply:
        assert reply.status == 200
        assert "JupyterLab" in reply.read().decode("utf-8", "replace")
    with urllib.request.urlopen(f"{base}/api/contents/{ASSIGNMENT}?token={token}", timeout=30) as reply:
        names = [item["name"] for item in json.load(reply)["content"]]
    assert f"{ASSIGNMENT}.ipynb" in names, names  # it serves the working copy student-work/
    assert (copy / "student-work" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="以 root 运行 make lab 的检查需要 root（普通用户的一条见下）")
def test_make_lab_as_written_as_root(tmp_path):
    """``make lab`` typed at a terminal's prompt as root; one Ctrl+C typed into that terminal stops it."""
    copy = copy_checkout(tmp_path / "repo")
    (tmp_path / "home").mkdir()
    log = tmp_path / "lab.log"
    terminal, tty = pty.openpty()
    try:
        process, base, token, pid = _serve(["bash", "-c", "make lab"], copy,
                                           _lab_env(tmp_path, tmp_path / "home"), tmp_path / "runtime", log, tty)
        try:
            _check_lab(base, token, copy)
        finally:
            _stop_with_ctrl_c(process, pid, log, terminal)
    finally:
        os.close(tty)
        os.close(terminal)
    assert "Running as root is not recommended" not in log.read_text()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="切换到普通用户 nobody 需要 root")
def test_make_lab_as_written_as_an_ordinary_user_and_validate_in_its_terminal():
    """``make lab`` typed by ``nobody`` in a checkout of its own; in the lab's terminal, the 学生指南's two lines."""
    with reachable_tmp() as tmp_path:
        _lab_as_nobody(tmp_path)


def _home_and_runtime(tmp: pathlib.Path, owner: str | None = None) -> pathlib.Path:
    """``tmp/home`` and the Jupyter runtime folder ``tmp/runtime`` (mode 700), owned by ``owner``; the home."""
    home, runtime = tmp / "home", tmp / "runtime"
    for folder in (home, runtime):
        folder.mkdir()
        if owner:
            subprocess.run(["chown", f"{owner}:", str(folder)], check=True)
    runtime.chmod(0o700)
    return home


def _lab_as_nobody(tmp_path: pathlib.Path) -> None:
    copy = copy_checkout(tmp_path / "repo", owner="nobody")
    home = _home_and_runtime(tmp_path, "nobody")
    log = tmp_path / "lab.log"
    process, base, token, pid = _serve(as_user("make lab", home=home), copy, _lab_env(tmp_path, home),
                                       tmp_path / "runtime", log)
    try:
        _check_lab(base, token, copy)
        typed = _block(STUDENT_GUIDE, f"nbgrader validate {ASSIGNMENT}.ipynb")
        assert typed == [f"cd {ASSIGNMENT}", f"nbgrader validate {ASSIGNMENT}.ipynb"], typed
        typed_line = " && ".join(typed) + '; echo "命令""结束了"'
        out = asyncio.run(jupyter_servers.terminal_output(base, token, typed_line, "命令结束了\r\n"))
    finally:
        _stop_with_ctrl_c(process, pid, log)
    assert "command not found" not in out and "No nbgrader_config.py" not in out, out[-3000:]
    assert "还没有拿到满分" in out, out[-3000:]
    assert "Traceback" not in out, out[max(0, out.index("Traceback") - 1500):][:6000]
    assert "--allow-root" not in log.read_text()


# --------------------------------------------------------------------------- the class's JupyterHub

#: JupyterHub's own defaults, which the class's config keeps: the public port, the hub's, the proxy's API.
HUB_PORTS = (8000, 8081, 8001)
HUB_FILES = ("jupyterhub.sqlite", "jupyterhub_cookie_secret", "jupyterhub-proxy.pid")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="这一段的第一行要以 root 输入，并在私有挂载命名空间里换掉 /srv，需要 root 和 unshare")
def test_the_hub_block_of_the_instructor_guide_as_written(tmp_path):
    """The 教师指南's 一台服务器 block, its four lines typed as root at the root of a copy of the checkout: the hub
    starts on its default ports behind the proxy and answers; one SIGTERM stops it and its proxy; what it writes
    into the checkout is ignored by git.  (``tests/test_hub_exchange.py`` runs the class on the same config.)

    Typed in a private mount namespace whose ``/srv`` is an empty tmpfs: the machine's ``/srv`` is not changed.
    """
    lines = _block(GUIDE, "jupyterhub -f grading/hub/jupyterhub_config.py")
    assert len(lines) == 4 and lines[0].startswith("mkdir -p /srv/") and "jupyterhub -f" in lines[-1], lines
    if not (REPO / ".venv" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        pytest.skip("没有 .venv/hub-proxy（make test 先用 npm 装上 configurable-http-proxy）")
    busy = [port for port in HUB_PORTS if _listening(port)]
    if busy:
        pytest.skip(f"JupyterHub 的默认端口 {busy} 已被占用：照原样输入的 Hub 启动不了")
    copy = copy_checkout(tmp_path / "repo")
    typed = tmp_path / "typed.sh"
    typed.write_text("mount -t tmpfs -o mode=755 tmpfs /srv\n" + "\n".join(lines) + "\n", encoding="utf-8")
    log = tmp_path / "hub.log"
    with log.open("w") as fh:
        hub = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "bash", str(typed)],
                               cwd=copy, env=_plain_env(), stdout=fh, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline, answer = time.monotonic() + 120, None
        while answer is None:
            assert hub.poll() is None and time.monotonic() < deadline, \
                f"照原样输入的 Hub 没有启动（退出码 {hub.poll()}）：\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen("http://127.0.0.1:8000/hub/api", timeout=5) as reply:
                    answer = json.load(reply)
            except OSError:
                time.sleep(0.5)
        with urllib.request.urlopen("http://127.0.0.1:8000/hub/login", timeout=30) as reply:
            assert reply.status == 200 and "password" in reply.read().decode("utf-8", "replace")
    finally:
        os.killpg(hub.pid, signal.SIGTERM)
        try:
            hub.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
            raise
    assert answer["version"].startswith("6.1"), answer
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    deadline = time.monotonic() + 30
    while any(map(_listening, HUB_PORTS)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(map(_listening, HUB_PORTS)), "SIGTERM 之后 Hub 或它的代理还在监听"
    written = sorted(p.name for p in copy.iterdir() if p.name in HUB_FILES or p.name.startswith("jupyterhub"))
    assert written, "Hub 没有在仓库根目录写下它的状态文件？"
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=REPO, capture_output=True,
                             text=True, check=False).stdout.split()
    left = sorted(set(written) - set(ignored))
    assert not left, f"Hub 写在仓库根目录的这些文件没有被 .gitignore 忽略：{left}"


# --------------------------------------------------------------------------- a class folder, as an ordinary user

@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="切换到普通用户 nobody 需要 root")
def test_make_roster_and_make_formgrader_as_written_as_an_ordinary_user():
    """The 教师指南's ``make roster`` and ``make formgrader`` typed by ``nobody`` at the root of a checkout of its
    own, on a class folder of its own: the Formgrader opens on that folder's gradebook and lists the roster's
    names, and nothing is written into the checkout (``tests/test_term.py`` types them as root in a whole term)."""
    from test_documented_commands import _as_written, _guide_command

    roster_command = _guide_command(r"make roster COURSE=课程目录 ROSTER=名单\.csv")
    formgrader_command = _guide_command(r"make formgrader COURSE=课程目录")
    with reachable_tmp() as tmp:
        copy = copy_checkout(tmp / "repo", owner="nobody")
        home = _home_and_runtime(tmp, "nobody")
        course, roster = tmp / "课程目录", tmp / "名单.csv"
        (course / "submitted" / "alice" / ASSIGNMENT).mkdir(parents=True)
        roster.write_text("学号,姓名,邮箱\nalice,李爱丽,alice@example.edu\nbob,王博,bob@example.edu\n",
                          encoding="utf-8")
        subprocess.run(["chown", "-R", "nobody:", str(course), str(roster)], check=True)
        before = sorted(p.relative_to(copy) for p in copy.rglob("*") if ".venv" not in p.parts)

        typed = _as_written(roster_command, 课程目录=str(course), **{"名单.csv": str(roster)})
        run = subprocess.run(as_user(typed, home=home), cwd=copy, env=_lab_env(tmp, home), capture_output=True,
                             text=True, timeout=300, check=False)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        assert not ENGLISH_FALLBACK.search(run.stdout + run.stderr), (run.stdout + run.stderr)[-3000:]

        typed = _as_written(formgrader_command, 课程目录=str(course))
        log = tmp / "formgrader.log"
        process, base, token, pid = _serve(as_user(typed, home=home), copy, _lab_env(tmp, home), tmp / "runtime",
                                           log)
        try:
            with urllib.request.urlopen(f"{base}/formgrader/api/students?token={token}", timeout=60) as reply:
                students = {s["id"]: s for s in json.load(reply)}
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
        after = sorted(p.relative_to(copy) for p in copy.rglob("*") if ".venv" not in p.parts)
        gradebook_owner = (course / "gradebook.db").owner()
    assert {"alice", "bob"} <= set(students), students
    assert "李爱丽" in json.dumps(students, ensure_ascii=False), students
    assert gradebook_owner == "nobody"
    assert after == before, sorted(set(after) ^ set(before))
    text = log.read_text() if log.exists() else ""
    assert "Traceback" not in text and "--allow-root" not in text, text[-3000:]
