"""The instructor's item-analysis page, built from a class autograded once by real nbgrader.

The class: 44 generated quiz-sdpa sheets (seeded; each student has an ability,
strong students choose the key more often; answers in every accepted format,
some blank, some invalid such as ``"Z"``), one sheet whose first answer cell
loops until the grader's timeout interrupts it (its text names the key), one
sheet that is not valid JSON, and a few ch05-softmax sample submissions (one
of them broken too).
The page's numbers are checked against the gradebook and against what the
generator chose; the page is opened in headless Chromium.
"""

from __future__ import annotations

import html
import math
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

import nbformat
import numpy as np
import pytest
from assignments import with_cells

from attnlib import quiz, variants
from grading.analysis import item_page, items, loading

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUIZ, CHAPTER = "quiz-sdpa", "ch05-softmax"
N_STUDENTS = 44
TIMED_OUT = "s98-timeout"  # a 45th sheet: question 1's answer cell never gets past an endless loop
CHAPTER_SAMPLES = ("correct", "partial", "crash", "blank", "broken_json")
# a question with per-student variants passes its Question first (question=Q1): the key is canonical
GRADE_CALL = re.compile(r'quiz\.grade\(_answer, (?P<question>question=Q\d+, )?number=(\d+), multi=(True|False), '
                        r'points=(\d+), key="([A-D]+)"')


# --------------------------------------------------------------------------- reading answers without running them

@pytest.mark.parametrize(("source", "expected"), [
    ('# 第 1 题\nanswer = "B"', "B"),
    ('answer = "A"\nanswer = "C"', "C"),
    ('answer = ["A", "B"]', ["A", "B"]),
    ('answer: str = "D"', "D"),
    ("answer = None", None),
    ('# YOUR CODE HERE\nraise NotImplementedError()\nanswer = "A"', quiz.MISSING),
    ("x = 1", quiz.MISSING),
    ('answer = "A"(', quiz.MISSING),
    ('answer = "".join(["A"])', loading.UNREADABLE),
])
def test_answer_value_reads_the_literal_a_run_would_assign(source, expected):
    got = loading.answer_value(source)
    assert got is expected if expected in (quiz.MISSING, loading.UNREADABLE) else got == expected


ITEM = loading.QuizItem("q01", "q01_test", 1, frozenset("B"), "ABCD", False, 1.0)


@pytest.mark.parametrize(("value", "status", "letters"), [
    ("b", "valid", "B"), ("Ａ，Ｃ", "valid", "AC"), (["d"], "valid", "D"), ("AB", "valid", "AB"),
    ("", "blank", ""), ("  ", "blank", ""), ([], "blank", ""), (quiz.MISSING, "blank", ""),
    ("Z", "invalid", ""), ("AA", "invalid", ""), (1, "invalid", ""), (None, "invalid", ""),
    (loading.UNREADABLE, "invalid", ""),
])
def test_read_choice_uses_the_course_parser(value, status, letters):
    assert loading.read_choice(value, ITEM) == loading.Choice(status, frozenset(letters))


def test_grade_call_reads_the_key_of_every_source_question():
    nb = nbformat.read(ROOT / "solutions" / QUIZ / f"{QUIZ}.ipynb", as_version=4)
    tests = [c for c in nb.cells if re.fullmatch(r"q\d\d_test", c.metadata.get("nbgrader", {}).get("grade_id", ""))]
    assert len(tests) == 10
    for cell in tests:
        _, number, multi, points, key = GRADE_CALL.search(cell.source).groups()
        call = loading.grade_call(cell.source)
        assert (call["number"], call["multi"], call["points"], call["key"]) == (int(number), multi == "True",
                                                                                   int(points), key)
    assert loading.grade_call("print(1)") is None and loading.grade_call("def (") is None


def test_point_biserial_is_pearson_and_undefined_for_constants():
    rng = np.random.default_rng(0)
    x, y = rng.random(50) < 0.4, rng.normal(size=50)
    assert items.point_biserial(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert math.isnan(items.point_biserial(np.zeros(5), y[:5]))
    assert math.isnan(items.point_biserial(x[:5], np.ones(5)))


def test_histogram_covers_zero_to_max_and_counts_the_maximum():
    edges, counts = items.histogram([0, 0.5, 6.99, 13, 13, 12.5], 13)
    assert edges[0] == 0 and edges[-1] == 13 and len(counts) == 13
    assert counts.sum() == 6 and counts[0] == 2 and counts[-1] == 3
    edges, counts = items.histogram(np.linspace(0, 100, 41), 100)
    assert len(counts) == 20 and counts.sum() == 41


# --------------------------------------------------------------------------- the generated class

def quiz_keys() -> dict[str, tuple[frozenset, bool, int]]:
    """Answer cell -> (canonical key letters, multi, points), read from the source notebook's hidden tests."""
    nb = nbformat.read(ROOT / "solutions" / QUIZ / f"{QUIZ}.ipynb", as_version=4)
    keys = {}
    for cell in nb.cells:
        m = GRADE_CALL.search(cell.source)
        if m:
            keys[f"q{int(m[2]):02d}"] = (frozenset(m[5]), m[3] == "True", int(m[4]))
    return keys


def varied() -> bool:
    """Whether the quiz shows every student the options in their own order (its hidden calls pass question=)."""
    nb = nbformat.read(ROOT / "solutions" / QUIZ / f"{QUIZ}.ipynb", as_version=4)
    return any((m := GRADE_CALL.search(cell.source)) and m["question"] for cell in nb.cells)


def shown(student: str, cell: str, letters) -> list[str]:
    """The letters ``student`` writes for these canonical options: their own order's letters when the quiz varies."""
    if not varied():
        return sorted(letters)
    order = variants.order(student, QUIZ, int(cell[1:]), 4)
    return sorted(variants.canonical_to_shown("".join(letters), order))


def _literal(letters: list[str], rng) -> str:
    """The letters in one of the accepted formats."""
    form = rng.integers(6)
    if form == 0:
        return repr("".join(letters))
    if form == 1:
        return repr(", ".join(letters).lower())
    if form == 2:
        return repr("".join(chr(ord(ch) + 0xFEE0) for ch in letters))  # full width
    if form == 3:
        return repr(list(letters))
    if form == 4:
        return repr(" ".join(reversed(letters)))
    return repr("、".join(letters))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def generate_class(seed: int = 20261130, n: int = N_STUDENTS):
    """Per student: the answer cell sources and what each answer means.

    Returns ``(sources, intended, ability)``: ``sources[student][cell]`` is the
    cell text; ``intended[student][cell]`` is a frozenset of letters, or
    ``"blank"`` / ``"invalid"``.
    """
    rng = np.random.default_rng(seed)
    keys = quiz_keys()
    easiness = dict(zip(sorted(keys), np.linspace(1.2, -0.6, len(keys)), strict=True))
    sources, intended, ability = {}, {}, {}
    for i in range(n):
        student = f"s{i:02d}"
        theta = float(rng.normal())
        ability[student] = theta
        sources[student], intended[student] = {}, {}
        for cell, (key, multi, _) in keys.items():
            head = f"# 第 {int(cell[1:])} 题\n"
            u = rng.random()
            if u < 0.05:
                text = str(rng.choice(['answer = ""', "answer = []", "# YOUR CODE HERE\nraise NotImplementedError()"]))
                meaning = "blank"
            elif u < 0.10:
                text = str(rng.choice(['answer = "Z"', 'answer = "AA"', "answer = 1", 'answer = "答案B"']))
                meaning = "invalid"
            else:
                distractors = sorted(set("ABCD") - key)
                if multi:
                    # each right option is seen more often, each wrong one less often, the stronger the student
                    letters = {ch for ch in key if rng.random() < _sigmoid(2.2 * theta + easiness[cell] + 1)}
                    letters |= {ch for ch in distractors if rng.random() < _sigmoid(-2.2 * theta - 1)}
                    if not letters:
                        letters = {str(rng.choice(sorted("ABCD")))}
                elif rng.random() < _sigmoid(2.2 * theta + easiness[cell]):
                    letters = set(key)
                else:
                    # the first distractor is the popular one
                    letters = {str(rng.choice(distractors, p=[0.6, 0.25, 0.15]))}
                    if rng.random() < 0.05:
                        letters.add(str(rng.choice(sorted(set("ABCD") - letters))))  # two letters on a single choice
                meaning = frozenset(letters)  # canonical options; the sheet holds the letters this student saw
                text = f"answer = {_literal(shown(student, cell, letters), rng)}"
            sources[student][cell] = head + text
            intended[student][cell] = meaning
    return sources, intended, ability


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """One course: the generated quiz class and the ch05 samples, each assignment autograded once."""
    from grading.course import Course

    course = Course(tmp_path_factory.mktemp("itemcourse"))
    course.add_sources([QUIZ, CHAPTER])
    for name in (QUIZ, CHAPTER):
        course.nbgrader("generate_assignment", name, "--force")
    release = nbformat.read(course.path("notebooks", QUIZ, f"{QUIZ}.ipynb"), as_version=4)
    sources, intended, ability = generate_class()
    key = "".join(shown(TIMED_OUT, "q01", quiz_keys()["q01"][0]))
    # s00's answers, written in the letters the timed-out student's own orders give them
    sources[TIMED_OUT] = {
        cell: text if isinstance(meant, str) else
        f"# 第 {int(cell[1:])} 题\nanswer = {''.join(shown(TIMED_OUT, cell, meant))!r}"
        for (cell, text), meant in zip(sources["s00"].items(), intended["s00"].values(), strict=True)}
    sources[TIMED_OUT]["q01"] = f"# 第 1 题\nwhile True:\n    pass\nanswer = {key!r}"
    intended[TIMED_OUT] = dict(intended["s00"], q01="error")
    ability[TIMED_OUT] = ability["s00"]
    for student, cells in sources.items():
        dest = course.path("submitted", student, QUIZ)
        dest.mkdir(parents=True)
        nbformat.write(with_cells(release, cells), str(dest / f"{QUIZ}.ipynb"))
    broken = course.path("submitted", "s99-broken", QUIZ)
    broken.mkdir(parents=True)
    (broken / f"{QUIZ}.ipynb").write_text('{"cells": [', encoding="utf-8")
    for sample in CHAPTER_SAMPLES:
        dest = course.path("submitted", f"ch-{sample}", CHAPTER)
        shutil.copytree(ROOT / "grading" / "samples" / CHAPTER / sample, dest)
        for damaged in dest.glob("*.ipynb.broken"):
            damaged.rename(damaged.with_suffix(""))
    seconds = {}
    for name in (QUIZ, CHAPTER):
        start = time.perf_counter()
        # exits 1 because of the broken sheets; a 5 s per-cell limit (the course has 20) interrupts the endless
        # sheet as surely and sooner: every other cell of these sheets takes milliseconds
        course.nbgrader("autograde", name, "--force", "--Execute.timeout=5", check=False)
        seconds[name] = time.perf_counter() - start
    print(f"autograde: {seconds}")
    return course, intended, ability


def gradebook_scores(course, assignment) -> dict[str, dict[str, float | None]]:
    """Student -> grade cell -> score (None: waiting for a human), and ``"__total__"``, for autograded submissions.

    Read with ``scripts/grade_samples.py``'s own SQL reader of the gradebook, not with the module under test.
    """
    from conftest import load_script

    out = {}
    for r in load_script("grade_samples").read_gradebook(course.path("gradebook.db")):
        if r.assignment == assignment and any(course.path("autograded", r.student, assignment).glob("*.ipynb")):
            out[r.student] = {cell: score for cell, (score, _) in r.cells.items()} | {"__total__": r.score}
    return out


class Page:
    """The report's HTML and the numbers in its ``data-`` attributes."""

    def __init__(self, text: str):
        self.text = text

    def rows(self, **attrs) -> list[dict]:
        """Attributes of every ``<tr>`` that has all the given ``data-`` attribute values."""
        out = []
        for tag in re.findall(r"<tr\b[^>]*>", self.text):
            found = {k.replace("-", "_"): html.unescape(v) for k, v in re.findall(r'data-([\w-]+)="([^"]*)"', tag)}
            if all(found.get(k) == v for k, v in attrs.items()) and found:
                out.append(found)
        return out

    def options(self, question: str) -> dict[str, dict]:
        table = re.search(rf'<table class="options" data-question="{question}"[^>]*>(.*?)</table>', self.text, re.S)
        assert table, question
        return {r["option"]: r for r in Page(table.group(1)).rows()}


@pytest.fixture(scope="module")
def quiz_page(graded_class, tmp_path_factory):
    course, _, _ = graded_class
    out = tmp_path_factory.mktemp("report") / "quiz.html"
    path, analysis = item_page.write_report(course.root, QUIZ, out)
    return Page(path.read_text(encoding="utf-8")), analysis, path


@pytest.fixture(scope="module")
def chapter_page(graded_class, tmp_path_factory):
    course, _, _ = graded_class
    out = tmp_path_factory.mktemp("report") / "chapter.html"
    path, analysis = item_page.write_report(course.root, CHAPTER, out)
    return Page(path.read_text(encoding="utf-8")), analysis, path


@pytest.mark.parametrize("name", [QUIZ, CHAPTER])
@pytest.mark.slow
@pytest.mark.grading
def test_correct_rates_and_means_equal_the_gradebook(graded_class, quiz_page, chapter_page, name):
    course = graded_class[0]
    page, analysis, _ = quiz_page if name == QUIZ else chapter_page
    book = gradebook_scores(course, name)
    assert {s.student for s in analysis.data.submissions} == set(book)
    assert f'id="class-size" data-count="{len(book)}"' in page.text
    cells = {r["cell"]: r for r in page.rows() if "cell" in r}
    assert set(cells) == {c for scores in book.values() for c in scores} - {"__total__"}
    for cell, row in cells.items():
        got = [scores[cell] for scores in book.values()]
        graded = [g for g in got if g is not None]
        max_score = {c: m for c, m in analysis.data.cells}[cell]
        assert int(row["graded"]) == len(graded) and int(row["pending"]) == len(got) - len(graded)
        if graded:
            assert float(row["mean"]) == pytest.approx(np.mean(graded), abs=1e-9), cell
            assert float(row["full_rate"]) == pytest.approx(np.mean(np.isclose(graded, max_score)), abs=1e-9), cell
        else:
            assert row["mean"] == "" and row["full_rate"] == ""
    bins = [int(r["bin_count"]) for r in page.rows() if "bin_count" in r]
    assert sum(bins) == len(book)
    totals = [scores["__total__"] for scores in book.values()]
    want, _ = np.histogram(totals, bins=np.linspace(0, analysis.data.max_score, len(bins) + 1))
    assert bins == want.tolist()


@pytest.mark.slow
@pytest.mark.grading
def test_the_class_is_realistic(graded_class):
    """The generated sheets mean what the generator says: gradebook score == the rule applied to the intent."""
    course, intended, _ = graded_class
    book = gradebook_scores(course, QUIZ)
    assert len(book) == N_STUDENTS + 1 == len(intended)
    keys = quiz_keys()
    for student, cells in intended.items():
        for cell, meaning in cells.items():
            key, multi, points = keys[cell]
            want = 0.0 if isinstance(meaning, str) else quiz.score(meaning, key, multi=multi, points=points)
            assert book[student][f"{cell}_test"] == pytest.approx(want, abs=1e-9), (student, cell, meaning)
    kinds = [m if isinstance(m, str) else "valid" for cells in intended.values() for m in cells.values()]
    assert kinds.count("blank") >= 10 and kinds.count("invalid") >= 10
    totals = [scores["__total__"] for scores in book.values()]
    assert np.std(totals) > 2, "the class spreads over the scale"


@pytest.mark.slow
@pytest.mark.grading
def test_option_counts_equal_what_the_generator_chose(graded_class, quiz_page):
    _, intended, _ = graded_class
    page, _, _ = quiz_page
    keys = quiz_keys()
    for cell, (key, _, _) in keys.items():
        rows = page.options(cell)
        chosen = [cells[cell] for cells in intended.values()]
        for letter in "ABCD":
            want = sum(1 for m in chosen if not isinstance(m, str) and letter in m)
            assert int(rows[letter]["count"]) == want, (cell, letter)
            assert rows[letter]["key"] == ("1" if letter in key else "0")
        assert int(rows["blank"]["count"]) == chosen.count("blank")
        assert f'data-question="{cell}" data-disagree="0"' in page.text  # the text read = what the kernel graded
        assert int(rows["invalid"]["count"]) == chosen.count("invalid")
        assert int(rows.get("error", {"count": 0})["count"]) == chosen.count("error")
    # the key is named in each question's heading
    for cell, (key, _, _) in keys.items():
        heading = rf'<h3 id="{cell}">第 {int(cell[1:])} 题（[^<]*正确答案 {quiz.format_letters(key)}）'
        assert re.search(heading, page.text), cell
    assert 'id="unreadable" data-count="1"' in page.text and "s99-broken" in page.text


@pytest.mark.slow
@pytest.mark.grading
def test_discrimination_follows_ability(graded_class, quiz_page):
    """Keys discriminate positively, distractors negatively; the numbers are the rest-score correlation."""
    course, intended, _ = graded_class
    page, _, _ = quiz_page
    book = gradebook_scores(course, QUIZ)
    students = sorted(book)
    keys = quiz_keys()
    key_r, distractor_r = [], []
    for cell, (key, _, _) in keys.items():
        rows = page.options(cell)
        rest = np.array([book[s]["__total__"] - book[s][f"{cell}_test"] for s in students])
        for letter in "ABCD":
            picked = np.array([not isinstance(intended[s][cell], str) and letter in intended[s][cell]
                               for s in students])
            if picked.all() or not picked.any():
                assert rows[letter]["discrimination"] == ""
                continue
            r = float(rows[letter]["discrimination"])
            assert r == pytest.approx(np.corrcoef(picked, rest)[0, 1], abs=1e-9), (cell, letter)
            (key_r if letter in key else distractor_r).append(r)
    # Ability drives the choices: every key letter correlates positively and on average about +0.5, distractors
    # about -0.3 (seeds 1-5 of the generator: mean key +0.40..+0.53, weakest key +0.18, mean distractor -0.29..-0.34).
    # Choices unrelated to ability would give 0 +- 0.15 per option and 0 +- 0.04 for a mean of ~14.
    assert min(key_r) > 0, key_r
    assert np.mean(key_r) > 0.3 and np.mean(distractor_r) < -0.15, (np.mean(key_r), np.mean(distractor_r))


@pytest.mark.slow
@pytest.mark.grading
def test_page_is_offline_and_chinese(quiz_page, chapter_page):
    for page, _, path in (quiz_page, chapter_page):
        text = page.text
        assert not re.search(r"<script|<link|<iframe|<object|<embed|@import", text, re.I)
        images = re.findall(r'<img\b[^>]*\bsrc="([^"]*)"', text)
        assert images and all(src.startswith("data:image/png;base64,") for src in images)
        without_images = re.sub(r'src="data:[^"]*"', "", text)
        assert not re.search(r"https?:|//[a-z]", without_images, re.I)
        for phrase in ("题目分析", "区分度", "相关系数", "全班总分分布", "答对率"):
            assert phrase in text, phrase
        assert 'lang="zh-CN"' in text and path.stat().st_size < 2_000_000
    chapter = chapter_page[0].text
    assert 'id="unreadable" data-count="1"' in chapter and "ch-broken_json" in chapter
    assert "待人工批改" in chapter and "各练习的得分分布" in chapter
    assert "选项分析" not in chapter and "选项分析" in quiz_page[0].text and "点二列相关" in quiz_page[0].text


@pytest.mark.slow
@pytest.mark.grading
def test_chapter_exercises_have_their_distribution(chapter_page, graded_class):
    course = graded_class[0]
    page, analysis, _ = chapter_page
    book = gradebook_scores(course, CHAPTER)
    assert len(book) == len(CHAPTER_SAMPLES) - 1
    for st in analysis.cells:
        scores = [book[s][st.name] for s in book if book[s][st.name] is not None]
        assert sum(st.distribution.values()) == len(scores)
        assert sorted(st.distribution) == sorted({round(v, 2) for v in scores})
    written = {st.name: st for st in analysis.cells}["written_shift"]
    # correct, partial and crash wrote an answer a human has to grade; whatever the blank sheet got is in the gradebook
    assert written.pending >= 3 and written.pending + written.graded == len(book)


@pytest.mark.slow
@pytest.mark.grading
def test_command_line(graded_class, tmp_path, capsys):
    from conftest import load_script

    course = graded_class[0]
    out = tmp_path / "r.html"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "item_analysis.py"), str(course.root), QUIZ,
                          "-o", str(out)], capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"{N_STUDENTS + 1} 份提交纳入统计，1 份无法读取" in run.stdout and out.exists()
    script = load_script("item_analysis")
    assert script.main([str(course.root), "no-such"]) == 2
    assert "no-such" in capsys.readouterr().err
    assert script.main([str(tmp_path), QUIZ]) == 2
    assert "gradebook.db" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.grading
@pytest.mark.browser
@pytest.mark.cjk_font
def test_page_renders_in_chromium(quiz_page, tmp_path):
    """Headless Chromium, no network: the Chinese headings are there and every figure decodes."""
    from conftest import provision

    page = tmp_path / "page.html"
    probe = """<script>window.addEventListener("load", () => {
      const imgs = Array.from(document.images);
      const ok = imgs.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100);
      const h = Array.from(document.querySelectorAll("h1, h2, h3")).map(x => x.textContent);
      document.title = "imgs:" + imgs.length + " ok:" + ok.length + " headings:" + h.length +
        " h1:" + h[0] + " width:" + (document.documentElement.scrollWidth <= window.innerWidth + 1);
    });</script></body>"""
    page.write_text(quiz_page[0].text.replace("</body>", probe), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        run = subprocess.run([provision.find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                              "--disable-background-networking", f"--user-data-dir={profile}", "--window-size=1200,900",
                              "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=120, check=False)
    title = re.search(r"<title>(.*?)</title>", run.stdout)
    assert title, run.stderr[-2000:]
    imgs, ok, headings, h1, fits = re.fullmatch(r"imgs:(\d+) ok:(\d+) headings:(\d+) h1:(.*) width:(\w+)",
                                                title.group(1)).groups()
    assert int(imgs) == 3 and int(ok) == 3, title.group(1)
    assert int(headings) >= 2 + 10 and h1 == f"题目分析：{QUIZ}" and fits == "true"
    assert "选项分析（干扰项分析）" in run.stdout and "正确选项 ✓" in run.stdout


@pytest.mark.cjk_font
def test_statistics_of_a_small_hand_made_class():
    """Counts, rates, pending manual grades and a disagreement, on four students, without nbgrader."""
    single = loading.QuizItem("q01", "q01_test", 1, frozenset("B"), "ABCD", False, 1.0)
    multi = loading.QuizItem("q02", "q02_test", 2, frozenset("AC"), "ABCD", True, 2.0)
    c = loading.Choice

    def sub(name, s1, s2, ch1, ch2, written=None):
        return loading.Submission(name, s1 + s2 + (written or 0.0),
                                  {"q01_test": s1, "q02_test": s2, "essay": written}, {"q01": ch1, "q02": ch2})

    graded = [("q01_test", 1.0), ("q02_test", 2.0), ("essay", 2.0)]
    data = loading.AssignmentData("quiz-x", 5.0, graded, [single, multi], [
        sub("a", 1.0, 2.0, c("valid", frozenset("B")), c("valid", frozenset("AC")), 2.0),
        sub("b", 0.0, 1.0, c("valid", frozenset("A")), c("valid", frozenset("A"))),
        sub("c", 0.0, 0.0, c("blank"), c("invalid")),
        sub("d", 1.0, 0.0, c("valid", frozenset("AB")), c("valid", frozenset("ABCD")), 1.0),
    ], {"e": "坏文件"})
    cells = {st.name: st for st in items.cell_stats(data)}
    assert cells["q01_test"].mean == 0.5 and cells["q01_test"].full_rate == 0.5
    assert cells["q02_test"].mean == 0.75 and cells["q02_test"].full_rate == 0.25
    assert cells["q02_test"].distribution == {0.0: 2, 1.0: 1, 2.0: 1}
    assert (cells["essay"].graded, cells["essay"].pending, cells["essay"].mean) == (2, 2, 1.5)
    q1, q2 = items.option_stats(data)
    assert q1.counts == {"A": 2, "B": 2, "C": 0, "D": 0} and (q1.blank, q1.invalid) == (1, 0)
    assert q2.counts == {"A": 3, "B": 1, "C": 2, "D": 1} and (q2.blank, q2.invalid) == (0, 1)
    assert math.isnan(q1.discrimination["C"])
    assert q1.disagree == 1 and q2.disagree == 0  # "AB" on a single choice scores 0, the gradebook says 1
    page = item_page.render_html(items.analyse(data))
    assert "有 1 份答案按笔记本里的文字读出的结果与成绩库的得分不一致" in page
    assert 'id="unreadable" data-count="1"' in page and "坏文件" in page and 'data-count="4"' in page
    assert "<script" not in page and page.count("data:image/png;base64,") == 3


def test_a_damaged_autograded_notebook_is_a_reason_not_a_crash(tmp_path):
    (tmp_path / "quiz-x.ipynb").write_text('{"cells": [', encoding="utf-8")
    sources, reason = loading.read_autograded(tmp_path, ["quiz-x"])
    assert sources == {} and "无法读取" in reason
    sources, reason = loading.read_autograded(tmp_path, ["other"])
    assert sources == {} and "没有自动评分后的笔记本" in reason
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('answer = "C"', metadata={
        "nbgrader": {"grade_id": "q01", "solution": True, "grade": False}})])
    nbformat.write(nb, str(tmp_path / "good.ipynb"))
    assert loading.read_autograded(tmp_path, ["good"]) == ({"good": {"q01": 'answer = "C"'}}, None)


# --------------------------------------------------------------------------- issue 19, item 10

def _visible(page_html: str) -> str:
    """The text a reader sees: no tags, attributes, styles or inline images."""
    text = re.sub(r"<style>.*?</style>", "", page_html, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def _timeout_output():
    return nbformat.v4.new_output("error", ename="CellTimeoutError", evalue="超时",
                                  traceback=["CellTimeoutError: 超时"])


@pytest.mark.parametrize(("source", "outputs", "score", "want"), [
    # the loop runs first: the kernel never got "B"; the gradebook says 0
    ('while True:\n    pass\nanswer = "B"', [_timeout_output()], 0.0,
     loading.Choice("error", error="CellTimeoutError")),
    # the answer line ran before the timeout: the text is what was graded
    ('answer = "B"\nwhile True:\n    pass', [_timeout_output()], 1.0, loading.Choice("valid", frozenset("B"))),
    ('answer = "A"\nwhile True:\n    pass', [_timeout_output()], 0.0, loading.Choice("valid", frozenset("A"))),
    # blank whatever happened
    ('while True:\n    pass\nanswer = ""', [_timeout_output()], 0.0, loading.Choice("blank")),
    ('answer = "B"', [], 1.0, loading.Choice("valid", frozenset("B"))),
])
def test_a_failed_answer_cell_is_read_as_graded(source, outputs, score, want):
    cell = nbformat.v4.new_code_cell(source, outputs=outputs)
    assert loading.graded_choice(cell, ITEM, score) == want


def test_a_timed_out_test_cell_makes_the_answer_failed_too():
    answer = nbformat.v4.new_code_cell('answer = "B"')
    test = nbformat.v4.new_code_cell("quiz.grade(...)", outputs=[_timeout_output()])
    assert loading.graded_choice(answer, ITEM, 0.0, test) == loading.Choice("error", error="CellTimeoutError")


@pytest.mark.cjk_font
def test_tables_agree_and_the_note_names_the_timeout_on_a_hand_made_class():
    """12 students, 9 chose the key, one timed out on a sheet that says the key: 75% in both tables."""
    c = loading.Choice
    subs = [loading.Submission(f"k{i}", 1.0, {"q01_test": 1.0}, {"q01": c("valid", frozenset("B"))}) for i in range(9)]
    subs += [loading.Submission(f"w{i}", 0.0, {"q01_test": 0.0}, {"q01": c("valid", frozenset("A"))}) for i in range(2)]
    subs.append(loading.Submission("t", 0.0, {"q01_test": 0.0}, {"q01": c("error", error="CellTimeoutError")}))
    data = loading.AssignmentData("quiz-x", 1.0, [("q01_test", 1.0)], [ITEM], subs, {}, {"q01_test": "第 1 题"})
    analysis = items.analyse(data)
    (st,), (cell,) = analysis.options, analysis.cells
    assert st.counts["B"] / st.answered == cell.full_rate == 0.75
    assert st.failed == 1 and st.disagree == 0
    page = Page(item_page.render_html(analysis))
    rows = page.options("q01")
    assert rows["B"]["count"] == "9" and rows["error"]["count"] == "1"
    text = _visible(page.text)
    assert "75.0%" in text and "83.3%" not in text
    assert "运行超时被中断 1 份" in text and "用变量或表达式写的" not in text
    assert "q01_test" not in text and "第 1 题" in text


@pytest.mark.slow
@pytest.mark.grading
def test_a_timed_out_answer_has_its_own_row_and_cause(graded_class, quiz_page):
    """The real class: the sheet whose answer cell looped says the key, but nbgrader graded it 0."""
    course, intended, _ = graded_class
    page, analysis, _ = quiz_page
    assert gradebook_scores(course, QUIZ)[TIMED_OUT]["q01_test"] == 0.0
    rows = page.options("q01")
    assert rows["error"]["count"] == "1"
    assert 'data-question="q01" data-disagree="0"' in page.text
    key = quiz_keys()["q01"][0]
    exactly_key = sum(1 for cells in intended.values() if cells["q01"] == key)
    full = {r["cell"]: r for r in page.rows() if "cell" in r}["q01_test"]
    assert float(full["full_rate"]) * int(full["graded"]) == pytest.approx(exactly_key)
    assert sum(1 for cells in intended.values() if not isinstance(cells["q01"], str) and key <= cells["q01"]) == \
        sum(int(rows[k]["count"]) for k in key)
    note = re.search(r'<p class="bad" data-question="q01" data-failed="1">(.*?)</p>', page.text, re.S)
    assert note and "运行超时被中断 1 份" in note.group(1)
    assert "用变量或表达式写的" not in _visible(page.text)


@pytest.mark.slow
@pytest.mark.grading
def test_pages_name_exercises_as_students_see_them(quiz_page, chapter_page):
    chapter, quiz_text = _visible(chapter_page[0].text), _visible(quiz_page[0].text)
    for internal in ("test_softmax_stable", "test_softmax_temperature", "test_masked_softmax", "written_shift"):
        assert internal not in chapter
    for label in ("练习 1：数值稳定的 softmax", "练习 2：温度", "练习 3：带掩码的 softmax", "练习 4：简答"):
        assert label in chapter
    assert not re.search(r"q\d\d_test", quiz_text)
    assert all(f"第 {n} 题" in quiz_text for n in range(1, 11))


@pytest.mark.slow
@pytest.mark.grading
def test_a_chapter_page_says_nothing_of_options_or_distractors(chapter_page, quiz_page):
    chapter = _visible(chapter_page[0].text)
    assert "选项" not in chapter and "干扰项" not in chapter
    assert "练习" in chapter and "区分度" in chapter
    assert "干扰项" in _visible(quiz_page[0].text)


@pytest.mark.slow
@pytest.mark.grading
def test_the_written_answer_chart_counts_the_pending(chapter_page):
    page, analysis, _ = chapter_page
    written = {st.name: st for st in analysis.cells}["written_shift"]
    assert written.pending >= 3
    labels, values, colors = item_page.distribution_bars(written)
    assert labels[-1] == "待人工批改" and values[-1] == written.pending
    assert sum(values) == written.graded + written.pending == len(analysis.data.submissions)
    assert "灰色的“待人工批改”一栏" in page.text


def test_table_headers_do_not_wrap():
    """The page's style keeps every header cell on one line (Chinese would otherwise wrap a character a line)."""
    style = re.search(r"<style>(.*?)</style>", item_page.render_html(items.analyse(loading.AssignmentData(
        "quiz-x", 1.0, [], [], [], {}))), re.S).group(1)
    rule = re.search(r"(?:^|\n)th\s*\{([^}]*)\}", style)
    assert rule and "white-space: nowrap" in rule.group(1), style


@pytest.mark.slow
@pytest.mark.grading
@pytest.mark.browser
@pytest.mark.cjk_font
@pytest.mark.parametrize("width", [1280, 900])
def test_headers_stay_on_one_line_in_chromium(quiz_page, chapter_page, tmp_path, width):
    """Every <th> is one line high at a normal window width (measured, not assumed from the CSS)."""
    from conftest import provision

    probe = """<script>window.addEventListener("load", () => {
      const ths = Array.from(document.querySelectorAll("th"));
      const lines = ths.map(th => Math.round(th.getBoundingClientRect().height /
                                              parseFloat(getComputedStyle(th).lineHeight)));
      document.title = "th:" + ths.length + " maxlines:" + Math.max(...lines);
    });</script></body>"""
    for name, (page, _, _) in (("quiz", quiz_page), ("chapter", chapter_page)):
        path = tmp_path / f"{name}.html"
        path.write_text(page.text.replace("</body>", probe), encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
            run = subprocess.run([provision.find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                                  "--disable-background-networking", f"--user-data-dir={profile}",
                                  f"--window-size={width},900", "--virtual-time-budget=5000", "--dump-dom",
                                  path.as_uri()], capture_output=True, text=True, timeout=120, check=False)
        title = re.search(r"<title>th:(\d+) maxlines:(\d+)</title>", run.stdout)
        assert title, run.stderr[-2000:]
        assert int(title[1]) > 5 and int(title[2]) == 1, (name, width, title.group(0))


def test_a_correlation_that_rounds_to_zero_is_shown_without_a_sign():
    from grading.analysis import page

    assert page.corr(-0.001) == "0.00" and page.corr(0.004) == "0.00"
    assert page.corr(-0.3) == "-0.30" and page.corr(0.25) == "+0.25"
    assert page.corr(float("nan")) == "—"


def test_a_class_that_saw_different_orders_is_counted_in_canonical_options():
    """Six students, each shown question 1's four options in their own order, each writes the letter they saw.

    Whatever letter a student wrote, the statistics count the canonical option it stood for, and the
    grade call's ``question=Q1`` (an object, not a literal) is skipped, not a reason to drop the key.
    """
    source = ('_answer = quiz.take_answer(globals())\nQ1.check(_answer)\n### BEGIN HIDDEN TESTS\n'
              'quiz.grade(_answer, question=Q1, number=1, multi=False, points=1, key="B", explanations={\n'
              '    "A": "a", "B": "b", "C": "c", "D": "d"})\n### END HIDDEN TESTS')
    call = loading.grade_call(source)
    assert call["question"] == "Q1" and call["key"] == "B" and call["number"] == 1
    item = loading.QuizItem("q01", "q01_test", 1, frozenset("B"), "ABCD", False, 1.0, variants="quiz-x")
    students = [f"stu{i}" for i in range(6)]
    orders = {s: variants.order(s, "quiz-x", 1, 4) for s in students}
    assert len(set(orders.values())) > 1, "the students saw different orders"
    meant = dict(zip(students, "BBBBCA", strict=True))  # four chose the key, one each of two distractors
    subs = []
    for s in students:
        written = variants.canonical_to_shown(meant[s], orders[s])
        cell = nbformat.v4.new_code_cell(f"answer = {written!r}")
        choice = loading.graded_choice(cell, item, 1.0 if meant[s] == "B" else 0.0, None, s)
        assert choice == loading.Choice("valid", frozenset(meant[s])), (s, written)
        subs.append(loading.Submission(s, float(meant[s] == "B"), {"q01_test": float(meant[s] == "B")},
                                       {"q01": choice}))
    written_letters = {variants.canonical_to_shown("B", orders[s]) for s in students if meant[s] == "B"}
    assert len(written_letters) > 1, "the key's letter differed from student to student"
    data = loading.AssignmentData("quiz-x", 1.0, [("q01_test", 1.0)], [item], subs, {})
    (stats,) = items.option_stats(data)
    assert stats.counts == {"A": 1, "B": 4, "C": 1, "D": 0} and stats.disagree == 0
    # the same letters read without the orders would scatter the key over several letters
    plain = loading.QuizItem("q01", "q01_test", 1, frozenset("B"), "ABCD", False, 1.0)
    raw = [loading.graded_choice(nbformat.v4.new_code_cell(
        f"answer = {variants.canonical_to_shown(meant[s], orders[s])!r}"), plain, 0.0, None, s) for s in students]
    assert Counter(next(iter(c.letters)) for c in raw) != Counter(meant.values())
    page = item_page.render_html(items.analyse(data))
    assert 'id="canonical"' in page and "源笔记本里的选项顺序" in page
    assert 'id="canonical"' not in item_page.render_html(items.analyse(loading.AssignmentData(
        "quiz-x", 1.0, [("q01_test", 1.0)], [plain], subs, {})))
