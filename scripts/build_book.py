"""Build the course book into ``_build/html`` (``make book``).

Steps: make sure a font with Chinese glyphs is installed (figures need it),
give matplotlib a fresh config directory under ``_build/`` (so its font cache
is rebuilt and sees that font), run ``jupyter-book build`` with warnings as
errors (every warning is reported first, then the build fails), and print
where to open the book.

Two levels of caching keep rebuilds cheap and correct:

* Lessons are executed through Jupyter Book's cache (``_build/.jupyter_cache``),
  keyed on each lesson's code: an unchanged lesson is never executed again.
* After a successful build the digests of every input are written to
  ``_build/.book-inputs.json``.  When nothing changed, the next build returns at
  once without starting Sphinx at all.  When ``attnlib`` (or the pinned
  packages) changed, the execution cache is cleared and every page rebuilt,
  because the lessons' outputs come from the library even though their code
  did not change.

Other code (tests, benchmarks) calls :func:`build`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FONT_PACKAGES = ["fonts-wqy-microhei", "fontconfig"]

#: What the book's pages are made of (relative to the book's root).
BOOK_INPUTS = ("_config.yml", "_toc.yml", "book", "notebooks", "scripts/build_book.py")
#: What the lessons' executed outputs depend on besides their own code.
LIBRARY_INPUTS = ("attnlib", "pyproject.toml", "constraints.txt")
STATE_FILE = ".book-inputs.json"

NO_FONT_MESSAGE = (
    "没有找到中文字体：书中图片里的中文会显示成方框。请以 root 身份安装：\n"
    "    apt-get install -y --no-install-recommends fonts-wqy-microhei fontconfig\n"
    "No font with Chinese glyphs is installed (figures would show boxes). As root, run the command above."
)


class BookBuildError(RuntimeError):
    """The book did not build (a warning, a failing lesson, or a missing prerequisite)."""


@dataclass
class BuildResult:
    """What one build did."""

    returncode: int
    seconds: float
    html_dir: Path
    log: str | None  # the combined output when captured, else None
    up_to_date: bool = False  # nothing changed: Jupyter Book was not run

    @property
    def index(self) -> Path:
        return self.html_dir / "index.html"


def cjk_fonts() -> list[str]:
    """Families fontconfig knows with Chinese glyphs (empty when none, or when fontconfig is missing)."""
    if not shutil.which("fc-list"):
        return []
    out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, check=False).stdout
    return sorted({line.split(",")[0].strip() for line in out.splitlines() if line.strip()})


def ensure_cjk_font(*, install: bool = True) -> str:
    """Return an installed CJK font family, installing fonts-wqy-microhei with apt when root.

    Raises
    ------
    BookBuildError
        No CJK font, and it cannot be installed here (not root, no apt-get, or apt failed).
    """
    fonts = cjk_fonts()
    if fonts:
        return fonts[0]
    can_install = install and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")
    if not can_install:
        raise BookBuildError(NO_FONT_MESSAGE)
    print("正在安装中文字体 (installing a CJK font): " + " ".join(FONT_PACKAGES), flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", *FONT_PACKAGES]
    if subprocess.run(command, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=False)
        subprocess.run(command, env=env, check=False)
    fonts = cjk_fonts()
    if not fonts:
        raise BookBuildError(NO_FONT_MESSAGE)
    return fonts[0]


def fresh_mplconfigdir(build_dir: Path) -> Path:
    """An empty matplotlib config/cache directory under ``build_dir``."""
    path = build_dir / ".matplotlib"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def inputs_digest(source: Path, parts: tuple[str, ...]) -> str:
    """SHA-256 over the names and contents of every file under ``parts`` of ``source`` (missing parts skipped)."""
    digest = hashlib.sha256()
    for part in parts:
        top = source / part
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else []
        for path in files:
            if "__pycache__" in path.parts or ".ipynb_checkpoints" in path.parts:
                continue
            digest.update(path.relative_to(source).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _read_state(build_dir: Path) -> dict:
    try:
        return json.loads((build_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def build_environment(build_dir: Path) -> dict:
    """The environment Jupyter Book runs in: a fresh matplotlib config under ``build_dir``, UTF-8 output."""
    env = {**os.environ, "MPLCONFIGDIR": str(fresh_mplconfigdir(build_dir)), "PYTHONIOENCODING": "utf-8"}
    env.pop("MPLBACKEND", None)  # the kernel picks its inline backend itself
    return env


def jupyter_book_command(source: Path, path_output: str | os.PathLike, builder: str, *,
                         all_pages: bool = False) -> list[str]:
    """``jupyter-book build`` of ``source`` into ``<path_output>/_build/<builder>``, warnings as errors."""
    command = [
        sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
        "build", str(source), "--path-output", str(Path(path_output).resolve()),
        "--builder", builder, "-W", "--keep-going",
    ]
    return command + (["--all"] if all_pages else [])


def build(path_output: str | os.PathLike = ROOT, *, source: str | os.PathLike = ROOT, capture: bool = False,
          all_pages: bool = False, install_font: bool = True, force: bool = False) -> BuildResult:
    """Build the book; the HTML lands in ``<path_output>/_build/html``.

    Parameters
    ----------
    path_output : path
        Folder that receives ``_build/`` (HTML, doctrees, the execution cache ``.jupyter_cache``).
    source : path
        The book's root (holds ``_config.yml`` and ``_toc.yml``).
    capture : bool
        Return the build's output in ``BuildResult.log`` instead of printing it.
    all_pages : bool
        Rebuild every page (Jupyter Book's ``--all``); executed results still come from the cache
        (unless ``attnlib`` changed, which clears it).
    install_font : bool
        Allow installing a CJK font with apt when running as root.
    force : bool
        Run Jupyter Book even when no input changed since the last successful build.

    Returns
    -------
    BuildResult
        Whatever the outcome; ``returncode`` is non-zero when any warning or error occurred.
        ``up_to_date`` is true when nothing had to be done.

    Raises
    ------
    BookBuildError
        No CJK font is available.
    """
    ensure_cjk_font(install=install_font)
    source = Path(source).resolve()
    build_dir = Path(path_output).resolve() / "_build"
    build_dir.mkdir(parents=True, exist_ok=True)
    state = {"book": inputs_digest(source, BOOK_INPUTS), "library": inputs_digest(source, LIBRARY_INPUTS)}
    previous = _read_state(build_dir)
    if not force and not all_pages and previous == state and (build_dir / "html" / "index.html").is_file():
        message = "书的输入没有变化，跳过构建。 (Nothing changed since the last build.)\n"
        if not capture:
            print(message, end="", flush=True)
        return BuildResult(0, 0.0, build_dir / "html", message if capture else None, up_to_date=True)
    if previous.get("library") != state["library"]:
        # The lessons' cached outputs were computed with another attnlib: execute them again.
        shutil.rmtree(build_dir / ".jupyter_cache", ignore_errors=True)
        all_pages = True
    (build_dir / STATE_FILE).unlink(missing_ok=True)
    env = build_environment(build_dir)
    command = jupyter_book_command(source, path_output, "html", all_pages=all_pages)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=str(source), env=env, check=False, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.STDOUT if capture else None)
    seconds = time.perf_counter() - start
    if proc.returncode == 0:
        (build_dir / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")
    return BuildResult(proc.returncode, seconds, build_dir / "html", proc.stdout if capture else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="构建课程的 Jupyter Book (build the course book).")
    parser.add_argument("--path-output", default=str(ROOT), help="放置 _build/ 的目录 (where _build/ goes)")
    parser.add_argument("--all", action="store_true", help="重建所有页面 (rebuild every page)")
    parser.add_argument("--force", action="store_true",
                        help="输入没变也运行 Jupyter Book (build even if nothing changed)")
    args = parser.parse_args(argv)
    try:
        result = build(args.path_output, all_pages=args.all, force=args.force)
    except BookBuildError as exc:
        print(exc, file=sys.stderr)
        return 2
    if result.returncode != 0:
        print(f"\n构建失败（见上方的警告或错误；警告一律视为错误）。 Book build failed (exit {result.returncode}).",
              file=sys.stderr)
        return result.returncode
    if result.up_to_date:
        print(f"用浏览器打开 (open):\n    {result.index.as_uri()}")
        return 0
    print(f"\n书已构建完成，用时 {result.seconds:.1f} 秒。用浏览器打开：\n    {result.index.as_uri()}\n"
          f"(The book is built; open the file above.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
