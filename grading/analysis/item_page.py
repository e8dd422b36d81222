"""The item-analysis page: figures and tables of an :class:`~grading.analysis.items.Analysis`, and the report.

:func:`write_report` is the whole pipeline for one assignment: data
(:func:`grading.analysis.loading.load_assignment`) -> statistics
(:func:`grading.analysis.items.analyse`) -> page (:func:`render_html`, in the
shared template of :mod:`grading.analysis.page`).  The page holds the
per-question correct rates, the choice of every option with its discrimination
(point-biserial correlation with the score on the other questions),
per-exercise score distributions and the class's total-score histogram; figures
are inline PNG, there is no script and no link to the network.
"""

from __future__ import annotations

import html
import math
import pathlib

import numpy as np

from attnlib import quiz
from grading.analysis.items import Analysis, CellStats, OptionStats, analyse
from grading.analysis.loading import ERROR_CAUSES, AssignmentData, load_assignment
from grading.analysis.page import attr, corr, document, figure_note, num, pct, png_uri

__all__ = ["distribution_bars", "render_html", "write_report"]


def _figure_total(analysis: Analysis) -> str:
    import matplotlib.pyplot as plt

    edges, counts = analysis.edges, analysis.counts
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#4c72b0", edgecolor="white")
    ax.set_xlabel(f"总分（满分 {num(analysis.data.max_score)}）")
    ax.set_ylabel("人数")
    ax.set_title(f"全班总分分布（{len(analysis.data.submissions)} 份可读提交）")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return png_uri(fig)


def _figure_cells(analysis: Analysis) -> str:
    import matplotlib.pyplot as plt

    stats = analysis.cells
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(stats) + 2), 3.2), layout="constrained")
    x = np.arange(len(stats))
    ax.bar(x - 0.2, [100 * s.full_rate for s in stats], width=0.4, label="满分率（答对率）", color="#55a868")
    ax.bar(x + 0.2, [100 * s.mean / s.max_score if s.max_score else 0 for s in stats], width=0.4,
           label="平均得分率", color="#8172b2")
    ax.set_xticks(x, [_short(analysis.data.label(s.name)) for s in stats], rotation=45, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("百分比 (%)")
    ax.set_title("各题答对率与平均得分率")
    ax.legend(loc="upper right", fontsize="small")
    return png_uri(fig)


def _panels(plt, n: int, *, max_cols: int, width: float, height: float):
    """A figure of ``n`` small charts in rows of at most ``max_cols``; the grid's unused cells hidden.

    Returns the figure and its first ``n`` axes, in reading order.
    """
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), layout="constrained", squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _figure_options(options: list[OptionStats]) -> str:
    import matplotlib.pyplot as plt

    fig, axes = _panels(plt, len(options), max_cols=5, width=2.6, height=2.4)
    for ax, st in zip(axes, options, strict=True):
        labels = [*st.item.options, "空/无效/出错" if st.failed else "空/无效"]
        values = [st.counts[k] for k in st.item.options] + [st.blank + st.invalid + st.failed]
        colors = ["#55a868" if k in st.item.key else "#c44e52" for k in st.item.options] + ["#999999"]
        ax.bar(labels, values, color=colors)
        kind = "多选" if st.item.multi else "单选"
        ax.set_title(f"第 {st.item.number} 题（{kind}，答案 {quiz.format_letters(st.item.key)}）", fontsize="small")
        ax.set_ylim(0, max(1, st.answered))
        ax.tick_params(labelsize="small")
    fig.suptitle("各选项被选人数（绿色为正确选项，红色为干扰项）")
    return png_uri(fig)


def _short(label: str) -> str:
    """A label without its title, for a chart's axis: ``"练习 1：数值稳定的 softmax" -> "练习 1"``."""
    return label.split("：", 1)[0]


def distribution_bars(st: CellStats) -> tuple[list[str], list[int], list[str]]:
    """The bars of one cell's score-distribution chart: labels, heights and colours.

    One bar per score reached, and, while written answers wait for a human, a grey bar ``待人工批改`` with
    their number, so the chart accounts for every readable submission.
    """
    labels = [f"{num(v)} 分" for v in st.distribution]
    values = [int(c) for c in st.distribution.values()]
    colors = ["#4c72b0"] * len(values)
    if st.pending:
        labels.append("待人工批改")
        values.append(int(st.pending))
        colors.append("#999999")
    return labels, values, colors


def _figure_distributions(stats: list[CellStats], data: AssignmentData | None = None) -> str:
    import matplotlib.pyplot as plt

    fig, axes = _panels(plt, len(stats), max_cols=4, width=3.0, height=2.5)
    for ax, st in zip(axes, stats, strict=True):
        labels, values, colors = distribution_bars(st)
        ax.bar(labels, values, color=colors)
        name = _short(data.label(st.name)) if data is not None else st.name
        ax.set_title(f"{name}（满分 {num(st.max_score)}）", fontsize="small")
        ax.set_xlabel("得分", fontsize="small")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel("人数", fontsize="small")
        ax.tick_params(labelsize="small")
    fig.suptitle("各练习的得分分布")
    return png_uri(fig)


# --------------------------------------------------------------------------- the page


def _unreadable_section(data: AssignmentData) -> list[str]:
    e = html.escape
    n = len(data.unreadable)
    if not n:
        return [f'<p id="unreadable" data-count="0">无法读取的提交：0 份。'
                f"全部 {len(data.submissions)} 份提交都已纳入统计。</p>"]
    items = "".join(f"<li>{e(s)}：{e(r)}</li>" for s, r in sorted(data.unreadable.items()))
    return [f'<div class="bad" id="unreadable" data-count="{n}"><p><strong>无法读取的提交：{n} 份</strong>'
            f'（笔记本文件损坏或未能自动评分），它们不计入本页的任何统计，请单独处理：</p><ul>{items}</ul></div>']


def _cells_table(analysis: Analysis) -> list[str]:
    e = html.escape
    rows = []
    for st in analysis.cells:
        dist = "，".join(f"{num(v)} 分×{c}" for v, c in st.distribution.items()) or "—"
        rows.append(
            f'<tr data-cell="{e(st.name)}" data-mean="{attr(st.mean)}" data-full-rate="{attr(st.full_rate)}" '
            f'data-graded="{st.graded}" data-pending="{st.pending}">'
            f'<td class="label">{e(analysis.data.label(st.name))}</td><td>{num(st.max_score)}</td>'
            f"<td>{st.graded}</td><td>{st.pending}</td>"
            f"<td>{num(st.mean)}</td><td>{pct(st.full_rate)}</td><td>{corr(st.discrimination)}</td>"
            f"<td>{e(dist)}</td></tr>")
    head = (f"<tr><th>{'题目' if analysis.data.items else '练习'}</th><th>满分</th><th>已评分</th>"
            "<th>待人工批改</th><th>平均分</th>"
            "<th>答对率（满分率）</th><th>区分度</th><th>得分分布</th></tr>")
    return [f'<table id="cells">{head}{"".join(rows)}</table>']


def _options_tables(analysis: Analysis) -> list[str]:
    e = html.escape
    out = []
    for st in analysis.options:
        item = st.item
        n = st.answered
        kind = "多选" if item.multi else "单选"
        rows = []
        for letter in item.options:
            is_key = letter in item.key
            r = st.discrimination[letter]
            odd = not math.isnan(r) and ((is_key and r <= 0) or (not is_key and r > 0))
            rows.append(
                f'<tr class="{"key" if is_key else "distractor"}" data-option="{letter}"'
                f' data-count="{st.counts[letter]}" data-discrimination="{attr(r)}" data-key="{int(is_key)}">'
                f"<td>{letter}{'（正确选项 ✓）' if is_key else '（干扰项）'}</td><td>{st.counts[letter]}</td>"
                f"<td>{pct(st.counts[letter] / n) if n else '—'}</td>"
                f'<td class="{"warn" if odd else ""}">{corr(r)}{"（需复查）" if odd else ""}</td></tr>')
        rows.append(
            f'<tr data-option="blank" data-count="{st.blank}"><td>未作答</td><td>{st.blank}</td>'
            f"<td>{pct(st.blank / n) if n else '—'}</td>"
            f'<td rowspan="{3 if st.failed else 2}">{corr(st.blank_invalid_discrimination)}</td></tr>')
        rows.append(
            f'<tr data-option="invalid" data-count="{st.invalid}"><td>无效答案（如 "Z"）</td><td>{st.invalid}</td>'
            f"<td>{pct(st.invalid / n) if n else '—'}</td></tr>")
        if st.failed:
            rows.append(
                f'<tr data-option="error" data-count="{st.failed}"><td>评分时运行出错</td><td>{st.failed}</td>'
                f"<td>{pct(st.failed / n) if n else '—'}</td></tr>")
        head = "<tr><th>选项</th><th>选择人数</th><th>选择比例</th><th>区分度</th></tr>"
        out.append(
            f'<h3 id="{e(item.answer_cell)}">第 {item.number} 题（{kind}，{num(item.points)} 分，'
            f"正确答案 {quiz.format_letters(item.key)}）</h3>"
            f'<table class="options" data-question="{e(item.answer_cell)}" data-disagree="{st.disagree}">'
            f'{head}{"".join(rows)}</table>')
        if st.failed:
            causes = "、".join(f"{ERROR_CAUSES.get(ename, f'出错（{ename}）')} {count} 份"
                              for ename, count in sorted(st.errors.items()))
            out.append(f'<p class="bad" data-question="{e(item.answer_cell)}" data-failed="{st.failed}">'
                       f"有 {st.failed} 份答案在评分时运行出错（{e(causes)}）：笔记本里写的答案没有被评分的内核拿到，"
                       "成绩库按出错计分。它们单列在“评分时运行出错”一行，不算作选了任何选项，"
                       "所以上表正确选项的选择比例与答对率一致。</p>")
        if st.disagree:
            out.append(f'<p class="bad">有 {st.disagree} 份答案按笔记本里的文字读出的结果与成绩库的得分不一致'
                       "（例如答案是用变量或表达式写的，不重新运行就读不出来），它们按读到的结果计入上表，请到成绩库核对。</p>")
    return out


def render_html(analysis: Analysis) -> str:
    """The whole report page (Chinese, self-contained: inline CSS and PNG, no script, no link).

    Numbers are also written into ``data-`` attributes of the table rows, for checks and scripts.
    """
    data = analysis.data
    n = len(data.submissions)
    totals = np.array([s.total for s in data.submissions], dtype=float)
    is_quiz = bool(data.items)
    parts = [
        figure_note(),
        f'<p id="class-size" data-count="{n}">纳入统计的提交：<strong>{n}</strong> 份；满分 {num(data.max_score)} 分；'
        + (f"平均分 {num(float(totals.mean()))}，中位数 {num(float(np.median(totals)))}，"
           f"标准差 {num(float(totals.std()))}。" if n else "没有可统计的提交。") + "</p>",
        *_unreadable_section(data),
    ]
    if not n:
        return _page(data, parts)
    parts += [
        "<h2>怎样读这一页</h2>",
        _method_note(is_quiz),
        "<h2>全班总分分布</h2>",
        f'<div class="side"><img id="fig-total" alt="全班总分分布直方图" src="{_figure_total(analysis)}">',
        _histogram_table(analysis), "</div>",
        "<h2>各题（各评分单元）得分</h2>",
        f'<img id="fig-cells" alt="各题答对率与平均得分率" src="{_figure_cells(analysis)}">',
        *_cells_table(analysis),
    ]
    if any(st.pending for st in analysis.cells):
        parts.append('<p class="note">有书面作答还没有人工批改：它们不计入该单元的平均分与答对率，'
                     "在总分里按 nbgrader 的做法记 0 分。批改后重新生成本页即可。</p>")
    if is_quiz:
        parts += ["<h2>选项分析（干扰项分析）</h2>",
                  f'<img id="fig-options" alt="各选项被选人数" src="{_figure_options(analysis.options)}">',
                  "<p>多选题中，一个选项的“选择人数”是答案里包含该选项的人数，所以各行之和可以超过总人数。"
                  "未作答、无效答案不计入任何选项。</p>",
                  *(['<p class="note" id="canonical">本测验每个学生看到的选项顺序不同。这里的字母 A、B、C……'
                     "是源笔记本里的选项顺序：每个学生写的字母已按他自己的顺序换算回来再计数，"
                     "所以一行就是一个选项，不管每个人看到的是哪个字母。</p>"]
                    if any(item.variants for item in data.items) else []),
                  *_options_tables(analysis)]
    else:
        parts += ["<h2>各练习的得分分布</h2>",
                  f'<img id="fig-distributions" alt="各练习的得分分布" '
                  f'src="{_figure_distributions(analysis.cells, data)}">',
                  *(["<p>灰色的“待人工批改”一栏是书面作答还没有打分的份数。</p>"]
                    if any(st.pending for st in analysis.cells) else [])]
    return _page(data, parts)


def _page(data: AssignmentData, parts: list[str]) -> str:
    return document(f"题目分析：{data.assignment}",
                    "数据来自 nbgrader 成绩库和自动评分后的笔记本，本页没有重新运行任何代码。", parts)


def _method_note(is_quiz: bool) -> str:
    """How to read the page: options and distractors only where there are any (a quiz)."""
    if is_quiz:
        return (
            '<div class="note" id="method"><p><strong>区分度的算法：</strong>点二列相关系数（point-biserial）。'
            "对每个选项，把“是否选了它”记为 1 或 0，计算它与该生<strong>其余各题总分</strong>"
            "（总分减去本题得分，避免本题自己抬高相关）之间的皮尔逊相关系数，取值在 −1 到 +1 之间；"
            "各题的区分度同理，用本题得分代替 0/1。没有人选或所有人都选时无法计算，记为“—”。</p>"
            "<p><strong>一句话读法：</strong>好的正确选项区分度为正（总分高的学生更常选它），"
            "好的干扰项区分度为负（总分低的学生更常选它）；正确选项的区分度接近 0 或为负、"
            "或干扰项的区分度为正（表中标“需复查”），说明题目、选项或答案本身可能有问题。</p>"
            "<p>答对率即得到该题满分的比例；多选题有部分得分，所以同时给出平均分。"
            "人数较少（例如不到 30 人）时相关系数波动很大，只作参考。</p></div>")
    return (
        '<div class="note" id="method"><p><strong>区分度的算法：</strong>把每个学生在这道练习上的得分，'
        "与他<strong>其余各练习的总分</strong>（总分减去本练习得分，避免本练习自己抬高相关）求皮尔逊相关系数，"
        "取值在 −1 到 +1 之间；所有人得分相同时无法计算，记为“—”。</p>"
        "<p><strong>一句话读法：</strong>区分度为正，说明总分高的学生在这道练习上也得分高，练习按预期区分了掌握程度；"
        "接近 0 或为负，说明练习的要求、测试或评分标准可能有问题，值得复查。</p>"
        "<p>答对率即得到该练习满分的比例；练习有部分得分，所以同时给出平均分。"
        "人数较少（例如不到 30 人）时相关系数波动很大，只作参考。</p></div>")


def _histogram_table(analysis: Analysis) -> str:
    edges, counts = analysis.edges, analysis.counts
    cells = []
    for i, count in enumerate(counts):
        close = "]" if i == len(counts) - 1 else ")"
        cells.append(f'<tr data-bin-count="{int(count)}"><td>[{num(edges[i])}, {num(edges[i + 1])}{close}</td>'
                     f"<td>{int(count)}</td></tr>")
    return f'<table id="histogram"><tr><th>总分区间</th><th>人数</th></tr>{"".join(cells)}</table>'


def write_report(course_dir, assignment: str, out=None, *, db_url: str | None = None) -> tuple[pathlib.Path, Analysis]:
    """Read, analyse and write the page for one assignment.

    Parameters
    ----------
    course_dir : path
        nbgrader course root.
    assignment : str
    out : path, optional
        Default ``<course_dir>/reports/<assignment>-item-analysis.html``.
    db_url : str, optional
        Gradebook URL (default ``sqlite:///<course_dir>/gradebook.db``).

    Returns
    -------
    (pathlib.Path, Analysis)
        Where the page was written, and its numbers.
    """
    course_dir = pathlib.Path(course_dir)
    analysis = analyse(load_assignment(course_dir, assignment, db_url))
    out = pathlib.Path(out) if out else course_dir / "reports" / f"{assignment}-item-analysis.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(analysis), encoding="utf-8")
    return out, analysis
