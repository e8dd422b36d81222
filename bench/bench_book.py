"""Book build: a clean build (every lesson executed) against a rebuild with nothing changed.

Target: the no-change rebuild (what ``make book`` does the second time) takes at
most 10% of the clean build.  It finds every input unchanged and does not start
Jupyter Book.  For reference the bench also times Jupyter Book forced to run on
the unchanged book: no lesson is executed (the Jupyter cache), no page is
re-read, and what remains is Sphinx's start-up.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.10


def _build_book_module():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_book", module)
    spec.loader.exec_module(module)
    return module


def measure() -> dict[str, float]:
    """Seconds of a clean build and of a no-change rebuild, both into the same fresh temporary folder."""
    build_book = _build_book_module()
    out = Path(tempfile.mkdtemp(prefix="attn-bench-book-"))
    try:
        clean = build_book.build(out, capture=True)
        if clean.returncode != 0:
            raise RuntimeError("clean book build failed:\n" + "\n".join(clean.log.splitlines()[-40:]))
        start = time.perf_counter()
        again = build_book.build(out, capture=True)
        rebuild_s = time.perf_counter() - start  # includes the font check and hashing the inputs
        forced = build_book.build(out, capture=True, force=True)
        for name, run in (("rebuild", again), ("forced rebuild", forced)):
            if run.returncode != 0 or "Executed notebook" in run.log:
                tail = "\n".join(run.log.splitlines()[-40:])
                raise RuntimeError(f"book {name} failed or executed a lesson:\n{tail}")
        return {"clean_s": clean.seconds, "rebuild_s": rebuild_s, "forced_s": forced.seconds}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    result = measure()
    ratio = result["rebuild_s"] / result["clean_s"]
    verdict = "ok" if ratio <= TARGET else "ABOVE TARGET"
    print(f"book clean build                    : {result['clean_s']:7.2f} s")
    print(f"book no-change rebuild (make book)  : {result['rebuild_s']:7.2f} s")
    print(f"rebuild / clean                     : {ratio:7.3f}  (target <= {TARGET:.2f}: {verdict})")
    print(f"jupyter-book forced, nothing changed: {result['forced_s']:7.2f} s"
          f"  ({result['forced_s'] / result['clean_s']:.3f} of clean; no lesson executed)")


if __name__ == "__main__":
    main()
