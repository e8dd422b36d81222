"""Install what the tests need besides Python packages (``make test`` runs this first).

Two system programs are needed: a font with Chinese glyphs (figures, the book,
screenshots) and headless Chromium (the browser tests).  As root on a machine
with apt, the missing ones are installed; anywhere else this prints one line
per missing program with the command that installs it, and the tests that need
it are skipped with the same reason (see ``tests/conftest.py``).  It never
fails: every other test still runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from build_book import FONT_PACKAGES, cjk_fonts

#: Executable names of Chromium (Debian's package installs ``chromium``).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_PACKAGES = ["chromium"]

NO_CHROMIUM = ("找不到 Chromium，浏览器测试跳过。安装：sudo apt-get install -y --no-install-recommends chromium "
               "(headless Chromium not found: browser tests skipped)")
NO_FONT = ("找不到中文字体，需要它的测试（书、图、浏览器）跳过。安装：sudo apt-get install -y --no-install-recommends "
           + " ".join(FONT_PACKAGES) + " (no CJK font: tests that draw Chinese skipped)")


def find_chromium() -> str | None:
    """Path of a Chromium executable on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def missing_packages() -> list[str]:
    """Debian packages that would provide what is missing here."""
    packages = [] if cjk_fonts() else list(FONT_PACKAGES)
    return packages + ([] if find_chromium() else CHROMIUM_PACKAGES)


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


def main() -> int:
    packages = missing_packages()
    if packages and can_install():
        print("正在安装测试所需的系统软件包 (installing): " + " ".join(packages), flush=True)
        apt_install(packages)
    if not cjk_fonts():
        print(NO_FONT, flush=True)
    if not find_chromium():
        print(NO_CHROMIUM, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
