"""The instructor's chain on the kept sample submissions: exact scores, safe offline feedback."""

from __future__ import annotations

import html
import importlib.util
import pathlib
import re
import sys

import pytest
from assignments import hidden_lines

REPO = pathlib.Path(__file__).resolve().parent.parent
ASSIGNMENT = "ch05-softmax"

pytestmark = pytest.mark.grading

spec = importlib.util.spec_from_file_location("grade_samples", REPO / "scripts" / "grade_samples.py")
grade_samples = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = grade_samples  # dataclasses look their module up while the class is built
spec.loader.exec_module(grade_samples)

STABLE, TEMPERATURE, MASKED, WRITTEN = (
    "test_softmax_stable", "test_softmax_temperature", "test_masked_softmax", "written_shift")

# The intended score of every graded cell, (score, max). None = written answer waiting for a human.
# partial: 7 of 11 checks of exercise 1, but no max shift ([1000, 1000], ±1e4 and two far-apart rows overflow):
#          an essential check fails, so a third of the points                    -> 3 * 1/3;
#          4 of 7 of exercise 2 (no ValueError for T <= 0, T=1e-3 overflows: edges) -> 2 * 4/7;
#          4 of 10 of exercise 3, but fully masked slices become NaN (essential)  -> 3 * 1/3.
# crash:   exercise 1's cell raises ImportError, so softmax_stable never exists: its test cell errors (0);
#          exercise 2 only passes its two ValueError checks (2 * 2/7); exercise 3 is right.
# endless: exercise 3 loops forever on a fully masked row: interrupted at the timeout, 0; the rest full.
# noisy:   right answers that warn and write to stderr everywhere: full marks.
# cheat:   calls attnlib's softmax (aliased, through the module, through a helper): 0 everywhere.
# blank:   the release notebook untouched: 0 everywhere, the written answer too.
EXPECTED = {
    "blank": {STABLE: (0.0, 3.0), TEMPERATURE: (0.0, 2.0), MASKED: (0.0, 3.0), WRITTEN: (0.0, 2.0)},
    "correct": {STABLE: (3.0, 3.0), TEMPERATURE: (2.0, 2.0), MASKED: (3.0, 3.0), WRITTEN: (None, 2.0)},
    "partial": {STABLE: (1.0, 3.0), TEMPERATURE: (1.1428571428571428, 2.0), MASKED: (1.0, 3.0),
                WRITTEN: (None, 2.0)},
    "crash": {STABLE: (0.0, 3.0), TEMPERATURE: (0.5714285714285714, 2.0), MASKED: (3.0, 3.0), WRITTEN: (None, 2.0)},
    "endless": {STABLE: (3.0, 3.0), TEMPERATURE: (2.0, 2.0), MASKED: (0.0, 3.0), WRITTEN: (None, 2.0)},
    "noisy": {STABLE: (3.0, 3.0), TEMPERATURE: (2.0, 2.0), MASKED: (3.0, 3.0), WRITTEN: (None, 2.0)},
    "cheat": {STABLE: (0.0, 3.0), TEMPERATURE: (0.0, 2.0), MASKED: (0.0, 3.0), WRITTEN: (None, 2.0)},
}
TOTALS = {"blank": 0.0, "correct": 8.0, "partial": 3.142857142857143, "crash": 3.571428571428571,
          "endless": 5.0, "noisy": 8.0, "cheat": 0.0}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The whole chain, once, with a 5 s per-cell timeout so the endless sample costs little."""
    return grade_samples.run_chain(tmp_path_factory.mktemp("course"), [ASSIGNMENT], timeout=5)


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_sample_gets_exactly_the_intended_scores(report, student):
    result = report.result(ASSIGNMENT, student)
    assert set(result.cells) == set(EXPECTED[student])
    for cell, (score, max_score) in EXPECTED[student].items():
        got, got_max = result.cells[cell]
        assert got_max == max_score
        assert (got is None) if score is None else got == pytest.approx(score, abs=1e-9), (cell, got)
    assert result.score == pytest.approx(TOTALS[student], abs=1e-9)
    assert result.max_score == 10.0


def test_the_broken_file_is_skipped_and_the_gradebook_stays_usable(report):
    assert report.ungraded == {ASSIGNMENT: ["broken_json"]}
    assert sorted(r.student for r in report.results) == sorted(EXPECTED)
    with pytest.raises(KeyError):
        report.result(ASSIGNMENT, "broken_json")


def test_the_csv_export_has_every_total(report):
    rows = {row["student_id"]: row for row in report.csv_rows if row["assignment"] == ASSIGNMENT}
    for student, total in TOTALS.items():
        assert float(rows[student]["score"]) == pytest.approx(total, abs=1e-9)
        assert float(rows[student]["max_score"]) == 10.0


def test_the_table_lists_every_student(report):
    table = grade_samples.format_table(report.results, report.ungraded)
    assert "partial" in table and "1/3" in table and "1.14/2" in table
    assert "broken_json" in table and "无法评分" in table
    assert "待批改/2" in table


def _page_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_feedback_never_shows_hidden_test_source(report):
    hidden = hidden_lines(ASSIGNMENT)
    assert len(hidden) > 10
    for student in EXPECTED:
        (page,) = report.feedback(ASSIGNMENT, student)
        raw = page.read_text(encoding="utf-8")
        text = _page_text(raw)
        assert "checks.score()" in text  # the visible test source is there, so the search below can see code
        assert "HIDDEN TESTS" not in text
        assert not [line for line in hidden if line in text], student


def test_feedback_loads_nothing_from_the_network_and_typesets_math_offline(report):
    remote = re.compile(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?(https?:)?//""", re.I)
    for student in EXPECTED:
        (page,) = report.feedback(ASSIGNMENT, student)
        raw = page.read_text(encoding="utf-8")
        assert not remote.search(raw), student
        assert not re.search(r"@import\s+url\(\s*[\"']?(https?:)?//", raw)
        assert "cdnjs.cloudflare.com" not in raw
        assert "<mjx-container" in raw and "<script" not in raw  # math typeset when generated (test_feedback_page.py)


def test_feedback_explains_the_timeout_and_each_failed_check_in_chinese(report):
    (endless,) = report.feedback(ASSIGNMENT, "endless")
    assert "该单元运行超过时间限制" in _page_text(endless.read_text(encoding="utf-8"))
    (partial,) = report.feedback(ASSIGNMENT, "partial")
    text = _page_text(partial.read_text(encoding="utf-8"))
    assert "很大的分数 [1000, 1000] 不溢出：未通过" in text and "期望" in text and "实际" in text
    (cheat,) = report.feedback(ASSIGNMENT, "cheat")
    assert "attnlib 的参考实现" in _page_text(cheat.read_text(encoding="utf-8"))


def test_feedback_headings_and_comments_are_chinese(report):
    english = ("Test cell", "Student's answer", "Score:", "(Top)", "Comments:", "No response", "Written response")
    for student in EXPECTED:
        (page,) = report.feedback(ASSIGNMENT, student)
        text = _page_text(page.read_text(encoding="utf-8"))
        assert not [word for word in english if word in text], student
        assert "测试单元：练习 1" in text and "你的答案" in text and "回到顶部" in text
    partial = _page_text(report.feedback(ASSIGNMENT, "partial")[0].read_text(encoding="utf-8"))
    assert "总分：3.14 / 10.0，暂定：还有答案等待人工批改" in partial
    assert "书面作答 练习 4（得分：待人工批改，满分 2.0）" in partial
    assert "测试单元 练习 1（得分：1.0 / 3.0）" in partial
    blank = _page_text(report.feedback(ASSIGNMENT, "blank")[0].read_text(encoding="utf-8"))
    assert "总分：0.0 / 10.0）" in blank and "暂定" not in blank
    assert "评语：未作答" in blank
