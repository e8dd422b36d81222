"""The similarity report for a class of 200: ``make similarity``'s whole pipeline, timed.

Target: the page and the CSV for 200 submissions of one chapter assignment
(``ch10-efficiency``, the one with the most code: four exercises) in at most 60 s
of wall time on a 2-core machine, in one process (what ``make similarity`` runs).

The class (``grading/analysis/synthetic.py``): each submission is the model
answer or one of the kept right answers in other styles, disguised as a copying
student would (every variable renamed with its own prefix, or statements
reordered with comments added), with one of a few written answers; a few are
left blank and one is not valid JSON.  Printed: reading, comparing and writing
the page, each in seconds, and the number of pairs compared.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grading.analysis import loading, similarity, similarity_page, synthetic  # noqa: E402

ASSIGNMENT, N, TARGET = "ch10-efficiency", 200, 60.0
WRITTEN = ["滑动窗口只看最近的 w 个键，所以每个查询的代价与序列长度无关。",
           "线性注意力把 softmax 换成核函数后，先算键和值的乘积之和，再乘查询，代价随长度线性增长。",
           "分块计算时每次只把一块键值读进来，用在线 softmax 合并，结果与一次算完相同。"]


def fill_class(root: pathlib.Path, n: int = N) -> None:
    """``n`` submissions of :data:`ASSIGNMENT` under ``root/submitted/``."""
    release = REPO / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    bases = [synthetic.model_answers(ASSIGNMENT), *synthetic.kept_right(ASSIGNMENT).values()]
    for i in range(n):
        folder = root / "submitted" / f"s{i:03d}" / ASSIGNMENT
        if i % 50 == 49:
            synthetic.write_submission(folder, release, {})  # blank
            continue
        cells = bases[i % len(bases)]
        disguised = {k: synthetic.rename(v, f"v{i}_") if i % 2 else synthetic.reorder(v) for k, v in cells.items()}
        synthetic.write_submission(folder, release, disguised, f"{WRITTEN[i % len(WRITTEN)]}（第 {i} 位同学）")
    broken = root / "submitted" / "broken" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / release.name).write_text('{"cells": [', encoding="utf-8")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        fill_class(root)
        start = time.perf_counter()
        answers = loading.load_answers(root, ASSIGNMENT)
        read = time.perf_counter()
        sim = similarity.compare(answers)
        compared = time.perf_counter()
        out = root / "reports" / f"{ASSIGNMENT}-similarity.html"
        out.parent.mkdir()
        out.write_text(similarity_page.render_html(sim), encoding="utf-8")
        end = time.perf_counter()
    n = len(answers.answers)
    wall = end - start
    print(f"{ASSIGNMENT}: {n} submissions read ({len(answers.unreadable)} unreadable), {n * (n - 1) // 2} pairs")
    print(f"  read {read - start:5.1f} s   compare {compared - read:5.1f} s   page {end - compared:5.1f} s")
    print(f"similarity report for {n + len(answers.unreadable)} submissions: {wall:.1f} s wall "
          f"(target <= {TARGET:.0f} s)  {'ok' if wall <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
