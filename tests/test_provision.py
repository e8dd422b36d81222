"""``make test`` on a fresh machine: the system programs are installed, or their tests skip with the reason.

Both ways a new user meets it are run for real in a subprocess:

* Chromium hidden from PATH and not installable: the browser tests are reported
  as skipped with the install command, and pytest exits 0;
* ``scripts/provision.py`` on a machine without Chromium or a CJK font: as root
  it runs apt-get for exactly the missing packages (a stand-in apt-get records
  the call and "installs" the programs), and afterwards finds them; as another
  user it installs nothing and prints one line per missing program.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, provision

VENV_BIN = str(Path(sys.executable).parent)


def _executable(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_browser_tests_skip_with_the_install_command_when_chromium_is_hidden(tmp_path):
    env = dict(os.environ, PATH=VENV_BIN)  # this environment's Python only: no chromium, no apt-get
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "browser", "-p", "no:cacheprovider", "-q", "-rs",
         "tests/test_browser.py", "tests/test_selfcheck.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    summary = out.strip().splitlines()[-1]
    assert "passed" not in summary and "failed" not in summary and "error" not in summary, summary
    assert "找不到 Chromium" in out and "apt-get install -y --no-install-recommends chromium" in out, out[-2000:]
    skipped = re.search(r"(\d+) skipped", summary)
    assert skipped and int(skipped.group(1)) >= 6, summary


@pytest.fixture
def bare_machine(tmp_path):
    """A PATH with no Chromium, no fontconfig, and a stand-in apt-get that installs both when asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    chmod = shutil.which("chmod")  # the stand-in runs with this PATH alone, so it names chmod in full
    _executable(bin_dir / "apt-get", f"""echo "$@" >> {log}
case "$*" in
  *install*chromium*) printf '#!/bin/sh\\n' > {bin_dir}/chromium; {chmod} +x {bin_dir}/chromium ;;
esac
case "$*" in
  *install*fonts-wqy-microhei*)
    printf '#!/bin/sh\\necho "WenQuanYi Micro Hei,文泉驿微米黑"\\n' > {bin_dir}/fc-list; {chmod} +x {bin_dir}/fc-list ;;
esac
""")
    return bin_dir, log


def _provision(bin_dir: Path, **extra_env) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), VENV_BIN]), **extra_env)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "provision.py")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="installs only as root")
def test_as_root_the_missing_programs_are_installed_with_apt(bare_machine, tmp_path):
    bin_dir, log = bare_machine
    proxy = tmp_path / "proxy"  # the hub proxy counts as installed here: its own tests are below
    _executable(proxy / "node_modules" / ".bin" / "configurable-http-proxy", "exit 0\n")
    run = _provision(bin_dir, ATTENTION_HUB_PROXY_PREFIX=str(proxy))
    assert run.returncode == 0, run.stderr
    calls = log.read_text(encoding="utf-8").splitlines()
    installs = [c for c in calls if c.startswith("install")]
    assert installs and all("--no-install-recommends" in c for c in installs), calls
    asked = set(installs[-1].split()[-3:])
    assert asked == {"fonts-wqy-microhei", "fontconfig", "chromium"}, calls
    assert (bin_dir / "chromium").is_file() and (bin_dir / "fc-list").is_file()
    assert "找不到" not in run.stdout, run.stdout  # after installing, nothing is reported missing


def test_without_root_nothing_is_installed_and_each_missing_program_gets_one_line(bare_machine, monkeypatch):
    bin_dir, log = bare_machine
    monkeypatch.setattr(provision, "can_install", lambda: False)
    monkeypatch.setattr(provision, "find_chromium", lambda: None)
    monkeypatch.setattr(provision, "cjk_fonts", lambda: [])
    monkeypatch.setattr(provision, "find_axe", lambda: "/opt/axe-core/axe.min.js")  # its own tests are below
    monkeypatch.setattr(provision, "find_nginx", lambda: "/usr/sbin/nginx")  # its own tests are in test_site_subpath
    lines = []
    monkeypatch.setattr("builtins.print", lambda *args, **kwargs: lines.append(" ".join(map(str, args))))
    assert provision.main() == 0
    assert not log.exists(), "apt-get must not run without root"
    assert lines == [provision.NO_FONT, provision.NO_CHROMIUM]
    assert "apt-get install -y --no-install-recommends chromium" in provision.NO_CHROMIUM
    assert "apt-get install -y --no-install-recommends fonts-wqy-microhei" in provision.NO_FONT


def test_nothing_missing_means_no_apt_and_no_message(monkeypatch):
    monkeypatch.setattr(provision, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(provision, "cjk_fonts", lambda: ["WenQuanYi Micro Hei"])
    monkeypatch.setattr(provision, "find_nginx", lambda: "/usr/sbin/nginx")
    monkeypatch.setattr(provision, "apt_install", lambda packages: pytest.fail(f"apt for {packages}"))
    assert provision.missing_packages() == []
    assert provision.main() == 0


# --- configurable-http-proxy, JupyterHub's proxy: installed with npm into the project, or the hub tests skip

def test_hub_tests_skip_with_the_install_command_when_the_proxy_is_missing(tmp_path):
    env = dict(os.environ, PATH=VENV_BIN, ATTENTION_HUB_PROXY_PREFIX=str(tmp_path / "no-proxy"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "hub", "-p", "no:cacheprovider", "-q", "-rs",
         "tests/test_hub_exchange.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    summary = out.strip().splitlines()[-1]
    assert "passed" not in summary and "failed" not in summary and "error" not in summary, summary
    assert "找不到 configurable-http-proxy" in out and "apt-get install -y --no-install-recommends nodejs npm" in out
    assert f"npm install --prefix {tmp_path / 'no-proxy'}" in out, out[-2000:]
    skipped = re.search(r"(\d+) skipped", summary)
    assert skipped and int(skipped.group(1)) >= 5, summary


def _installed_axe(prefix: Path, version: str) -> Path:
    """What ``npm install --prefix PREFIX axe-core@VERSION`` leaves: its package.json and axe.min.js."""
    package = prefix / "node_modules" / "axe-core"
    package.mkdir(parents=True)
    (package / "package.json").write_text(f'{{"name": "axe-core", "version": "{version}"}}', encoding="utf-8")
    (package / "axe.min.js").write_text("window.axe = {};\n", encoding="utf-8")
    return package / "axe.min.js"


@pytest.fixture
def no_npm(tmp_path, monkeypatch):
    """A PATH without npm, a stand-in apt-get that installs a stand-in npm, and an empty proxy prefix.

    The stand-in npm records its arguments and "installs" the proxy (or axe-core) under ``--prefix``.
    axe-core counts as installed (its own tests are below).
    """
    bin_dir, prefix = tmp_path / "bin", tmp_path / "hub-proxy"
    bin_dir.mkdir()
    _installed_axe(tmp_path / "axe", provision.AXE_PACKAGE.split("@")[1])
    monkeypatch.setenv("ATTENTION_AXE_PREFIX", str(tmp_path / "axe"))
    apt_log, npm_log = tmp_path / "apt.log", tmp_path / "npm.log"
    mkdir, chmod, cp = (shutil.which(name) for name in ("mkdir", "chmod", "cp"))
    _executable(tmp_path / "npm", f"""echo "$@" >> {npm_log}
prefix=""
package=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--prefix" ]; then prefix="$2"; fi
  case "$1" in axe-core@*) package="$1" ;; esac
  shift
done
if [ -n "$package" ]; then
  axe="$prefix/node_modules/axe-core"
  {mkdir} -p "$axe"
  printf '{{"name": "axe-core", "version": "%s"}}' "${{package#axe-core@}}" > "$axe/package.json"
  printf 'window.axe = {{}};\\n' > "$axe/axe.min.js"
  exit 0
fi
{mkdir} -p "$prefix/node_modules/.bin"
printf '#!/bin/sh\\n' > "$prefix/node_modules/.bin/configurable-http-proxy"
{chmod} +x "$prefix/node_modules/.bin/configurable-http-proxy"
""")
    _executable(bin_dir / "apt-get", f"""echo "$@" >> {apt_log}
case "$*" in
  *install*nodejs*npm*) {cp} {tmp_path / "npm"} {bin_dir}/npm ;;
esac
""")
    return {"bin": bin_dir, "prefix": prefix, "apt_log": apt_log, "npm_log": npm_log, "npm": tmp_path / "npm"}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="installs only as root")
def test_as_root_npm_comes_from_apt_and_the_pinned_proxy_from_npm(no_npm):
    env = dict(os.environ, PATH=os.pathsep.join([str(no_npm["bin"]), VENV_BIN]),
               ATTENTION_HUB_PROXY_PREFIX=str(no_npm["prefix"]))
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "provision.py")], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    installs = [c for c in no_npm["apt_log"].read_text(encoding="utf-8").splitlines() if c.startswith("install")]
    assert installs[0].split()[-2:] == ["nodejs", "npm"] and "--no-install-recommends" in installs[0], installs
    assert no_npm["npm_log"].read_text(encoding="utf-8").split() == [
        "install", "--prefix", str(no_npm["prefix"]), "--no-audit", "--no-fund", "configurable-http-proxy@4.6.3"]
    assert (no_npm["prefix"] / "node_modules" / ".bin" / "configurable-http-proxy").is_file()
    assert "找不到 configurable-http-proxy" not in run.stdout, run.stdout


def test_without_root_npm_still_installs_the_proxy_into_the_project(no_npm, monkeypatch):
    shutil.copy(no_npm["npm"], no_npm["bin"] / "npm")  # npm is there; nothing needs root
    monkeypatch.setenv("PATH", str(no_npm["bin"]))
    monkeypatch.setenv("ATTENTION_HUB_PROXY_PREFIX", str(no_npm["prefix"]))
    monkeypatch.setattr(provision, "can_install", lambda: False)
    monkeypatch.setattr(provision, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(provision, "cjk_fonts", lambda: ["WenQuanYi Micro Hei"])
    monkeypatch.setattr(provision, "find_nginx", lambda: "/usr/sbin/nginx")
    monkeypatch.setattr(provision, "apt_install", lambda packages: pytest.fail(f"apt for {packages}"))
    lines = []
    monkeypatch.setattr("builtins.print", lambda *args, **kwargs: lines.append(" ".join(map(str, args))))
    assert provision.main() == 0
    assert "configurable-http-proxy@4.6.3" in no_npm["npm_log"].read_text(encoding="utf-8")
    assert provision.find_proxy() == str(no_npm["prefix"] / "node_modules" / ".bin" / "configurable-http-proxy")
    assert not [line for line in lines if "找不到" in line], lines


def test_without_root_and_npm_the_proxy_gets_one_line_with_both_commands(no_npm, monkeypatch):
    monkeypatch.setenv("PATH", str(no_npm["bin"]))  # the stand-in apt-get must not be used
    monkeypatch.setenv("ATTENTION_HUB_PROXY_PREFIX", str(no_npm["prefix"]))
    monkeypatch.setattr(provision, "can_install", lambda: False)
    monkeypatch.setattr(provision, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(provision, "cjk_fonts", lambda: ["WenQuanYi Micro Hei"])
    lines = []
    monkeypatch.setattr("builtins.print", lambda *args, **kwargs: lines.append(" ".join(map(str, args))))
    assert provision.main() == 0
    assert not no_npm["apt_log"].exists() and not no_npm["npm_log"].exists()
    assert lines == [provision.NO_PROXY]
    assert "apt-get install -y --no-install-recommends nodejs npm && npm install --prefix" in provision.NO_PROXY
    assert provision.NO_PROXY.split(" (")[0].endswith("configurable-http-proxy@4.6.3")


# --- axe-core, the accessibility checker of the browser tests: installed with npm into the project, or they skip

def test_the_pinned_axe_core_is_found_only_in_its_version(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_AXE_PREFIX", str(tmp_path))
    assert provision.find_axe() is None
    script = _installed_axe(tmp_path, "4.0.0")
    assert provision.find_axe() is None, "another version of axe-core does not count"
    (script.parent / "package.json").write_text(
        f'{{"version": "{provision.AXE_PACKAGE.split("@")[1]}"}}', encoding="utf-8")
    assert provision.find_axe() == str(script)


def test_without_root_npm_installs_the_pinned_axe_core_into_the_project(no_npm, monkeypatch, tmp_path):
    shutil.copy(no_npm["npm"], no_npm["bin"] / "npm")
    monkeypatch.setenv("PATH", str(no_npm["bin"]))
    monkeypatch.setenv("ATTENTION_AXE_PREFIX", str(tmp_path / "no-axe"))
    monkeypatch.setattr(provision, "find_proxy", lambda: "/opt/proxy/configurable-http-proxy")
    monkeypatch.setattr(provision, "can_install", lambda: False)
    monkeypatch.setattr(provision, "missing_packages", lambda: [])
    monkeypatch.setattr(provision, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(provision, "cjk_fonts", lambda: ["WenQuanYi Micro Hei"])
    lines = []
    monkeypatch.setattr("builtins.print", lambda *args, **kwargs: lines.append(" ".join(map(str, args))))
    assert provision.main() == 0
    assert no_npm["npm_log"].read_text(encoding="utf-8").split() == [
        "install", "--prefix", str(tmp_path / "no-axe"), "--no-audit", "--no-fund", "--save-exact", "axe-core@4.14.1"]
    assert provision.find_axe() == str(tmp_path / "no-axe" / "node_modules" / "axe-core" / "axe.min.js")
    assert not [line for line in lines if "找不到" in line], lines


@pytest.mark.browser  # with Chromium there, what the axe tests lack is axe-core alone
def test_without_root_and_npm_axe_core_gets_one_line_and_its_tests_skip(no_npm, monkeypatch, tmp_path):
    path = os.environ["PATH"]  # where Chromium is, for the run of the axe tests below
    monkeypatch.setenv("PATH", str(no_npm["bin"]))
    monkeypatch.setenv("ATTENTION_AXE_PREFIX", str(tmp_path / "no-axe"))
    monkeypatch.setattr(provision, "find_proxy", lambda: "/opt/proxy/configurable-http-proxy")
    monkeypatch.setattr(provision, "can_install", lambda: False)
    monkeypatch.setattr(provision, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(provision, "cjk_fonts", lambda: ["WenQuanYi Micro Hei"])
    lines = []
    monkeypatch.setattr("builtins.print", lambda *args, **kwargs: lines.append(" ".join(map(str, args))))
    assert provision.main() == 0
    assert lines == [provision.NO_AXE] and not no_npm["npm_log"].exists()
    assert provision.NO_AXE.split(" (")[0].endswith("--save-exact axe-core@4.14.1")
    env = dict(os.environ, PATH=path, ATTENTION_AXE_PREFIX=str(tmp_path / "no-axe"))  # only axe-core lacks
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "axe", "-p", "no:cacheprovider", "-q", "-rs",
                          "tests/test_browser.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0 and "passed" not in out.strip().splitlines()[-1], out[-3000:]
    assert "找不到 axe-core" in out and "skipped" in out.strip().splitlines()[-1], out[-2000:]
