"""The book's deployment workflow (``.github/workflows/pages.yml``): linted, and held to the README's command.

* zizmor (a static checker of GitHub Actions workflows: it validates each file against the workflow schema, then
  audits it -- unpinned actions, credentials left in the checkout, template injection, broad permissions)
  finds nothing in the repository's workflows, run offline; on a broken workflow it does report, so the check is
  not vacuous.
* The workflow builds with the README's own command (``make pdf``: the executed book, then the whole-book PDF
  copied into ``_build/html``), uploads ``_build/html`` and deploys it to GitHub Pages on a push to main, with
  every action pinned to a full commit (its version in a comment).  The suite runs that very command:
  ``tests/test_site_subpath.py`` takes it from this file (:func:`build_command`) and serves its ``_build/html``.

A real deployment to GitHub Pages cannot run here (no GitHub): what is tested is the file and the build it runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
PAGES = WORKFLOWS / "pages.yml"
ZIZMOR = Path(sys.executable).parent / "zizmor"
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def workflow() -> dict:
    data = yaml.safe_load(PAGES.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def build_command() -> str:
    """The command the workflow builds the site with (the one step between the checkout and the upload)."""
    steps = workflow()["jobs"]["build"]["steps"]
    upload = next(i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/upload-pages-artifact"))
    checkout = next(i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/checkout"))
    (command,) = [s["run"].strip() for s in steps[checkout + 1: upload] if "run" in s]
    return command


def _zizmor(*paths) -> subprocess.CompletedProcess:
    return subprocess.run([str(ZIZMOR), "--offline", "--no-progress", *map(str, paths)], capture_output=True,
                          text=True, timeout=120, check=False)


def test_zizmor_finds_nothing_in_the_workflows():
    assert ZIZMOR.is_file(), "zizmor 没有装进环境（requirements.txt）"
    run = _zizmor(WORKFLOWS)
    assert run.returncode == 0 and "No findings" in run.stdout + run.stderr, run.stdout + run.stderr


def test_zizmor_reports_a_broken_workflow(tmp_path):
    """The lint is real: an unknown key fails validation; an unpinned action and a template injection are named."""
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    invalid = folder / "invalid.yml"
    invalid.write_text("on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    stepz:\n      - run: make pdf\n",
                       encoding="utf-8")
    run = _zizmor(invalid)
    assert run.returncode != 0 and "does not match expected validation schema" in run.stderr, run.stderr
    unsafe = folder / "unsafe.yml"
    unsafe.write_text("on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - uses: actions/checkout@v4\n"
                      "      - run: echo \"${{ github.event.head_commit.message }}\"\n", encoding="utf-8")
    run = _zizmor(unsafe)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "unpinned-uses" in out and "template-injection" in out, out


def test_the_workflow_deploys_the_readme_build_to_pages_on_a_push_to_main():
    data = workflow()
    assert data["on"]["push"]["branches"] == ["main"]
    assert data["permissions"] == {"contents": "read"}
    build, deploy = data["jobs"]["build"], data["jobs"]["deploy"]
    assert build_command() == "make pdf"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `make pdf` |"))
    assert "_build/html" in row, "README 里 make pdf 的说明应当写明它把 PDF 放进 _build/html"
    installs = " ".join(s.get("run", "") for s in build["steps"])
    for package in ("chromium", "fonts-wqy-microhei", "python3-venv", "git", "make"):
        assert re.search(rf"\b{re.escape(package)}\b", installs), package
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in deploy["steps"])


def test_every_action_is_pinned_to_a_commit_with_its_version_named():
    text = PAGES.read_text(encoding="utf-8")
    uses = re.findall(r"uses:\s*(\S+)(?:\s*#\s*(v[\d.]+))?", text)
    assert len(uses) >= 3
    for action, version in uses:
        assert PINNED.match(action), f"没有固定到一个提交的 action：{action}"
        assert version, f"{action} 后面应当注明版本（# vX.Y.Z）"


@pytest.mark.skipif(shutil.which("git") is None, reason="git not found")
def test_the_workflow_is_in_the_repository():
    """The file is tracked or at least not ignored: a fork's push must carry it."""
    run = subprocess.run(["git", "check-ignore", "-q", str(PAGES)], cwd=ROOT, check=False)
    assert run.returncode == 1, ".github/workflows/pages.yml 被 .gitignore 忽略了"


def test_the_base_url_is_set_in_one_place_and_makes_canonical_links(tmp_path):
    """``_config.yml``'s ``html.baseurl`` (empty in the repository) becomes Sphinx's ``html_baseurl``; with it set,
    the book's theme writes each page's canonical address under it."""
    from jupyter_book.config import get_final_config

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["html"]["baseurl"] == ""
    config["html"]["baseurl"] = "https://owner.github.io/attention-zh/"
    final, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False}, sourcedir=ROOT,
                                validate=True, raise_on_invalid=True)
    assert final["html_baseurl"] == "https://owner.github.io/attention-zh/"
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(f"html_theme = {final['html_theme']!r}\nhtml_baseurl = {final['html_baseurl']!r}\n",
                                 encoding="utf-8")
    (src / "index.rst").write_text("前言\n====\n\n正文。\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(tmp_path / "out")],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert '<link rel="canonical" href="https://owner.github.io/attention-zh/index.html" />' in page
