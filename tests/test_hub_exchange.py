"""One class on a real JupyterHub: the nbgrader exchange for an instructor and two students, through the servers' APIs.

JupyterHub 6.1 runs ``grading/hub/jupyterhub_config.py`` (the configuration the
instructor guide documents) on free loopback ports behind npm's
``configurable-http-proxy``: ``SimpleLocalProcessSpawner`` with every home in a
temporary folder, nbgrader's exchange in a temporary folder, course
``attention-zh``.  A test-only hub service makes one API token per user; from
then on everything goes through the single-user servers' own HTTP endpoints,
the ones JupyterLab's nbgrader extensions call:

* the instructor (formgrader API) generates and releases ``ch05-softmax``;
* each student (Assignments API) lists and fetches it, saves a filled notebook
  through the contents API (one right, one partly wrong), validates, submits;
* the instructor collects, autogrades, grades the written answer by hand
  (score and comment), autogrades one student again (the marks must stay),
  generates and releases feedback;
* each student fetches feedback and sees their own result, never the other's;
* then the quiz ``quiz-sdpa``: both students hand in the same letters (student1's right ones), the instructor
  collects and autogrades; each is graded against their own option order (student2 loses points), and each
  autograded notebook shows its own student's variant (``grading/variants.py``).
* as with ``make lab``, each student's JupyterLab loads the Chinese copy of nbgrader's plugin the hub wrote
  at start (``$ATTENTION_HUB_DATA``) and starts in Chinese; the instructor's keeps nbgrader's own plugin.

The gradebook (nbgrader's ``Gradebook``) must hold what each submission
deserves.  Everything started is stopped at the end, and no process may be left.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
import pytest

from conftest import ROOT, provision
from grading import fire_drill, nbgrader_lab, samples
from grading.course import Course

pytestmark = [pytest.mark.grading, pytest.mark.slow, pytest.mark.hub, pytest.mark.timeout(300)]

ASSIGNMENT = "ch05-softmax"
QUIZ = fire_drill.QUIZ
COURSE_ID = "attention-zh"
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
INSTRUCTOR, RIGHT, WRONG = "instructor", "student1", "student2"
STUDENTS = (RIGHT, WRONG)
WRITTEN = "written_shift"
INSTRUCTOR_ONLY = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                   "@jupyter/nbgrader:course-list")
HUB_CONFIG = ROOT / "grading" / "hub" / "jupyterhub_config.py"
VENV_BIN = Path(sys.executable).parent
HUB_DATA = "jupyter-data"  # $ATTENTION_HUB_DATA in the hub's folder: the Chinese copy of nbgrader's plugin
#: A shorter written answer for the partly wrong student: it says why, not what it cannot prevent.
SHORT_ANSWER = "减去最大值是为了防止 `np.exp` 溢出。"
#: The instructor's hand grade (score of 2, comment) of each student's written answer.
HAND = {RIGHT: (2.0, "讲清楚了：防止溢出，但防不了饱和，例子也对。"),
        WRONG: (1.0, "只说了防止溢出，没有说明为什么它不能防止饱和。")}
#: Automatic scores: the right notebook 3 + 2 + 3; the partly wrong one misses an essential check of exercises 1
#: and 3 (a third of their points) and passes 4/7 of the checks of exercise 2 (see tests/test_grading.py).
AUTO = {RIGHT: 8.0, WRONG: 3 / 3 + 2 * 4 / 7 + 3 / 3}
MAX_SCORE = 10.0
START_S = 90  # the hub, or the three servers started at once
STOP_S = 30
STEP_S = 180  # one nbgrader step through an API (validate and autograde run the notebook)
NO_PROXIES = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(method: str, url: str, token: str, body=None, timeout: float = STEP_S) -> tuple[int, str]:
    """One request with a JupyterHub API token; returns the status and the body (error statuses too)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with NO_PROXIES.open(request, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


@dataclass
class Hub:
    """A running JupyterHub: its public URL, the test service's token, and every process it started."""

    url: str
    token: str
    process: subprocess.Popen
    log: Path
    tokens: dict = field(default_factory=dict)
    started: set = field(default_factory=set)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]

    def remember_processes(self) -> None:
        """Note every process below the hub (proxy, servers, kernels) so that teardown can check they are gone."""
        with contextlib.suppress(psutil.NoSuchProcess):
            self.started.update(psutil.Process(self.process.pid).children(recursive=True))

    def api(self, method: str, path: str, body=None) -> tuple[int, object]:
        """A call to the hub's REST API (``/hub/api``) as the test service; the body decoded from JSON."""
        status, text = http(method, f"{self.url}/hub/api{path}", self.token, body, timeout=30)
        return status, json.loads(text) if text.strip().startswith(("{", "[")) else text

    def lab(self, user: str, method: str, path: str, body=None) -> object:
        """A call to ``user``'s single-user server (through the proxy) with the user's token; must succeed."""
        status, text = http(method, f"{self.url}/user/{user}/{path}", self.tokens[user], body)
        assert 200 <= status < 300, f"{user} 的服务器对 {method} {path} 回答 {status}：{text[:2000]}"
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError:  # the formgrader answers a broken setup with an HTML error page and 200
            pytest.fail(f"{user} 的服务器对 {method} {path} 回答的不是 JSON：{text[:2000]}\n{self.log_tail()}")

    def status(self, user: str, path: str, token: str) -> int:
        """Only the status of a GET on ``user``'s server with ``token``."""
        return http("GET", f"{self.url}/user/{user}/{path}", token)[0]

    def page_config(self, user: str) -> dict:
        """The page config of ``user``'s JupyterLab page (what the browser starts JupyterLab with)."""
        status, page = http("GET", f"{self.url}/user/{user}/lab", self.tokens[user])
        assert status == 200, f"{user} 打不开 JupyterLab 页面（{status}）"
        config = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
        return json.loads(config.group(1))

    def disabled_extensions(self, user: str) -> list[str]:
        """The JupyterLab extensions ``user``'s lab page switches off (its page config)."""
        return self.page_config(user)["disabledExtensions"]

    def nbgrader_plugin(self, user: str, chinese: Path) -> dict:
        """What ``user``'s JupyterLab loads of nbgrader's plugin, and the text of the Chinese copy's scripts it serves.

        ``chinese``: the copy the hub wrote (``$ATTENTION_HUB_DATA/labextensions/@jupyter/nbgrader``); each of its
        scripts is asked for by name from ``user``'s server (an error status where the server serves another copy).
        """
        (plugin,) = [e for e in self.page_config(user)["federated_extensions"] if e["name"] == "@jupyter/nbgrader"]
        served = {}
        for script in sorted((chinese / "static").glob("*.js")):
            status, text = http("GET", f"{self.url}/user/{user}/lab/extensions/@jupyter/nbgrader/static/{script.name}",
                                self.tokens[user], timeout=30)
            served[script.name] = text if status == 200 else status
        return {"load": plugin["load"], "served": served}

    def default_language(self, user: str) -> str:
        """The language ``user``'s JupyterLab starts in when the user has chosen none (its settings API)."""
        settings = self.lab(user, "GET", "lab/api/settings/@jupyterlab/translation-extension:plugin")
        return settings["schema"]["properties"]["locale"]["default"]


def wait_until(hub: Hub, check, what: str, seconds: float = START_S):
    """Poll ``check()`` until it returns something true; fail after ``seconds`` or when the hub has exited."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        assert hub.process.poll() is None, (
            f"JupyterHub 已经退出（退出码 {hub.process.returncode}），{what}没有完成。日志结尾：\n{hub.log_tail()}")
        assert time.monotonic() < deadline, (
            f"等了 {seconds} 秒，{what}还没有完成。JupyterHub 日志结尾：\n{hub.log_tail()}")
        time.sleep(0.5)


def hub_answers(hub: Hub) -> bool:
    """Whether the hub's API answers through the proxy."""
    try:
        return hub.api("GET", "/")[0] == 200
    except OSError:
        return False


def hub_config(workdir: Path, ports: list[int], token: str) -> Path:
    """This test's hub config: the class's config plus free ports, state files in ``workdir``, a service token."""
    public, hub_port, proxy_api = ports
    path = workdir / "jupyterhub_config.py"
    path.write_text(f"""c = get_config()  # noqa
load_subconfig({str(HUB_CONFIG)!r})  # noqa
c.JupyterHub.bind_url = "http://127.0.0.1:{public}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.pid_file = {str(workdir / "proxy.pid")!r}
c.JupyterHub.db_url = {"sqlite:///" + str(workdir / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(workdir / "cookie_secret")!r}
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0}}  # answer "start the server" at once: all start together
c.JupyterHub.services = [{{"name": "class-test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "class-test", "services": ["class-test"],
                             "scopes": ["list:users", "read:users", "admin:servers", "tokens"]}}]
""", encoding="utf-8")
    return path


def stop_everything(hub: Hub) -> list[str]:
    """Stop the hub (which stops the servers and the proxy), then kill whatever is left; returns what survived."""
    hub.remember_processes()
    if hub.process.poll() is None:
        hub.process.send_signal(signal.SIGTERM)
        try:
            hub.process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(hub.process.pid, signal.SIGKILL)
            hub.process.wait(timeout=STOP_S)
    _, alive = psutil.wait_procs(list(hub.started), timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            group = os.getpgid(process.pid)
            if group != os.getpgrp():
                os.killpg(group, signal.SIGKILL)
            process.kill()
    _, alive = psutil.wait_procs(alive, timeout=10)
    return [described for described in map(describe_live, alive) if described]


def describe_live(process: psutil.Process) -> str | None:
    """``"pid command"`` of a process still running (not a zombie waiting for its parent), else None."""
    try:
        if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
            return f"{process.pid} {' '.join(process.cmdline())[:200]}"
    except psutil.NoSuchProcess:
        pass
    return None


@contextlib.contextmanager
def running_hub(workdir: Path, homes: Path, exchange: Path):
    """JupyterHub with the class's config, its state files in ``workdir``; always stopped, nothing left running."""
    token = secrets.token_hex(32)
    ports = free_ports(3)
    config = hub_config(workdir, ports, token)
    env = {**os.environ, "NBGRADER_EXCHANGE": str(exchange), "ATTENTION_HUB_HOMES": str(homes),
           "ATTENTION_HUB_DATA": str(workdir / HUB_DATA),
           "PATH": os.pathsep.join([str(VENV_BIN), provision.proxy_bin_dir(), os.environ.get("PATH", "")])}
    log = workdir / "jupyterhub.log"
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen([str(VENV_BIN / "jupyterhub"), "-f", str(config)], cwd=workdir, env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        hub = Hub(f"http://127.0.0.1:{ports[0]}", token, process, log)
        try:
            wait_until(hub, lambda: hub_answers(hub), "JupyterHub 启动")
            yield hub
        finally:
            left = stop_everything(hub)
    assert not left, f"测试结束后还有进程没有退出：{left}\n{hub.log_tail()}"


def start_servers(hub: Hub, users) -> None:
    """Start every user's server at once, wait until all are ready, and give each user an API token."""
    for user in users:
        status, reply = hub.api("POST", f"/users/{user}/server")
        assert status in (201, 202), f"没能启动 {user} 的服务器（{status}）：{reply}"
    for user in users:
        wait_until(hub, lambda u=user: hub.api("GET", f"/users/{u}")[1]["servers"].get("", {}).get("ready"),
                   f"{user} 的服务器启动")
        status, reply = hub.api("POST", f"/users/{user}/tokens", {
            "note": "test_hub_exchange", "expires_in": 900, "scopes": [f"access:servers!user={user}"]})
        assert status == 201, f"没能给 {user} 生成令牌（{status}）：{reply}"
        hub.tokens[user] = reply["token"]
    hub.remember_processes()


def prepare_instructor(home: Path, exchange: Path) -> Course:
    """The instructor's home: the course directory with the assignment source, and ``~/.jupyter`` loading its config."""
    course = Course(home / COURSE_ID, {"Exchange.root": str(exchange)})
    course.add_sources([ASSIGNMENT, QUIZ])
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f"load_subconfig({str(course.path('nbgrader_config.py'))!r})  # noqa\n", encoding="utf-8")
    return course


def formgrader(hub: Hub, action: str) -> dict:
    """POST one formgrader action (``assignment/<id>/release``, ...) as the instructor; it must succeed."""
    reply = hub.lab(INSTRUCTOR, "POST", f"formgrader/api/{action}")
    assert reply["success"], f"formgrader 的 {action} 失败：{reply.get('error')}\n{reply.get('log')}"
    return reply


def assignments(hub: Hub, student: str, action: str | None = None, assignment: str = ASSIGNMENT) -> list:
    """The student's Assignments panel: the listing, or the listing after ``fetch``/``submit``/``fetch_feedback``."""
    if action is None:
        reply = hub.lab(student, "GET", f"assignments?course_id={COURSE_ID}")
    else:
        reply = hub.lab(student, "POST", f"assignments/{action}", {"course_id": COURSE_ID, "assignment_id": assignment})
    assert reply["success"], f"{student} 的作业列表（{action or 'list'}）出错：{reply['value']}"
    return reply["value"]


def save_answers(hub: Hub, student: str, scratch: Path) -> None:
    """Fill the student's fetched notebook (right or partly wrong) and save it as the browser does."""
    fetched = hub.lab(student, "GET", f"api/contents/{NOTEBOOK}?content=1")
    local = scratch / f"{student}.ipynb"
    nbformat.write(nbformat.from_dict(fetched["content"]), str(local))
    if student == RIGHT:
        nb = samples.fill(local, samples.model_solutions(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"))
    else:
        nb = samples.fill(local, samples.PARTIAL, SHORT_ANSWER)
    hub.lab(student, "PUT", f"api/contents/{NOTEBOOK}", {"type": "notebook", "format": "json", "content": nb})


def grade_by_hand(hub: Hub) -> None:
    """The instructor's hand grade and comment on each student's written answer (formgrader's grade/comment API)."""
    submissions = hub.lab(INSTRUCTOR, "GET", f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}")
    by_student = {s["student"]: s["id"] for s in submissions}
    assert set(by_student) == set(STUDENTS), f"formgrader 里的提交不是两名学生的：{sorted(by_student)}"
    for student, (score, comment) in HAND.items():
        grades = hub.lab(INSTRUCTOR, "GET", f"formgrader/api/grades?submission_id={by_student[student]}")
        (grade,) = [g for g in grades if g["name"] == WRITTEN]
        assert grade["needs_manual_grade"], f"{student} 的书面作答应当等待人工批改：{grade}"
        graded = hub.lab(INSTRUCTOR, "PUT", f"formgrader/api/grade/{grade['id']}", {"manual_score": score})
        assert graded["manual_score"] == score and not graded["needs_manual_grade"], graded
        comments = hub.lab(INSTRUCTOR, "GET", f"formgrader/api/comments?submission_id={by_student[student]}")
        (note,) = [c for c in comments if c["name"] == WRITTEN]
        saved = hub.lab(INSTRUCTOR, "PUT", f"formgrader/api/comment/{note['id']}", {"manual_comment": comment})
        assert saved["manual_comment"] == comment, saved


def feedback_page(hub: Hub, student: str, listing: list) -> str:
    """The HTML of the feedback page the student fetched (found through the student's own listing)."""
    submitted = [a for a in listing if a["status"] == "submitted"]
    assert len(submitted) == 1, f"{student} 的作业列表里应当正好有一份提交：{submitted}"
    (submission,) = submitted[0]["submissions"]
    (notebook,) = submission["notebooks"]
    assert notebook["has_local_feedback"], f"{student} 领取反馈之后，列表里仍然没有本地反馈：{notebook}"
    path = urllib.parse.quote(os.path.normpath(notebook["local_feedback_path"]))  # ./<id>/feedback/<time>/<nb>.html
    return hub.lab(student, "GET", f"api/contents/{path}?content=1&type=file&format=text")["content"]


def page_text(page: str) -> str:
    """What a reader sees of an HTML page."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def run_class(hub: Hub, scratch: Path) -> dict:
    """The whole term of one assignment, step by step through the servers' APIs; returns what each step answered."""
    seen = {"empty": {s: assignments(hub, s) for s in STUDENTS}}
    formgrader(hub, f"assignment/{ASSIGNMENT}/assign")
    formgrader(hub, f"assignment/{ASSIGNMENT}/release")
    seen["released"] = {s: assignments(hub, s) for s in STUDENTS}
    seen["fetched"] = {s: assignments(hub, s, "fetch") for s in STUDENTS}
    seen["validated"] = {}
    for student in STUDENTS:
        save_answers(hub, student, scratch)
        seen["validated"][student] = hub.lab(student, "POST", "assignments/validate", {"path": NOTEBOOK})
    seen["submitted"] = {s: assignments(hub, s, "submit") for s in STUDENTS}
    hub.remember_processes()
    formgrader(hub, f"assignment/{ASSIGNMENT}/collect")
    for student in STUDENTS:
        formgrader(hub, f"submission/{ASSIGNMENT}/{student}/autograde")
    grade_by_hand(hub)
    # the Formgrader's Autograde once more (a resubmission's re-grade): the marks stay, 已评分 (grading/manual_marks.py)
    formgrader(hub, f"submission/{ASSIGNMENT}/{STUDENTS[0]}/autograde")
    formgrader(hub, f"assignment/{ASSIGNMENT}/generate_feedback")
    formgrader(hub, f"assignment/{ASSIGNMENT}/release_feedback")
    seen["feedback"] = {s: assignments(hub, s, "fetch_feedback") for s in STUDENTS}
    seen["pages"] = {s: feedback_page(hub, s, seen["feedback"][s]) for s in STUDENTS}
    seen["status"] = {(owner, visitor): hub.status(owner, "api/contents", hub.tokens[visitor])
                      for owner in (INSTRUCTOR, *STUDENTS) for visitor in (INSTRUCTOR, *STUDENTS)}
    seen["formgrader"] = {user: hub.status(user, "formgrader", hub.tokens[user]) for user in (INSTRUCTOR, *STUDENTS)}
    seen["disabled"] = {user: hub.disabled_extensions(user) for user in (INSTRUCTOR, *STUDENTS)}
    chinese = hub.log.parent.joinpath(HUB_DATA, "labextensions", *nbgrader_lab.LABEXTENSION)
    seen["plugin"] = {user: hub.nbgrader_plugin(user, chinese) for user in (INSTRUCTOR, *STUDENTS)}
    seen["chinese_plugin"] = json.loads((chinese / "package.json").read_text(encoding="utf-8"))
    seen["language"] = {user: hub.default_language(user) for user in STUDENTS}
    hub.remember_processes()
    return seen


def run_quiz(hub: Hub) -> dict:
    """The quiz through the exchange: both students hand in student1's right letters; collected and autograded."""
    formgrader(hub, f"assignment/{QUIZ}/assign")
    formgrader(hub, f"assignment/{QUIZ}/release")
    letters = fire_drill.quiz_keys(RIGHT)
    path = f"{QUIZ}/{QUIZ}.ipynb"
    for student in STUDENTS:
        assignments(hub, student, "fetch", QUIZ)
        fetched = nbformat.from_dict(hub.lab(student, "GET", f"api/contents/{path}?content=1")["content"])
        for cell in fetched.cells:
            answer = letters.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
            cell.source = f'answer = "{answer}"' if answer else cell.source
        hub.lab(student, "PUT", f"api/contents/{path}", {"type": "notebook", "format": "json", "content": fetched})
        assignments(hub, student, "submit", QUIZ)
    formgrader(hub, f"assignment/{QUIZ}/collect")
    for student in STUDENTS:
        formgrader(hub, f"submission/{QUIZ}/{student}/autograde")
    hub.remember_processes()
    return {"letters": letters}


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """One assignment's term on a real JupyterHub; the hub and everything it started are gone afterwards."""
    workdir = tmp_path_factory.mktemp("hub")
    homes, exchange = workdir / "home", workdir / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # as on a real hub: every user reads and writes the exchange
    course = prepare_instructor(homes / INSTRUCTOR, exchange)
    with running_hub(workdir, homes, exchange) as hub:
        start_servers(hub, (INSTRUCTOR, *STUDENTS))
        seen = run_class(hub, workdir)
        seen["quiz"] = run_quiz(hub)
    yield {"seen": seen, "course": course, "homes": homes}


def test_in_a_class_the_students_assignment_list_works_and_the_instructor_keeps_the_formgrader(term):
    seen = term["seen"]
    for student in STUDENTS:
        assert seen["empty"][student] == [], f"发布之前 {student} 的作业列表应当是空的：{seen['empty'][student]}"
        listings = [seen[step][student] for step in ("empty", "released", "fetched", "submitted", "feedback")]
        assert nbgrader_lab.NO_EXCHANGE not in json.dumps(listings, ensure_ascii=False)
        (released,) = seen["released"][student]
        assert (released["course_id"], released["assignment_id"], released["status"]) == (
            COURSE_ID, ASSIGNMENT, "released"), released
        (fetched,) = seen["fetched"][student]
        assert fetched["status"] == "fetched" and fetched["path"] == ASSIGNMENT, fetched
    assert seen["formgrader"] == {INSTRUCTOR: 200, RIGHT: 404, WRONG: 404}, seen["formgrader"]
    assert not set(INSTRUCTOR_ONLY) & set(seen["disabled"][INSTRUCTOR]), seen["disabled"][INSTRUCTOR]
    for student in STUDENTS:  # grading/student_lab/labconfig: the student's tools only
        assert set(INSTRUCTOR_ONLY) <= set(seen["disabled"][student]), seen["disabled"][student]
        assert "@jupyter/nbgrader:assignment-list" not in seen["disabled"][student]


def test_each_student_reaches_only_their_own_server(term):
    status = term["seen"]["status"]
    for (owner, visitor), code in status.items():
        assert code == (200 if owner == visitor else 403), f"{visitor} 访问 {owner} 的服务器得到 {code}"


def test_validate_tells_each_student_where_they_stand_in_chinese(term):
    right, wrong = (term["seen"]["validated"][s] for s in STUDENTS)
    assert right["success"] and not right["value"].get("failed"), right
    assert wrong["success"], wrong
    failed = wrong["value"]["failed"]
    assert len(failed) == 3 and all("没有通过的检查" in cell["error"] for cell in failed), failed


def test_each_submission_is_filed_under_its_students_name(term):
    for student in STUDENTS:
        (submitted,) = [a for a in term["seen"]["submitted"][student] if a["status"] == "submitted"]
        assert [s["student_id"] for s in submitted["submissions"]] == [student], submitted
        assert sorted(p.name for p in (term["course"].root / "submitted").iterdir()) == sorted(STUDENTS)


def test_the_gradebook_holds_what_each_submission_deserves(term):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{term['course'].path('gradebook.db')}") as gb:
        for student in STUDENTS:
            submission = gb.find_submission(ASSIGNMENT, student)
            hand, comment = HAND[student]
            assert submission.max_score == MAX_SCORE
            assert submission.score == pytest.approx(AUTO[student] + hand, abs=1e-9), (student, submission.score)
            grade = gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, student)
            assert (grade.auto_score, grade.manual_score, grade.needs_manual_grade) == (None, hand, False)
            assert gb.find_comment(WRITTEN, ASSIGNMENT, ASSIGNMENT, student).manual_comment == comment


def test_each_student_gets_their_own_feedback_and_nothing_of_the_others(term):
    seen = term["seen"]
    for student, other in (STUDENTS, STUDENTS[::-1]):
        hand, comment = HAND[student]
        page = page_text(seen["pages"][student])
        assert f"（总分：{round(AUTO[student] + hand, 2)} / {MAX_SCORE}）" in page, page[:3000]
        assert f"书面作答 练习 4（得分：{hand} / 2.0）" in page and f"评语：{comment}" in page, page[:3000]
        assert HAND[other][1] not in page, f"{student} 的反馈里出现了 {other} 的评语"
        listing = json.dumps(seen["feedback"][student], ensure_ascii=False)
        assert other not in listing, f"{student} 的作业列表里出现了 {other}：{listing}"


def test_the_formgraders_feedback_is_the_courses_chinese_offline_page(term):
    for student in STUDENTS:
        raw = term["seen"]["pages"][student]
        text = page_text(raw)
        assert "测试单元：练习 1" in text and "你的答案" in text, text[:3000]
        assert not [word for word in ("Comments:", "Student's answer", "Test cell") if word in text], text[:3000]
        assert "<mjx-container" in raw and not re.search(r"<script[^>]*\bsrc=[\"']?(https?:)?//", raw)


def test_students_see_nbgrader_and_jupyterlab_in_chinese_as_with_make_lab(term):
    """The hub writes the Chinese copy of nbgrader's plugin once and serves it to students; the instructor keeps it."""
    seen = term["seen"]
    chinese_entry = seen["chinese_plugin"]["jupyterlab"]["_build"]["load"]
    for student in STUDENTS:
        plugin = seen["plugin"][student]
        assert plugin["load"] == chinese_entry, f"{student} 加载的不是中文的 nbgrader 插件：{plugin['load']}"
        failed = {name: text for name, text in plugin["served"].items() if not isinstance(text, str)}
        assert not failed, f"{student} 的服务器没有提供中文插件的这些文件：{failed}"
        scripts = "".join(plugin["served"].values())
        for old, new in nbgrader_lab.PLUGIN_CHANGES:  # the Chinese dialogs, and the rule hiding empty prompts
            assert new in scripts and old not in scripts, old
        assert seen["language"][student] == "zh_CN", seen["language"][student]
    instructor = seen["plugin"][INSTRUCTOR]  # nbgrader's own plugin (formgrader checked above)
    original = json.loads((nbgrader_lab.installed_labextension() / "package.json").read_text(encoding="utf-8"))
    assert instructor["load"] == original["jupyterlab"]["_build"]["load"] != chinese_entry, instructor["load"]


def test_the_same_quiz_letters_score_by_each_students_own_order(term):
    """Both hand in student1's right letters: student1 scores full marks, student2 only where the letters agree."""
    from nbgrader.api import Gradebook

    ok, own = term["seen"]["quiz"]["letters"], fire_drill.quiz_keys(WRONG)
    with Gradebook(f"sqlite:///{term['course'].path('gradebook.db')}") as gb:
        right, wrong = (gb.find_submission(QUIZ, s) for s in STUDENTS)
        assert right.score == right.max_score == 13.0
        assert wrong.score < right.score
        for q in (q for q in ok if q not in {"q05", "q08", "q10"}):  # single choice: all or nothing
            grade = gb.find_grade(f"{q}_test", QUIZ, QUIZ, WRONG)
            assert grade.auto_score == (1.0 if ok[q] == own[q] else 0.0), q
    for student in STUDENTS:
        nb = nbformat.read(term["course"].path("autograded", student, QUIZ, f"{QUIZ}.ipynb"), as_version=4)
        shown = {o["metadata"]["attnlib_variant"]["student"] for c in nb.cells for o in c.get("outputs", [])
                 if "attnlib_variant" in o.get("metadata", {})}
        assert shown == {student}, (student, shown)
    assert any(ok[q] != own[q] for q in ok)
