"""The documentation is tested by running it.

Every command written in README.md (its command table), the 前言, the 学生指南,
the 教师指南 and the instructions of every exercise notebook is extracted here
(:func:`documented`) and must appear in :data:`REGISTRY`, which names the test
that runs it and how.  A command added to a page without an entry fails
:func:`test_every_documented_command_is_registered_to_an_existing_test`; an entry
whose test was renamed or deleted fails it too.

How an entry is covered (``how``):

* ``"as written"`` -- the test types the text of the command (with ``课程目录`` /
  ``页面.html`` / ``<练习编号>`` replaced by temporary paths or ``ch05-softmax``) from
  the directory the page says -- in a throw-away copy of the checkout
  (tests/checkout_copy.py) where the command would rewrite the checkout -- and
  checks its output;
* ``"equivalent"`` -- the test runs what the command runs (the script behind a
  ``make`` target, nbgrader with the course's configuration in a throw-away copy of
  the course so no gradebook lands in the checkout); ``why`` says why not the text;
* ``"ci"`` -- ``make test`` itself: CI runs it; it cannot run inside its own suite;
* ``"not run"`` -- ``why`` says why (a machine-wide change, a cluster).

The commands run for the first time here (below the registry) are the class
route of the 教师指南 -- ``make grade-class`` as root and as an ordinary user,
``--strict``, ``make report`` and its script form -- ``make lint`` and the
instructor's ``nbgrader validate`` of a source notebook.  Their output is checked
the way a reader meets it: Chinese, no remote asset in generated HTML, no English
nbgrader fallback.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import nbformat
import pytest
from checkout_copy import as_user, copy_checkout, reachable_tmp

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = ("book/intro.md", "book/student-guide.md", "book/instructor-guide.md")
COMMAND = re.compile(r"^(sudo |make\b|nbgrader\b|\.venv/bin/|source |cd |export |apt-get |docker |PATH=)")
HERE = "tests/test_documented_commands.py"
TERM = "tests/test_term.py"


# --------------------------------------------------------------------------- extraction

def _spans(text: str) -> list[str]:
    """Inline code spans (single backticks) of a Markdown text."""
    return re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text)


def _bash_blocks(text: str) -> list[str]:
    """The command lines of every ```bash block; a comment ``# 等价于：CMD`` counts as the command CMD."""
    out = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                tail = re.split(r"[：:]", line, maxsplit=1)
                if len(tail) == 2 and COMMAND.match(tail[1].strip()):
                    out.append(tail[1].strip())
                continue
            out.append(re.sub(r"\s+#\s.*$", "", line).strip())
    return out


def _is_command(span: str) -> bool:
    """A code span that is a command (not the bare name of a program, like ``nbgrader`` or ``make``)."""
    return bool(COMMAND.match(span)) and len(span.split()) > 1


def normalise(command: str) -> str:
    return re.sub(r"\s+", " ", command.strip())


def documented() -> dict[str, set[str]]:
    """Every documented command (normalised) -> the pages that write it."""
    found: dict[str, set[str]] = {}

    def add(where: str, command: str) -> None:
        found.setdefault(normalise(command), set()).add(where)

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## 常用命令", 1)[1].split("\n## ", 1)[0]
    for span in _spans(section):
        if _is_command(span):
            add("README.md", span)
    for name in PAGES:
        text = (REPO / name).read_text(encoding="utf-8")
        for command in _bash_blocks(text):
            add(name, command)
        for span in _spans(re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)):
            if _is_command(span):
                add(name, span)
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        intro = nbformat.read(path, as_version=4).cells[0].source
        for span in _spans(intro):
            if _is_command(span):
                add(f"solutions/{path.parent.name}", span.replace(path.stem, "<练习>"))
    return found


# --------------------------------------------------------------------------- the registry

def _entry(test: str, how: str, why: str = "") -> dict:
    return {"test": test, "how": how, "why": why}


LAB_TERMINAL = "tests/test_make_lab.py::test_make_lab_as_root_serves_and_nbgrader_validate_works_in_its_terminal"
ROUTES = "tests/test_documented_routes.py"
ROUTE = f"{ROUTES}::test_the_nbgrader_command_line_route_of_the_instructor_guide_as_written"
ROOT_COPY = ("在检出目录的一份临时副本的根目录里、source .venv/bin/activate 之后输入（成绩库不落进检出目录），"
             "交换目录在临时目录（NBGRADER_EXCHANGE）")
HUB_TERMINAL = ("在教师的 ~/attention-zh（检出目录的一份拷贝）里、以 Hub 终端的环境（PATH、NBGRADER_EXCHANGE、"
                "JUPYTER_CONFIG_PATH）输入；交换目录和主目录都在临时目录")
REGISTRY: dict[str, dict] = {
    # README / 前言 / guides: make targets
    "make book": _entry("tests/test_book.py::test_build_executes_the_pilot_and_passes_with_warnings_as_errors",
                        "as written", "在检出目录的临时副本里输入（它写 _build/）；这是整个测试集唯一的一次完整构建，"
                        "tests/test_book.py、test_browser.py 检查的就是它的 _build/html；再输入一次时它说输入没有变化"),
    "make pdf": _entry("tests/test_browser.py::test_make_pdf_as_written_prints_the_whole_book_with_bookmarks",
                       "as written", "在 make book 构建过的那份检出目录临时副本里输入（它写 _build/pdf 和 "
                       "_build/html/_downloads），书已构建，make book 这一步什么也不做；"
                       "测试用 pypdf 读出页数、书签、字体与中文文字"),
    "make test": _entry("", "ci", "make test 就是整个测试集，由 CI 运行，不能在它自己里面再运行一次"),
    "make lab": _entry(f"{ROUTES}::test_make_lab_as_written_as_root", "as written",
                       "在检出目录的临时副本里以 root 在一个终端里输入 make lab，看它服务、打开 student-work/，"
                       "再在终端里按一次 Ctrl+C，它和 JupyterLab 都要在 30 秒内停下；普通用户（没有终端，Ctrl+C 发给"
                       f"进程组）的一条见 {ROUTES}::test_make_lab_as_written_as_an_ordinary_user_and_validate_in_its"
                       "_terminal"),
    "make release": _entry(f"{ROUTES}::test_make_release_as_written", "as written",
                           "在检出目录的临时副本里输入（它改写 notebooks/），生成的 notebooks/ 与提交的逐字节相同"),
    "make grade": _entry(f"{ROUTES}::test_make_grade_as_written", "as written"),
    "make grade-class": _entry(f"{HERE}::test_make_grade_class_as_written", "as written"),
    "make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录": _entry(f"{HERE}::test_make_grade_class_as_written",
                                                                  "as written"),
    "make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 JOBS=2": _entry(
        f"{HERE}::test_make_grade_class_as_written", "as written"),
    "make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 SANDBOX=nobody": _entry(
        f"{HERE}::test_make_grade_class_as_written", "as written",
        "以 root 运行（指南写的是 root 的写法；有 sudo 的普通用户前面加 sudo，这里没有安装 sudo，没有测试）"),
    ".venv/bin/python scripts/grade_class.py ch05-softmax --course 课程目录 --jobs 2": _entry(
        f"{HERE}::test_make_grade_class_as_written", "as written"),
    ".venv/bin/python scripts/grade_class.py ch05-softmax --course 课程目录 --strict": _entry(
        f"{HERE}::test_make_grade_class_as_written", "as written"),
    "make report ASSIGNMENT=quiz-sdpa COURSE=课程目录": _entry(f"{HERE}::test_make_report_as_written", "as written"),
    "make variant ASSIGNMENT=quiz-sdpa STUDENT=alice": _entry(
        "tests/test_variants_routes.py::test_make_variant_as_written", "as written",
        "在检出目录的临时副本的根目录里以 root 和普通用户 nobody 输入，逐题核对正确答案的字母"),
    ".venv/bin/python scripts/item_analysis.py 课程目录 quiz-sdpa -o 页面.html": _entry(
        f"{HERE}::test_make_report_as_written", "as written"),
    "make similarity ASSIGNMENT=ch05-softmax COURSE=课程目录": _entry(
        "tests/test_similarity.py::test_make_similarity_as_written", "as written"),
    ".venv/bin/python scripts/similarity.py 课程目录 ch05-softmax -o 页面.html": _entry(
        "tests/test_similarity.py::test_make_similarity_as_written", "as written"),
    "make audit ASSIGNMENT=ch16-gqa": _entry(
        "tests/test_audit.py::test_make_audit_as_written", "as written",
        "在仓库根目录输入，评全部变异体；页面写进 _build/audit/（git 忽略的构建目录）"),
    "make audit ASSIGNMENT=ch16-gqa BUDGET=40 OUT=页面.html": _entry(
        "tests/test_audit.py::test_make_audit_as_written", "as written", "页面.html 换成临时目录里的路径"),
    ".venv/bin/python scripts/audit.py ch16-gqa --budget 40 -o 页面.html": _entry(
        "tests/test_audit.py::test_make_audit_as_written", "as written", "页面.html 换成临时目录里的路径"),
    "make lint": _entry(f"{HERE}::test_make_lint_as_written", "as written"),
    "make bench": _entry("", "not run",
                         "全部基准要几分钟、结果随机器而变，不属于测试；只跑一项的写法 make bench BENCH=kv_cache "
                         "按原文运行（下一条）"),
    "make bench BENCH=kv_cache": _entry(f"{HERE}::test_make_bench_one_bench_as_written", "as written",
                                        "只检查它跑的就是这一项、打印出比值、两种生成结果相同；速度目标属于基准，不在测试里判定"),
    "make lock": _entry(f"{HERE}::test_make_lock_as_written_writes_the_committed_constraints", "as written",
                        "在检出目录的临时副本里以 root 和普通用户 nobody 各输入一次（它改写 constraints.txt），"
                        "写出的与提交的 constraints.txt 逐行相同"),
    "sudo apt-get install -y --no-install-recommends chromium fonts-wqy-microhei": _entry(
        "tests/test_provision.py::test_as_root_the_missing_programs_are_installed_with_apt", "equivalent",
        "apt 装的是整台机器的软件；测试核对 provision 以 root 调用的就是这条命令"),
    # the student's commands
    "nbgrader validate": _entry(
        LAB_TERMINAL, "as written",
        "学生指南里的完整写法见下两条"),
    "cd ch05-softmax": _entry(
        LAB_TERMINAL, "as written",
        "在 make lab 打开的 JupyterLab 终端里逐行输入学生指南的两行"),
    "nbgrader validate ch05-softmax.ipynb": _entry(
        LAB_TERMINAL, "as written",
        "在 make lab 打开的 JupyterLab 终端里逐行输入学生指南的两行"),
    "nbgrader validate <练习>.ipynb": _entry(f"{HERE}::test_each_notebook_tells_the_student_to_validate_itself",
                                            "as written", "每个笔记本写的都是它自己的文件名；命令本身同上一条"),
    ".venv/bin/nbgrader validate student-work/ch05-softmax/ch05-softmax.ipynb": _entry(
        f"{HERE}::test_validate_from_the_repository_root_as_written", "as written"),
    "nbgrader fetch_assignment ch05-softmax --course attention-zh": _entry(ROUTE, "as written",
                                                                         "两名学生各在自己的主目录里输入"),
    "nbgrader submit ch05-softmax --course attention-zh": _entry(ROUTE, "as written",
                                                               "两名学生各在自己的主目录里输入"),
    # the instructor's nbgrader commands
    "source .venv/bin/activate": _entry(f"{HERE}::test_validate_a_source_notebook_as_written", "as written"),
    "nbgrader validate solutions/ch05-softmax/ch05-softmax.ipynb": _entry(
        f"{HERE}::test_validate_a_source_notebook_as_written", "as written"),
    "nbgrader autograde": _entry(ROUTE, "equivalent",
                                 "正文里泛指评分这一步；它的完整写法 nbgrader autograde ch05-softmax 按原文运行"),
    "nbgrader generate_assignment ch05-softmax --force": _entry(ROUTE, "as written", ROOT_COPY),
    "nbgrader autograde ch05-softmax": _entry(ROUTE, "as written", ROOT_COPY),
    "nbgrader generate_feedback ch05-softmax": _entry(ROUTE, "as written", ROOT_COPY),
    "nbgrader export": _entry(ROUTE, "as written", ROOT_COPY),
    "nbgrader generate_feedback ch05-softmax --CourseDirectory.root=课程目录": _entry(
        "tests/test_class_routes.py::test_the_guides_feedback_command_for_a_class_works_as_written", "as written",
        "人工打分以后、重新评分以后再输入一次（不加 --force）见 "
        "tests/test_term.py::test_feedback_after_marking_shows_the_marks_without_force"),
    "nbgrader collect <练习编号>": _entry(ROUTE, "as written", ROOT_COPY + "；<练习编号> 换成 ch05-softmax"),
    # a term on a class folder (tests/test_term.py: one class folder outside the checkout, every line as typed)
    "make formgrader COURSE=课程目录": _entry(
        f"{TERM}::test_marks_given_in_the_formgrader_on_the_class_folder", "as written",
        "以 root 在仓库根目录输入；测试通过 Formgrader 的接口（它的面板调用的就是这些接口）给书面作答打分、写评语，"
        "再用 SIGTERM 停下它；检出目录里不多出任何文件。普通用户 nobody 在自己的检出目录里也输入一次："
        f"{ROUTES}::test_make_roster_and_make_formgrader_as_written_as_an_ordinary_user"),
    "make roster COURSE=课程目录 ROSTER=名单.csv": _entry(
        f"{TERM}::test_the_roster_names_the_students_and_the_one_not_on_it", "as written",
        f"普通用户 nobody 也输入一次：{ROUTES}::test_make_roster_and_make_formgrader_as_written_as_an_ordinary_user"),
    'nbgrader db assignment add ch05-softmax --duedate="2026-03-15 23:59:00+08:00" --CourseDirectory.root=课程目录':
        _entry(f"{TERM}::test_the_late_submission_loses_the_classs_penalty", "as written",
               "在仓库根目录、source .venv/bin/activate 之后输入"),
    "make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 STUDENT=bob": _entry(
        f"{TERM}::test_regrading_one_student_leaves_the_others_rows_untouched", "as written"),
    "nbgrader export --CourseDirectory.root=课程目录": _entry(
        f"{TERM}::test_the_export_writes_into_the_class_folder_with_status_from_anywhere", "as written",
        "在仓库根目录、source .venv/bin/activate 之后输入"),
    # grades for a learning platform (tests/test_export.py: one class folder, each line typed at the repository root)
    **{f"make export COURSE=课程目录 FORMAT={fmt}": _entry(
        "tests/test_export.py::test_each_documented_command_runs_and_says_what_it_wrote", "as written",
        "以 root 在仓库根目录输入，课程目录换成临时的班级文件夹；写出的文件由同一文件的测试读回核对")
       for fmt in ("canvas", "moodle", "xlsx")},
    "make export COURSE=课程目录 FORMAT=xlsx OUT=成绩.xlsx ASSIGNMENT=ch05-softmax,quiz-sdpa": _entry(
        "tests/test_export.py::test_out_and_a_choice_of_assignments_as_written", "as written",
        "成绩.xlsx 换成临时目录里的路径"),
    # JupyterHub: the tested single-server configuration
    **{command: _entry(f"{ROUTES}::test_the_hub_block_of_the_instructor_guide_as_written", "as written",
                       "四行一起以 root 在检出目录的临时副本的根目录里输入，在一个私有的挂载命名空间里，"
                       "/srv 是一个空的 tmpfs（这台机器的 /srv 不变）；Hub 在默认端口上回答后用 SIGTERM 停下；"
                       "班级的完整流程见 "
                       "tests/test_hub_exchange.py（同一份配置）")
       for command in ("mkdir -p /srv/nbgrader/exchange && chmod ugo+rw /srv/nbgrader/exchange",
                       "export NBGRADER_EXCHANGE=/srv/nbgrader/exchange",
                       "export ATTENTION_HUB_HOMES=/srv/attention-hub/home",
                       'PATH="$PWD/.venv/hub-proxy/node_modules/.bin:$PATH" .venv/bin/jupyterhub -f '
                       "grading/hub/jupyterhub_config.py")},
    "cd ~/attention-zh": _entry(ROUTE, "as written", HUB_TERMINAL),
    "nbgrader generate_assignment ch05-softmax --course attention-zh --force": _entry(ROUTE, "as written",
                                                                                    HUB_TERMINAL),
    **{f"nbgrader {step} ch05-softmax --course attention-zh": _entry(ROUTE, "as written", HUB_TERMINAL)
       for step in ("release_assignment", "collect", "autograde", "generate_feedback", "release_feedback")},
    "nbgrader generate_assignment": _entry(
        f"{ROUTES}::test_make_release_as_written", "equivalent",
        "正文描述 make release 在临时课程目录里运行的 nbgrader 步骤；make release 本身按原文运行"),
    "sudo useradd --system --no-create-home --shell /usr/sbin/nologin attn-grader": _entry(
        "tests/test_fire_drill.py::test_a_sandbox_user_must_exist_and_must_not_be_root", "not run",
        "在整台机器上建用户；测试用 nobody 和不存在的用户检查沙箱对用户的要求"),
    "docker run --network none": _entry("", "not run", "只是一个建议的片段，不是完整的命令；本课程不带容器镜像"),
}


def _test_exists(node: str) -> bool:
    path, _, name = node.partition("::")
    file = REPO / path
    return file.exists() and re.search(rf"^(async )?def {re.escape(name)}\(", file.read_text(encoding="utf-8"),
                                       re.M) is not None


def test_every_documented_command_is_registered_to_an_existing_test():
    found = documented()
    assert len(found) > 30, sorted(found)
    missing = {c: sorted(where) for c, where in found.items() if c not in REGISTRY}
    assert not missing, f"这些写在文档里的命令没有测试运行它（在 REGISTRY 里登记并写一个测试）：{missing}"
    stale = sorted(set(REGISTRY) - set(found))
    assert not stale, f"REGISTRY 里的这些命令已经不在文档里：{stale}"
    for command, entry in REGISTRY.items():
        assert entry["how"] in ("as written", "equivalent", "ci", "not run"), command
        if entry["how"] in ("as written", "equivalent"):
            assert _test_exists(entry["test"]), f"{command!r}: 登记的测试 {entry['test']} 不存在"
        if entry["how"] != "as written":
            assert entry["why"], f"{command!r}: 不是按原文运行时要说明原因"


def test_a_new_command_in_a_guide_fails_the_registry(tmp_path, monkeypatch):
    """The check above is not vacuous: a command added to a guide without a test is reported."""
    fake = tmp_path / "repo"
    for name in ("README.md", *PAGES):
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, fake / name)
    (fake / "solutions").mkdir()
    guide = fake / "book" / "instructor-guide.md"
    guide.write_text(guide.read_text(encoding="utf-8") + "\n```bash\nmake frobnicate COURSE=课程目录\n```\n",
                     encoding="utf-8")
    monkeypatch.setattr(__import__(__name__), "REPO", fake)
    assert "make frobnicate COURSE=课程目录" in documented()
    with pytest.raises(AssertionError, match="make frobnicate"):
        test_every_documented_command_is_registered_to_an_existing_test()


def test_each_notebook_tells_the_student_to_validate_itself():
    for path in sorted((REPO / "solutions").glob("ch*/*.ipynb")):
        intro = nbformat.read(path, as_version=4).cells[0].source
        assert f"`nbgrader validate {path.name}`" in intro, path


# --------------------------------------------------------------------------- running them

def _venv_env(**extra) -> dict:
    """The environment after ``source .venv/bin/activate`` (what the guides ask before nbgrader commands)."""
    env = dict(os.environ, VIRTUAL_ENV=str(REPO / ".venv"), **extra)
    env["PATH"] = os.pathsep.join([str(REPO / ".venv" / "bin"), "/usr/local/bin:/usr/bin:/bin"])
    return env


def _plain_env() -> dict:
    """A login shell's environment: no virtual environment on PATH (``make`` sets up its own)."""
    # nor an outer make's variables: run inside `make test`, a documented `make X` would otherwise print
    # make's "Entering directory" lines, which a reader's shell never shows
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return env


def _guide_command(pattern: str, page: str = "book/instructor-guide.md") -> str:
    """The one documented command matching ``pattern`` on ``page`` (so the test types the page's own text)."""
    text = (REPO / page).read_text(encoding="utf-8")
    hits = sorted({c for c in [*_bash_blocks(text), *_spans(text)] if re.fullmatch(pattern, normalise(c))})
    assert len(hits) == 1, (pattern, hits)
    return normalise(hits[0])


def _as_written(command: str, **paths: str) -> str:
    """The command with its placeholders (``课程目录``, ``页面.html``) replaced by temporary paths."""
    for placeholder, value in paths.items():
        command = command.replace(placeholder, value)
    return command


ENGLISH_FALLBACK = re.compile(
    r"Traceback \(most recent call last\)|\[(AutogradeApp|GenerateFeedbackApp)\] (ERROR|WARNING)")
REMOTE = re.compile(r"""(src|href)\s*=\s*["']?(https?:)?//""", re.I)


def _run(command: str, *, cwd=REPO, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env or _plain_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)


def _class_directory(root: pathlib.Path, assignment: str, students: dict) -> pathlib.Path:
    """A class directory built the way the 教师指南 builds one: ``COURSE/submitted/<学生编号>/<练习编号>/``."""
    course = root / "课程目录"
    for student, folder in students.items():
        dest = course / "submitted" / student / assignment
        shutil.copytree(folder, dest)
        for damaged in dest.glob("*.ipynb.broken"):
            damaged.rename(damaged.with_suffix(""))
    return course


CH05 = {name: REPO / "grading" / "samples" / "ch05-softmax" / name for name in ("correct", "blank", "broken_json")}


@pytest.mark.slow
@pytest.mark.grading
def test_make_grade_class_as_written(tmp_path):
    """README's and the 教师指南's ``make grade-class`` lines, from the repository root, as root and as nobody."""
    course = _class_directory(tmp_path, "ch05-softmax", CH05)
    readme = "make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录"
    guide = _guide_command(r"make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 JOBS=2")
    script = _guide_command(r"\.venv/bin/python scripts/grade_class\.py ch05-softmax --course 课程目录 --jobs 2")
    strict = _guide_command(r"\.venv/bin/python scripts/grade_class\.py ch05-softmax --course 课程目录 --strict")
    sandbox = _guide_command(r"make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 SANDBOX=nobody")
    assert readme in documented()

    def check(run, *, status=0):
        out = run.stdout + run.stderr
        assert run.returncode == status, out[-3000:]
        assert "无法评分" in out and "broken_json" in out and "correct" in out, out[-3000:]
        assert not ENGLISH_FALLBACK.search(out), out[-3000:]
        assert "make: ***" not in out
        rows = (course / "grades.csv").read_text(encoding="utf-8").splitlines()
        assert rows[0].split(",")[-1].strip() == "status" and any(r.endswith("无法评分") for r in rows), rows

    for command in (readme, guide, script):
        check(_run(_as_written(command, 课程目录=str(course))))
    check(_run(_as_written(strict, 课程目录=str(course))), status=1)
    if os.geteuid() == 0:
        check(_run(_as_written(sandbox, 课程目录=str(course))))
        # an ordinary user (nobody) with a class of their own: the same command, no sandbox warning needed.
        # The checkout's interpreter is under /root/.pyenv, which nobody cannot enter: as_user shows nobody
        # that one tree (read-only, in a private mount namespace), as on a machine with a world-readable Python
        with reachable_tmp() as reachable:
            theirs = _class_directory(reachable, "ch05-softmax", CH05)
            subprocess.run(["chown", "-R", "nobody:nogroup", str(theirs)], check=True)
            run = subprocess.run(as_user(_as_written(readme, 课程目录=str(theirs)), home=theirs), cwd=REPO,
                                 env=_plain_env(), capture_output=True, text=True, timeout=900, check=False)
            graded = (theirs / "grades.csv").exists()
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-3000:]
        assert "无法评分" in out and not ENGLISH_FALLBACK.search(out) and "SANDBOX" not in out, out[-3000:]
        assert graded


@pytest.mark.slow
@pytest.mark.grading
def test_make_report_as_written(tmp_path):
    """``make report`` and its script form on a quiz class graded by ``make grade-class``: an offline Chinese page."""
    drill = REPO / "grading" / "fire-drill" / "quiz-sdpa"
    course = _class_directory(tmp_path, "quiz-sdpa", {p.name: p for p in sorted(drill.iterdir()) if p.is_dir()})
    graded = _run(_as_written("make grade-class ASSIGNMENT=quiz-sdpa COURSE=课程目录", 课程目录=str(course)))
    assert graded.returncode == 0, (graded.stdout + graded.stderr)[-3000:]
    make = _guide_command(r"make report ASSIGNMENT=quiz-sdpa COURSE=课程目录")
    script = _guide_command(r"\.venv/bin/python scripts/item_analysis\.py 课程目录 quiz-sdpa -o 页面\.html")
    page_out = tmp_path / "页面.html"
    for command, page in ((make, course / "reports" / "quiz-sdpa-item-analysis.html"), (script, page_out)):
        run = _run(_as_written(command, 课程目录=str(course), **{"页面.html": str(page_out)}))
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-3000:]
        assert "题目分析页面" in out and "份提交纳入统计" in out and not ENGLISH_FALLBACK.search(out), out
        text = page.read_text(encoding="utf-8")
        assert 'lang="zh-CN"' in text and "题目分析" in text and "选项分析" in text
        assert not REMOTE.search(text) and not re.search(r"https?://", re.sub(r'src="data:[^"]*"', "", text))


def test_make_lint_as_written():
    run = _run("make lint", timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "All checks passed" in run.stdout


def _pins(text: str) -> dict[str, str]:
    """``{normalised name: line}`` of a constraints file's pins (PEP 503 names: case and ``-_.`` do not matter)."""
    return {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower(): line
            for line in text.splitlines() if line and not line.startswith("#")}


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_make_lock_as_written_writes_the_committed_constraints(tmp_path, user):
    """README: ``make lock`` from the root of a copy of the checkout rewrites constraints.txt; it must write the
    committed file back line for line (its comment header included), so a maintainer who runs it after changing
    requirements.txt sees only the versions that changed."""
    if user != "root" and os.geteuid() != 0:
        pytest.skip("切换到普通用户 nobody 需要 root")
    command = _guide_command("make lock", "README.md")
    with reachable_tmp() as tmp:
        copy = copy_checkout(tmp / "repo", owner=None if user == "root" else user)
        written = copy / "constraints.txt"
        os.utime(written, (1, 1))  # so a rewrite shows (and the file stays older than .venv/.installed)
        argv = ["bash", "-c", command] if user == "root" else as_user(f"cd {copy} && {command}", user=user)
        run = subprocess.run(argv, cwd=copy, env=_plain_env(), capture_output=True, text=True, timeout=300,
                             check=False)
        assert run.returncode == 0 and written.stat().st_mtime > 1, run.stdout + run.stderr
        written, committed = written.read_text(encoding="utf-8"), (REPO / "constraints.txt").read_text(encoding="utf-8")
    # a long-lived environment may keep packages an older requirements.txt installed (pip never removes them);
    # a fresh one (CI's) has none, and then the two files are equal as they stand
    fresh, pinned = _pins(written), _pins(committed)
    leftovers = set(fresh) - set(pinned)
    required = {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]).lower()
                for line in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")}
    assert not leftovers & required, sorted(leftovers & required)
    kept = [line for line in written.splitlines() if not line or line.startswith("#") or
            re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() not in leftovers]
    assert kept == committed.splitlines(), "make lock 写出的 constraints.txt 与提交的不同：请运行 make lock 并提交"


@pytest.mark.slow
@pytest.mark.grading
def test_validate_a_source_notebook_as_written():
    """The 教师指南: ``source .venv/bin/activate``, then validate the reference answer, from the repository root."""
    command = _guide_command(r"nbgrader validate solutions/ch05-softmax/ch05-softmax\.ipynb")
    run = _run(f"source .venv/bin/activate && {command}", timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "全部通过" in out and "Success!" not in out and "No nbgrader_config.py" not in out, out[-3000:]


@pytest.mark.slow
@pytest.mark.grading
def test_validate_from_the_repository_root_as_written(tmp_path):
    """The 学生指南's form outside JupyterLab, from the repository root, on a blank working copy."""
    command = _guide_command(r"\.venv/bin/nbgrader validate student-work/ch05-softmax/ch05-softmax\.ipynb",
                             "book/student-guide.md")
    work = REPO / "student-work" / "ch05-softmax" / "ch05-softmax.ipynb"
    target = tmp_path / "ch05-softmax.ipynb"
    shutil.copy(REPO / "notebooks" / "ch05-softmax" / "ch05-softmax.ipynb", target)
    # the student's own working copy is never touched: the same text, pointed at a fresh copy of the release
    run = _run(command.replace("student-work/ch05-softmax/ch05-softmax.ipynb", str(target)), timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0 and "练习 1 的测试单元没有拿到满分" in out and "得分 0 / 3" in out, out[-3000:]
    assert "No nbgrader_config.py" not in out and not re.search(r"^Traceback", out, re.M), out[-3000:]
    assert not work.exists() or work.stat().st_size > 0


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not pathlib.Path("/srv").is_dir(),
                    reason="以 root 输入这一行，并在私有挂载命名空间里换掉 /srv，需要 root 和 unshare")
def test_the_hub_exchange_directory_as_written():
    """The 教师指南's hub block, first line, typed as root from the repository root: an exchange everyone can write.

    Typed in a private mount namespace whose ``/srv`` is an empty tmpfs: the machine's ``/srv`` is not changed.
    """
    command = _guide_command(r"mkdir -p /srv/nbgrader/exchange && chmod ugo\+rw /srv/nbgrader/exchange")
    guide = (REPO / "book" / "instructor-guide.md").read_text(encoding="utf-8")
    prose = guide[:guide.index(command)].rsplit("\n\n", 2)[-2]
    assert "root" in prose and "sudo" in prose, prose  # says who types it, and what a sudoer adds
    before = os.path.exists("/srv/nbgrader")
    script = f"mount -t tmpfs -o mode=755 tmpfs /srv && {command} && stat -c %A /srv/nbgrader/exchange"
    run = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", script], cwd=REPO,
                         env=_plain_env(), capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split()[-1] == "drwxrwxrwx", run.stdout
    assert os.path.exists("/srv/nbgrader") == before, "the machine's /srv changed"


@pytest.mark.slow
def test_make_bench_one_bench_as_written():
    """README: one benchmark by name, from the repository root (about 20 s): that one only, with its ratio."""
    command = _guide_command(r"make bench BENCH=\w+", "README.md")
    run = _run(command, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "=== bench_kv_cache ===" in out and out.count("=== bench_") == 1, out[-3000:]
    assert re.search(r"speed-up\s+[\d.]+x \(target >= \d+x\), same tokens: True", out), out[-3000:]
