"""The similarity page and its CSV: ranked pairs of submissions, side by side with the shared fragments marked.

:func:`write_report` is the whole pipeline for one assignment: data
(:func:`grading.analysis.loading.load_answers`) -> statistics
(:func:`grading.analysis.similarity.compare`) -> page (:func:`render_html`, in
the shared template of :mod:`grading.analysis.page`) and CSV (:func:`csv_rows`).
Both are written to the class folder's ``reports/``, which students never see.
"""

from __future__ import annotations

import csv
import html
import pathlib

from copydetect.utils import highlight_overlap

from grading.analysis.loading import CODE, LETTERS, WRITTEN, load_answers
from grading.analysis.page import attr, document, pct
from grading.analysis.similarity import RARE, Pair, Similarity, compare

__all__ = ["CSV_COLUMNS", "csv_rows", "render_html", "write_report"]

CSV_COLUMNS = ["student_a", "student_b", "cell", "score"]
#: Pairs listed in each ranking, and pairs shown side by side.
LISTED, SHOWN = 30, 12
KIND_NAMES = {CODE: "代码", WRITTEN: "书面作答"}

_CSS = """
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
pre { white-space: pre-wrap; word-break: break-all; background: #fafafa; border: 1px solid #ddd;
      padding: 0.5em; font-size: 0.85em; margin: 0.3em 0; }
mark { background: #ffe082; }
table.pairs td { text-align: left; }
table.pairs td:last-child { white-space: nowrap; }
"""


def csv_rows(sim: Similarity) -> list[dict]:
    """The CSV: for each ranked pair a row for its kind (``code``, ``written``), then one per matching cell;
    then the quiz pairs (``letters``: the share of questions both answered whose letters were copied)."""
    rows = []
    for pairs in (sim.code, sim.written):
        for p in pairs:
            rows.append({"student_a": p.a, "student_b": p.b, "cell": p.kind, "score": f"{p.score:.4f}"})
            rows += [{"student_a": p.a, "student_b": p.b, "cell": m.cell, "score": f"{m.score:.4f}"}
                     for m in p.cells]
    for p in sim.letters:
        if p.copied:
            rows.append({"student_a": p.a, "student_b": p.b, "cell": "letters",
                         "score": f"{len(p.copied) / p.compared:.4f}"})
    return rows


def _unreadable(sim: Similarity) -> list[str]:
    e = html.escape
    bad = sim.answers.unreadable
    if not bad:
        return [f'<p id="unreadable" data-count="0">无法读取的提交：0 份。'
                f"全部 {len(sim.answers.answers)} 份都已比较。</p>"]
    items = "".join(f"<li>{e(s)}：{e(r)}</li>" for s, r in sorted(bad.items()))
    return [f'<div class="bad" id="unreadable" data-count="{len(bad)}">'
            f"<p><strong>无法读取的提交：{len(bad)} 份</strong>，没有参与比较，请单独查看：</p><ul>{items}</ul></div>"]


def _method(sim: Similarity) -> str:
    kinds = {c.kind for c in sim.answers.cells}
    text = (
        "<p><strong>怎样算相似度：</strong>"
        "用 copydetect（与 MOSS 相同的 winnowing 指纹法）比较每两份提交的同一个作答单元。"
        "代码先按 Python 词法切成词元，所有变量名、函数名都换成同一个占位符，"
        "所以只改名字不会降低相似度；发布版笔记本里原有的代码（函数签名、文档字符串、提示）作为模板去掉，"
        "两份都没作答的单元不算相似。一对提交的分数是两份里被对方覆盖的词元占两份总词元的比例，0 到 1 之间，"
        "代码与书面作答分开排名。</p>"
        "<p><strong>一句话读法：</strong>分数高只说明值得看一看，不是抄袭的证据：同一道题写法很少的时候，"
        "独立完成的答案也会相似。请对照下方并排显示的代码（黄色为两份共有的片段）再做判断，"
        "并结合其他证据与学生沟通。</p>") if kinds & {CODE, WRITTEN} else ""
    if LETTERS in kinds:
        text += ("<p><strong>选项字母照抄：</strong>本测验每个学生看到的选项顺序各不相同。"
                 "两份提交在同一题写了相同的字母，而按各自的顺序这两个字母指的是不同的选项，这通常是直接抄了字母；"
                 f"两人都选了同一个少有人选的错误选项（不超过全班 {RARE:.0%}）是较弱的信号。"
                 "同样的字母未必是抄的，请结合其他证据再与学生沟通。</p>")
    return f'<div class="note" id="method">{text}</div>'


def _pair_table(pairs: list[Pair], kind: str, labels: dict) -> list[str]:
    e = html.escape
    if not pairs:
        return [f'<p id="{kind}-none">没有任何两份提交的{KIND_NAMES[kind]}有共同的片段。</p>']
    rows = []
    for rank, p in enumerate(pairs[:LISTED], 1):
        cells = "；".join(f"{labels[m.cell]} {pct(m.score)}" for m in sorted(p.cells, key=lambda m: -m.score))
        link = f'<a href="#{kind}-pair-{rank}">对照</a>' if rank <= SHOWN else ""
        rows.append(f'<tr class="pair-row" data-kind="{kind}" data-a="{e(p.a)}" data-b="{e(p.b)}" '
                    f'data-score="{attr(p.score)}"><td>{rank}</td><td>{e(p.a)}</td><td>{e(p.b)}</td>'
                    f'<td>{pct(p.score)}</td><td>{e(cells)}</td><td>{link}</td></tr>')
    head = "<tr><th>排名</th><th>学生 A</th><th>学生 B</th><th>相似度</th><th>各单元相似度</th><th></th></tr>"
    more = (f"<p>共 {len(pairs)} 对提交有共同片段，这里列出前 {LISTED} 对；完整排名见同目录的 CSV 文件。</p>"
            if len(pairs) > LISTED else "")
    return [f'<table class="pairs" id="{kind}-pairs">{head}{"".join(rows)}</table>', more]


def _side_by_side(pairs: list[Pair], kind: str, sim: Similarity, labels: dict) -> list[str]:
    e = html.escape
    out = []
    for rank, p in enumerate(pairs[:SHOWN], 1):
        out.append(f'<h3 id="{kind}-pair-{rank}">{KIND_NAMES[kind]}第 {rank} 名：{e(p.a)} 与 {e(p.b)}'
                   f"（{pct(p.score)}）</h3>")
        for m in p.cells:
            sides = []
            for student, slices in ((p.a, m.slices[0]), (p.b, m.slices[1])):
                source = sim.prints[m.cell][student].raw_code  # without the stub's lines
                marked, _ = highlight_overlap(source, slices, "<mark>", "</mark>", escape_html=True)
                sides.append(f"<div><p>{e(student)}</p><pre>{marked}</pre></div>")
            out.append(f'<h4>{e(labels[m.cell])}（{pct(m.score)}）</h4><div class="pair">{"".join(sides)}</div>')
    if out:
        out.insert(0, "<p>下面只显示学生自己写的行：发布版里原有的行（文档字符串、提示等）已去掉，函数签名保留。</p>")
    return out


def _letters_table(sim: Similarity) -> list[str]:
    e = html.escape
    if not sim.letters:
        return ['<p id="letters-none">没有发现选项字母照抄或共同的少见错误选项。</p>']
    rows = []
    for p in sim.letters[:LISTED]:
        copied = "、".join(f"第 {n} 题" for n in p.copied) or "—"
        rare = "、".join(f"第 {n} 题" for n in p.rare) or "—"
        rows.append(f'<tr class="letters-row" data-a="{e(p.a)}" data-b="{e(p.b)}" data-copied="{len(p.copied)}" '
                    f'data-rare="{len(p.rare)}"><td>{e(p.a)}</td><td>{e(p.b)}</td><td>{len(p.copied)}</td>'
                    f'<td>{copied}</td><td>{len(p.rare)}</td><td>{rare}</td>'
                    f"<td>{p.compared}</td></tr>")
    head = ("<tr><th>学生 A</th><th>学生 B</th><th>字母相同而选项不同</th><th>题号</th>"
            "<th>共同的少见错误选项</th><th>题号</th><th>两人都作答的题数</th></tr>")
    return [f'<table class="pairs" id="letters-pairs">{head}{"".join(rows)}</table>']


def render_html(sim: Similarity) -> str:
    """The whole page (Chinese, self-contained: inline CSS, no script, no link to the network)."""
    labels = {c.grade_id: c.label for c in sim.answers.cells}
    kinds = {c.kind for c in sim.answers.cells}
    n = len(sim.answers.answers)
    parts = [f'<p id="class-size" data-count="{n}">参与比较的提交：<strong>{n}</strong> 份'
             f"（{n * (n - 1) // 2} 对）。</p>", *_unreadable(sim), "<h2>怎样读这一页</h2>", _method(sim)]
    if sim.blank:
        blank = "；".join(f"{labels[c]} {k} 份" for c, k in sim.blank.items() if k)
        if blank:
            parts.append(f'<p id="blank">与发布版相同（未作答）而不参与比较的单元：{html.escape(blank)}。</p>')
    for kind in (CODE, WRITTEN):
        if kind in kinds:
            pairs = sim.code if kind == CODE else sim.written
            parts += [f"<h2>{KIND_NAMES[kind]}相似度排名</h2>", *_pair_table(pairs, kind, labels)]
    if LETTERS in kinds:
        parts += ["<h2>选择题：选项字母照抄</h2>", *_letters_table(sim)]
    for kind in (CODE, WRITTEN):
        pairs = sim.code if kind == CODE else sim.written
        if pairs:
            parts += [f"<h2>{KIND_NAMES[kind]}并排对照（前 {min(SHOWN, len(pairs))} 对）</h2>",
                      *_side_by_side(pairs, kind, sim, labels)]
    return document(f"相似度报告：{sim.answers.assignment}",
                    "数据来自班级目录里提交的（或自动评分后的）笔记本，本页没有运行任何学生代码。"
                    "本页只给教师看，不会出现在学生的反馈里。", parts, css=_CSS)


def write_report(course_dir, assignment: str, out=None) -> tuple[pathlib.Path, pathlib.Path, Similarity]:
    """Read, compare and write the page and the CSV for one assignment.

    Parameters
    ----------
    course_dir : path
        The class folder (``submitted/`` or ``autograded/``).
    assignment : str
    out : path, optional
        The page; default ``<course_dir>/reports/<assignment>-similarity.html``.  The CSV goes next to it,
        with the same name ending in ``.csv``.

    Returns
    -------
    (pathlib.Path, pathlib.Path, Similarity)
        The page, the CSV, and the numbers.
    """
    course_dir = pathlib.Path(course_dir)
    sim = compare(load_answers(course_dir, assignment))
    out = pathlib.Path(out) if out else course_dir / "reports" / f"{assignment}-similarity.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(sim), encoding="utf-8")
    table = out.with_suffix(".csv")
    with table.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(sim))
    return out, table, sim
