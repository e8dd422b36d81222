"""Install what the tests need besides Python packages (``make test`` runs this first).

Five programs are needed: a font with Chinese glyphs (figures, the book,
screenshots), headless Chromium (the browser tests), nginx (a real static web
server: the built book served from a sub-path, as on GitHub Pages), npm's
``configurable-http-proxy``, JupyterHub's proxy (the class-exchange test on a
real JupyterHub) and npm's ``axe-core``, the accessibility checker the browser
tests run in every page of the book.  As root on a machine with apt, the missing
system packages are installed; the two npm packages are installed, pinned, into
the project (``.venv/hub-proxy`` and ``.venv/axe-core``, as any user; as root,
Debian's ``nodejs npm`` first when npm is missing).  Whatever is still missing then gets one printed line with the
command that installs it, and the tests that need it are skipped with the same
reason (see ``tests/conftest.py``).  It never fails: every other test still runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from build_book import FONT_PACKAGES, cjk_fonts

#: Executable names of Chromium (Debian's package installs ``chromium``).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_PACKAGES = ["chromium"]
#: Debian's nginx: tests/test_site_subpath.py serves the built book from a sub-path with it (installed in /usr/sbin,
#: which an ordinary user's PATH may not hold: looked for there too).
NGINX_PACKAGES = ["nginx"]

ROOT = Path(__file__).resolve().parents[1]
#: JupyterHub's proxy, pinned: 4.6 runs on Debian 12's Node.js 18 (5.x asks for Node.js 20).
PROXY_PACKAGE = "configurable-http-proxy@4.6.3"
NODE_PACKAGES = ["nodejs", "npm"]


def proxy_prefix() -> Path:
    """Where npm installs the proxy: ``.venv/hub-proxy`` (``$ATTENTION_HUB_PROXY_PREFIX`` if set)."""
    return Path(os.environ.get("ATTENTION_HUB_PROXY_PREFIX") or ROOT / ".venv" / "hub-proxy")


def proxy_install_command() -> list[str]:
    """The npm command that installs the pinned proxy into :func:`proxy_prefix`."""
    return ["npm", "install", "--prefix", str(proxy_prefix()), "--no-audit", "--no-fund", PROXY_PACKAGE]


#: axe-core, pinned: the accessibility rules the browser tests check every page of the book against.
AXE_PACKAGE = "axe-core@4.14.1"


def axe_prefix() -> Path:
    """Where npm installs axe-core: ``.venv/axe-core`` (``$ATTENTION_AXE_PREFIX`` if set)."""
    return Path(os.environ.get("ATTENTION_AXE_PREFIX") or ROOT / ".venv" / "axe-core")


def axe_install_command() -> list[str]:
    """The npm command that installs the pinned axe-core into :func:`axe_prefix`."""
    return ["npm", "install", "--prefix", str(axe_prefix()), "--no-audit", "--no-fund", "--save-exact", AXE_PACKAGE]


NO_PROXY = ("找不到 configurable-http-proxy（JupyterHub 的代理），JupyterHub 测试跳过。安装：sudo apt-get install -y "
            "--no-install-recommends " + " ".join(NODE_PACKAGES) + " && " + " ".join(proxy_install_command())
            + " (configurable-http-proxy not found: JupyterHub tests skipped)")
NO_AXE = ("找不到 axe-core（无障碍检查），无障碍测试跳过。安装：sudo apt-get install -y --no-install-recommends "
          + " ".join(NODE_PACKAGES) + " && " + " ".join(axe_install_command())
          + " (axe-core not found: accessibility tests skipped)")
NO_CHROMIUM = ("找不到 Chromium，浏览器测试跳过。安装：sudo apt-get install -y --no-install-recommends chromium "
               "(headless Chromium not found: browser tests skipped)")
NO_NGINX = ("找不到 nginx（静态网站服务器），从子路径访问电子书的测试跳过。安装：sudo apt-get install -y "
            "--no-install-recommends " + " ".join(NGINX_PACKAGES)
            + " (nginx not found: the sub-path site test skipped)")
NO_FONT = ("找不到中文字体，需要它的测试（书、图、浏览器）跳过。安装：sudo apt-get install -y --no-install-recommends "
           + " ".join(FONT_PACKAGES) + " (no CJK font: tests that draw Chinese skipped)")


def find_chromium() -> str | None:
    """Path of a Chromium executable on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def find_nginx() -> str | None:
    """Path of the ``nginx`` executable (on PATH, or in ``/usr/sbin`` where Debian puts it), or None."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")


def find_proxy() -> str | None:
    """Path of ``configurable-http-proxy``: the project's own copy, else one on PATH, or None."""
    local = proxy_prefix() / "node_modules" / ".bin" / "configurable-http-proxy"
    if os.access(local, os.X_OK):
        return str(local)
    return shutil.which("configurable-http-proxy")


def find_axe() -> str | None:
    """Path of the pinned axe-core's ``axe.min.js`` in :func:`axe_prefix`, or None (missing, or another version)."""
    package = axe_prefix() / "node_modules" / "axe-core"
    try:
        version = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None
    script = package / "axe.min.js"
    return str(script) if version == AXE_PACKAGE.split("@")[1] and script.is_file() else None


def proxy_bin_dir() -> str | None:
    """The folder to put on PATH so that JupyterHub finds its proxy, or None where there is none."""
    path = find_proxy()
    return str(Path(path).parent) if path else None


def missing_packages() -> list[str]:
    """Debian packages that would provide what is missing here."""
    packages = [] if cjk_fonts() else list(FONT_PACKAGES)
    return packages + ([] if find_chromium() else CHROMIUM_PACKAGES) + ([] if find_nginx() else NGINX_PACKAGES)


def can_install() -> bool:
    """Root with apt-get: the only case where this script installs anything."""
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") is not None


def apt_install(packages: list[str]) -> None:
    """``apt-get install`` the packages, refreshing the package lists first if the first try fails."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(command, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, check=False)
        subprocess.run(command, env=env, check=False)


def have_npm() -> bool:
    """Whether npm is on PATH; as root without it, Debian's Node.js and npm are installed first."""
    if shutil.which("npm") is None and can_install():
        print("正在安装 Node.js 和 npm (installing): " + " ".join(NODE_PACKAGES), flush=True)
        apt_install(NODE_PACKAGES)
    return shutil.which("npm") is not None


def install_proxy() -> None:
    """``npm install`` the pinned proxy into the project (as root, Debian's Node.js and npm first if npm is missing)."""
    if not have_npm():
        return
    print("正在安装 JupyterHub 的代理 (installing): " + PROXY_PACKAGE, flush=True)
    subprocess.run(proxy_install_command(), check=False)


def install_axe() -> None:
    """``npm install`` the pinned axe-core into the project (npm as in :func:`install_proxy`)."""
    if not have_npm():
        return
    print("正在安装无障碍检查 axe-core (installing): " + AXE_PACKAGE, flush=True)
    subprocess.run(axe_install_command(), check=False)


def main() -> int:
    if find_proxy() is None:
        install_proxy()
    if find_axe() is None:
        install_axe()
    packages = missing_packages()
    if packages and can_install():
        print("正在安装测试所需的系统软件包 (installing): " + " ".join(packages), flush=True)
        apt_install(packages)
    if not cjk_fonts():
        print(NO_FONT, flush=True)
    if not find_chromium():
        print(NO_CHROMIUM, flush=True)
    if not find_nginx():
        print(NO_NGINX, flush=True)
    if not find_proxy():
        print(NO_PROXY, flush=True)
    if not find_axe():
        print(NO_AXE, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
