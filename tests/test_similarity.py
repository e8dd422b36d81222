"""The similarity report (make similarity) on synthetic classes: copies rank first, stubs never count.

The class of every chapter assignment that keeps right answers in other styles
(``grading/right/``, written independently of the model answer): the model
answer, a copy of it with every variable renamed, a copy with statements
reordered and comments added, each kept right answer, and two blank
submissions.  A small quiz whose students see the options in their own orders
holds a student who copied another's letters.  Nothing is run: the report reads
the notebooks as submitted.
"""

from __future__ import annotations

import csv
import itertools
import pathlib
import re

import nbformat
import pytest

from attnlib import variants
from grading.analysis import loading, similarity, similarity_page, synthetic

ROOT = pathlib.Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "grading" / "right").iterdir() if any(p.glob("*.py")))
COPIES = ("model", "renamed", "reordered")
REMOTE = re.compile(r"""(src|href)\s*=\s*["']?(https?:)?//""", re.I)


def chapter_class(root: pathlib.Path, assignment: str) -> dict[str, dict[str, str]]:
    """Write the synthetic class of ``assignment`` under ``root/submitted/``; return its answers by student."""
    release = ROOT / "notebooks" / assignment / f"{assignment}.ipynb"
    model = synthetic.model_answers(assignment)
    students = {"model": model, "renamed": {k: synthetic.rename(v) for k, v in model.items()},
                "reordered": {k: synthetic.reorder(v) for k, v in model.items()},
                **{f"right-{style}": cells for style, cells in synthetic.kept_right(assignment).items()},
                "blank-1": {}, "blank-2": {}}
    for student, cells in students.items():
        synthetic.write_submission(root / "submitted" / student / assignment, release, cells)
    return students


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_copied_pairs_rank_above_every_independent_pair(tmp_path, assignment):
    students = chapter_class(tmp_path, assignment)
    sim = similarity.compare(loading.load_answers(tmp_path, assignment))
    scores = {(p.a, p.b): p.score for p in sim.code}
    copied = {tuple(sorted(pair)) for pair in itertools.combinations(COPIES, 2)}
    independent = {tuple(sorted(pair)) for pair in itertools.combinations(students, 2)} - copied
    low = min(scores.get(pair, 0.0) for pair in copied)
    high = max(scores.get(pair, 0.0) for pair in independent)
    assert low > high, (assignment, low, high, sorted(scores.items(), key=lambda kv: -kv[1])[:6])
    assert {(p.a, p.b) for p in sim.code[:3]} == copied
    # the stub is boilerplate: a blank submission shares nothing with anyone, not even another blank one
    assert not [p for p in sim.code if p.a.startswith("blank") or p.b.startswith("blank")]
    assert all(count >= 2 for count in sim.blank.values())


def test_the_renamed_copy_is_found_whole():
    """copydetect replaces every name by one placeholder: a renamed copy matches the model answer entirely."""
    code = synthetic.model_answers("ch05-softmax")["softmax_stable"]
    renamed = synthetic.rename(code)
    assert renamed != code and "my_x" in renamed


WRITTEN = {
    "w-ann": "减去最大值以后，指数的自变量都不超过 0，所以 exp 不会溢出；"
             "而分子分母同乘了一个常数，softmax 的结果不变。",
    "w-bob": "减去最大值以后，指数的自变量都不超过 0，因此 exp 不会溢出；"
             "分子分母同乘了一个常数，softmax 的结果不变。",
    "w-cy": "因为 softmax 对平移不变：每个分数加上同一个数，权重不变。"
            "选最大值作平移量，最大的一项变成 e^0 = 1，别的都小于 1。",
    "w-dee": "先把每行的最大值减掉再做指数运算，这样最大的指数是 1，不会变成 inf；平移不改变归一化后的比例。",
}


def test_written_answers_are_ranked_apart_from_code(tmp_path):
    release = ROOT / "notebooks" / "ch05-softmax" / "ch05-softmax.ipynb"
    model = synthetic.model_answers("ch05-softmax")
    for student, text in WRITTEN.items():
        synthetic.write_submission(tmp_path / "submitted" / student / "ch05-softmax", release, model, text)
    sim = similarity.compare(loading.load_answers(tmp_path, "ch05-softmax"))
    assert (sim.written[0].a, sim.written[0].b) == ("w-ann", "w-bob")
    assert sim.written[0].score > 2 * max([p.score for p in sim.written[1:]] or [0.0])
    assert all(p.kind == "code" and p.score > 0.99 for p in sim.code)  # the same model code, four times


# --------------------------------------------------------------------------- a quiz with per-student orders

QUIZ = "quiz-syn"
KEYS = {1: "B", 2: "A", 3: "D", 4: "C", 5: "B", 6: "A"}


def quiz_release(path: pathlib.Path) -> pathlib.Path:
    """A six-question quiz release in the course's layout: show cell, answer cell, test cell per question."""
    cells = [nbformat.v4.new_markdown_cell("# 测验", metadata={"nbgrader": {"grade_id": "intro", "locked": True}})]
    for number in KEYS:
        q = f"q{number:02d}"
        cells += [
            nbformat.v4.new_code_cell(
                f'Q{number} = quiz.Question("{QUIZ}", {number}, multi=False, points=1, options=[\n'
                '    "甲", "乙", "丙", "丁"])\n' f"Q{number}.show()",
                metadata={"nbgrader": {"grade_id": f"{q}_show", "locked": True, "solution": False}}),
            nbformat.v4.new_code_cell('answer = ""', metadata={"nbgrader": {
                "grade_id": q, "solution": True, "grade": False, "locked": False}}),
            nbformat.v4.new_code_cell(f"_answer = quiz.take_answer(globals())\nQ{number}.check(_answer)",
                                      metadata={"nbgrader": {"grade_id": f"{q}_test", "grade": True,
                                                             "points": 1, "locked": True, "solution": False}})]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(path))
    return path


def letters_for(student: str, canonical: dict[int, str]) -> dict[str, str]:
    """The answer cells of a student who chose these canonical options, in the letters their orders show."""
    return {f"q{n:02d}": f"answer = {variants.canonical_to_shown(c, variants.order(student, QUIZ, n, 4))!r}"
            for n, c in canonical.items()}


def quiz_class(root: pathlib.Path) -> dict[str, dict[str, str]]:
    """24 students: 20 answer the key in their own letters, s-copy writes s-00's letters, two share a rare mistake."""
    release = quiz_release(root / "notebooks" / QUIZ / f"{QUIZ}.ipynb")
    students = {f"s-{i:02d}": letters_for(f"s-{i:02d}", KEYS) for i in range(20)}
    students["s-copy"] = dict(students["s-00"])
    rare = KEYS | {3: "A"}  # question 3's option A: chosen by these two only
    students["s-rare-1"], students["s-rare-2"] = letters_for("s-rare-1", rare), letters_for("s-rare-2", rare)
    for student, cells in students.items():
        nb = nbformat.read(str(release), as_version=4)
        for cell in nb.cells:
            cell.source = cells.get(cell.metadata["nbgrader"]["grade_id"], cell.source)
        dest = root / "submitted" / student / QUIZ
        dest.mkdir(parents=True)
        nbformat.write(nb, str(dest / f"{QUIZ}.ipynb"))
    broken = root / "submitted" / "s-broken" / QUIZ
    broken.mkdir(parents=True)
    (broken / f"{QUIZ}.ipynb").write_text('{"cells": [', encoding="utf-8")
    source = root / "solutions" / QUIZ / f"{QUIZ}.ipynb"
    nb = nbformat.read(str(release), as_version=4)
    for cell in nb.cells:
        match = re.fullmatch(r"q(\d\d)_test", cell.metadata["nbgrader"]["grade_id"])
        if match:
            number = int(match[1])
            cell.source += (f"\n### BEGIN HIDDEN TESTS\nquiz.grade(_answer, question=Q{number}, number={number}, "
                            f'multi=False, points=1, key="{KEYS[number]}", explanations={{'
                            '"A": "a", "B": "b", "C": "c", "D": "d"})\n### END HIDDEN TESTS')
    source.parent.mkdir(parents=True)
    nbformat.write(nb, str(source))
    return students


def test_copied_letters_are_found_where_the_orders_differ(tmp_path):
    quiz_class(tmp_path)
    answers = loading.load_answers(tmp_path, QUIZ)
    assert set(answers.unreadable) == {"s-broken"} and len(answers.answers) == 23
    assert [c.kind for c in answers.cells] == ["letters"] * 6 and all(c.variants == QUIZ for c in answers.cells)
    sim = similarity.compare(answers)
    def meaning(letters_of: str, student: str, n: int) -> str:
        shown = variants.canonical_to_shown(KEYS[n], variants.order(letters_of, QUIZ, n, 4))
        return variants.shown_to_canonical(shown, variants.order(student, QUIZ, n, 4))

    # s-00's letters, read in s-copy's orders, mean another option on these questions
    differ = [n for n in KEYS if meaning("s-00", "s-copy", n) != KEYS[n]]
    assert len(differ) >= 3
    top = sim.letters[0]
    assert (top.a, top.b) == ("s-00", "s-copy") and top.copied == differ and top.compared == 6
    # students who answered the same options in their own letters copied nothing
    assert all(len(p.copied) < len(differ) for p in sim.letters[1:])
    rare = [p for p in sim.letters if p.rare]
    assert [(p.a, p.b, p.rare) for p in rare] == [("s-rare-1", "s-rare-2", [3])]
    assert not sim.code and not sim.written


def test_page_is_chinese_offline_and_the_csv_has_the_columns(tmp_path):
    chapter_class(tmp_path, "ch05-softmax")
    quiz_class(tmp_path)
    for assignment in ("ch05-softmax", QUIZ):
        page, table, sim = similarity_page.write_report(tmp_path, assignment)
        assert page == tmp_path / "reports" / f"{assignment}-similarity.html"
        assert table == page.with_suffix(".csv")
        text = page.read_text(encoding="utf-8")
        assert 'lang="zh-CN"' in text and "相似度报告" in text and "只给教师看" in text
        assert "<script" not in text and not REMOTE.search(text) and "http" not in text
        with table.open(encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
        assert reader.fieldnames == ["student_a", "student_b", "cell", "score"]
        assert rows and all(0.0 <= float(r["score"]) <= 1.0 for r in rows)
    code_page = (tmp_path / "reports" / "ch05-softmax-similarity.html").read_text(encoding="utf-8")
    assert "代码相似度排名" in code_page and "并排对照" in code_page and "<mark>" in code_page
    first = re.search(r'<tr class="pair-row" data-kind="code" data-a="([^"]+)" data-b="([^"]+)"', code_page)
    assert {first[1], first[2]} <= set(COPIES)
    quiz_page = (tmp_path / "reports" / f"{QUIZ}-similarity.html").read_text(encoding="utf-8")
    assert "选项字母照抄" in quiz_page and 'data-a="s-00" data-b="s-copy"' in quiz_page
    assert 'id="unreadable" data-count="1"' in quiz_page and "s-broken" in quiz_page


def test_a_damaged_notebook_is_listed_and_the_others_compared(tmp_path):
    chapter_class(tmp_path, "ch05-softmax")
    broken = tmp_path / "submitted" / "broken" / "ch05-softmax"
    broken.mkdir(parents=True)
    (broken / "ch05-softmax.ipynb").write_text("{not json", encoding="utf-8")
    answers = loading.load_answers(tmp_path, "ch05-softmax")
    assert list(answers.unreadable) == ["broken"] and "model" in answers.answers


# --------------------------------------------------------------------------- the documented commands


@pytest.mark.slow
def test_make_similarity_as_written(tmp_path):
    """The 教师指南's ``make similarity`` and its script form, typed as written on a synthetic class folder."""
    from test_documented_commands import ENGLISH_FALLBACK, _as_written, _guide_command, _run

    course = tmp_path / "课程目录"
    chapter_class(course, "ch05-softmax")
    make = _guide_command(r"make similarity ASSIGNMENT=ch05-softmax COURSE=课程目录")
    script = _guide_command(r"\.venv/bin/python scripts/similarity\.py 课程目录 ch05-softmax -o 页面\.html")
    page_out = tmp_path / "页面.html"
    for command, page in ((make, course / "reports" / "ch05-softmax-similarity.html"), (script, page_out)):
        run = _run(_as_written(command, 课程目录=str(course), **{"页面.html": str(page_out)}), timeout=300)
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-3000:]
        assert "相似度页面" in out and "比较了 7 份提交" in out and not ENGLISH_FALLBACK.search(out), out
        text = page.read_text(encoding="utf-8")
        assert 'lang="zh-CN"' in text and not REMOTE.search(text)
        assert page.with_suffix(".csv").exists()
    usage = _run("make similarity")
    assert usage.returncode != 0 and "用法：make similarity" in usage.stdout + usage.stderr
