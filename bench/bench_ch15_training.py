"""Chapter 15's lesson against its time budget: the four trainings, and the whole page, executed as the book does.

Target: the lesson executes in at most 30 s (the budget every lesson has, README "编写课程的约定" 12), on the
build machine's one torch thread that the page pins.  Most of it is the four trainings of the order task (without
positions, sinusoidal, RoPE, then without positions under the causal mask), 400 steps each; both times are
printed, the trainings' and the whole page's (RoPE, ALiBi and the figures besides).  What the cells print is
not shown.

The trainings' determinism (a second run glues the same accuracies) is a test (``tests/test_ch15.py``); how long
they take depends on the machine and on what else runs on it, so it is measured here and never asserted in a test.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 30.0
PAGE = ROOT / "book" / "ch15-positions.md"
TRAINING = 'train("none", causal=True)'  # the cell of the fourth training; the three others run in the cells before


def measure() -> dict[str, float]:
    """Seconds from the first cell to the end of the fourth training, and for the whole page, in one run."""
    sys.path.insert(0, str(ROOT / "tests"))
    import matplotlib
    import myst_nb
    import torch
    from lessons import code_cells

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = code_cells(PAGE)
    last_training = next(i for i, cell in enumerate(cells) if TRAINING in cell)
    namespace: dict = {"__name__": "__bench_ch15__"}
    real, threads = myst_nb.glue, torch.get_num_threads()
    myst_nb.glue = lambda name, value, display=True: None
    try:
        start = time.perf_counter()
        for i, cell in enumerate(cells):
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(cell, f"{PAGE.name}[cell {i}]", "exec"), namespace)  # noqa: S102 - our own lesson
            if i == last_training:
                trained = time.perf_counter() - start
        page = time.perf_counter() - start
    finally:
        myst_nb.glue = real
        torch.set_num_threads(threads)
        plt.close("all")
    return {"training_s": trained, "page_s": page}


def main() -> None:
    result = measure()
    verdict = "ok" if result["page_s"] <= BUDGET else "OVER BUDGET"
    print(f"chapter 15, the four trainings (400 steps each, one torch thread): {result['training_s']:6.2f} s")
    print(f"chapter 15, every cell of the page                                : {result['page_s']:6.2f} s"
          f"  (budget <= {BUDGET:.0f} s: {verdict})")


if __name__ == "__main__":
    main()
