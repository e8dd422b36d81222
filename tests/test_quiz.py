"""The autograded quizzes: answer parsing, the partial-credit rule, the keys, and the nbgrader chain.

The keys live only in the hidden tests of ``solutions/quiz-*/``; this module
reads them from there (never from a copy of its own), checks a few of them
against attnlib, and runs generate -> autograde -> feedback on the source, the
blank release and the kept sample sheets in a temporary course directory.
"""

from __future__ import annotations

import ast
import math
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import nbformat
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from nbgrader.utils import get_partial_grade

from attnlib import numpy as anp
from attnlib import quiz, variants
from attnlib import torch as att

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUIZZES = ("quiz-sdpa", "quiz-qkv", "quiz-modern", "quiz-frontier", "quiz-practice")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --------------------------------------------------------------------------- parsing

@pytest.mark.parametrize(("answer", "expected"), [
    ("B", "B"), ("b", "B"), ("  b  ", "B"), ("Ｂ", "B"), ("ｂ", "B"),
    ("AB", "AB"), ("ab", "AB"), ("BA", "AB"), ("A, B", "AB"), ("a,b", "AB"), ("A B", "AB"), ("A，B", "AB"),
    ("A、B", "AB"), ("A; B", "AB"), ("Ａ，Ｂ", "AB"), ("A,\tB\n", "AB"),
    (["A", "B"], "AB"), (["a", "b"], "AB"), (("A",), "A"), ({"a", "B"}, "AB"), (frozenset({"C"}), "C"),
    (["AB", "D"], "ABD"), (["Ａ"], "A"),
])
def test_accepted_formats(answer, expected):
    assert quiz.format_letters(quiz.parse_answer(answer, "ABCD")) == expected


@pytest.mark.parametrize(("answer", "fragment"), [
    ("", "空"), ("   ", "空"), (", ，", "空"), ([], "空"),
    ("E", "'E'"), ("A+B", "'+'"), ("答案A", "'答'"), ("ABCDE", "'E'"), ("A-B", "'-'"),
    ("AA", "A"), ("a, A", "A"), (["A", "a"], "A"),
    (1, "int"), (3.0, "float"), (None, "NoneType"), (b"AB", "bytes"), ({"A": 1}, "dict"),
    (["A", 2], "2"), ({"C", 3}, "3"),
    (quiz.MISSING, "answer"),
])
def test_invalid_answers_name_the_problem(answer, fragment):
    with pytest.raises(quiz.InvalidAnswer) as info:
        quiz.parse_answer(answer, "ABCD")
    message = str(info.value)
    assert fragment in message
    assert re.search(r"[\u4e00-\u9fff]", message), "the message must be Chinese"


def test_duplicate_message_names_the_letter():
    with pytest.raises(quiz.InvalidAnswer, match="选项 B"):
        quiz.parse_answer("A B b", "ABCD")


def test_option_range_follows_the_question():
    assert quiz.parse_answer("E", "ABCDE") == {"E"}
    with pytest.raises(quiz.InvalidAnswer, match="ABC"):
        quiz.parse_answer("D", "ABC")


def test_take_answer_removes_the_variable():
    ns = {"answer": "B", "other": 1}
    assert quiz.take_answer(ns) == "B"
    assert "answer" not in ns and ns["other"] == 1
    assert quiz.take_answer(ns) is quiz.MISSING


# --------------------------------------------------------------------------- scoring rule

@pytest.mark.parametrize(("picked", "key", "expected"), [
    ("AC", "AC", 2.0), ("A", "AC", 1.0), ("ACD", "AC", 1.0), ("AD", "AC", 0.0), ("ABCD", "AC", 0.0),
    ("B", "AC", 0.0), ("AB", "ABD", 4 / 3), ("ABC", "ABD", 2 / 3), ("ABCD", "ABD", 4 / 3), ("ABD", "ABD", 2.0),
    ("C", "ABD", 0.0), ("ABC", "AB", 1.0),
])
def test_multi_select_rule(picked, key, expected):
    assert quiz.score(picked, key, multi=True, points=2) == pytest.approx(expected, abs=1e-12)


def test_partial_credit_adds_up_exactly_and_shows_two_decimals():
    """Three questions each worth 2/3 give 2, not 3 × 0.67 = 2.01 (or 9.66 where 9.67 is meant)."""
    parts = [quiz.score("ABC", "ABD", multi=True, points=2) for _ in range(3)]
    assert sum(parts) == pytest.approx(2.0, abs=1e-12)
    assert 9 + quiz.score("AB", "ABD", multi=True, points=1) == pytest.approx(29 / 3)
    assert quiz.points_text(2 / 3) == "0.67" and quiz.points_text(2.0) == "2" and quiz.points_text(-0.0) == "0"


def test_single_choice_is_all_or_nothing():
    assert quiz.score("B", "B", multi=False, points=1) == 1.0
    assert quiz.score("AB", "B", multi=False, points=1) == 0.0
    assert quiz.score("A", "B", multi=False, points=1) == 0.0


letters = st.frozensets(st.sampled_from("ABCD"))


@given(picked=letters, key=letters.filter(bool))
def test_multi_score_properties(picked, key):
    s = quiz.score(picked, key, multi=True, points=2)
    assert type(s) is float and 0.0 <= s <= 2.0
    assert (s == 2.0) == (picked >= key and not picked - key)
    # adding a wrong option never helps, adding a right one never hurts
    for extra in set("ABCD") - picked:
        t = quiz.score(picked | {extra}, key, multi=True, points=2)
        assert t >= s if extra in key else t <= s


def test_score_refuses_nonsense():
    with pytest.raises(ValueError):
        quiz.score("A", "", multi=True)
    with pytest.raises(ValueError):
        quiz.score("A", "A", multi=False, points=0)


# --------------------------------------------------------------------------- grade() and its output

EXPLAIN = {"A": "甲的理由", "B": "乙的理由", "C": "丙的理由", "D": "丁的理由"}


def nbgrader_reads(value, points):
    """The partial credit nbgrader 0.9 takes from a cell whose last expression is ``value``."""
    return get_partial_grade({"data": {"text/plain": repr(value)}}, points)


def test_grade_prints_every_explanation_and_returns_partial_credit(capsys):
    got = quiz.grade("a, b", key="ABD", explanations=EXPLAIN, multi=True, points=2, number=5)
    out = capsys.readouterr()
    assert out.err == ""
    assert got == pytest.approx(4 / 3) and nbgrader_reads(got, 2) == pytest.approx(4 / 3)
    assert "得 1.33 分" in out.out
    assert "第 5 题" in out.out and "部分正确" in out.out
    assert "你的答案：AB" in out.out and "正确答案：ABD" in out.out
    for letter, text in EXPLAIN.items():
        assert text in out.out
        mark = "✓" if letter in "ABD" else "✗"
        assert re.search(rf"{letter}（{mark}", out.out)


@pytest.mark.parametrize("answer", ["E", "", 7, quiz.MISSING, "AB"])
def test_grade_gives_zero_with_reason(capsys, answer):
    got = quiz.grade(answer, key="B", explanations=EXPLAIN, multi=False, points=1, number=2)
    out = capsys.readouterr().out
    assert got == 0.0 and nbgrader_reads(got, 1) == 0.0
    assert "问题：" in out and "正确答案：B" in out and "乙的理由" in out


def test_grade_full_marks_read_by_nbgrader(capsys):
    got = quiz.grade("Ｂ", key="B", explanations=EXPLAIN, points=1, number=1)
    assert nbgrader_reads(got, 1) == 1.0
    assert "正确，得 1 分" in capsys.readouterr().out


def test_check_format_never_reveals_or_raises(capsys):
    assert quiz.check_format("ab", multi=True) is None
    out = capsys.readouterr().out
    assert "格式检查通过" in out and "AB" in out and "正确" not in out.replace("对错", "")
    # missing or unreadable answers: 0.0, which `nbgrader validate` reports as a failed check
    assert quiz.check_format("AB", multi=False) == 0.0
    assert "单选题" in capsys.readouterr().out
    assert quiz.check_format(quiz.MISSING) == 0.0
    assert "没有找到变量 answer" in capsys.readouterr().out
    assert quiz.check_format("E") == 0.0


# --------------------------------------------------------------------------- the source notebooks

def hidden_region(source: str) -> str:
    m = re.search(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", source, re.S)
    return m.group(1) if m else ""


def grade_call(source: str) -> dict:
    """The keyword arguments of the ``quiz.grade(...)`` call in a test cell's hidden region.

    Every argument but ``question`` (the name of the question's object, ``Q3``) is a literal.
    """
    tree = ast.parse(hidden_region(source))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "quiz.grade"]
    assert len(calls) == 1
    kwargs = {k.arg: ast.unparse(k.value) if k.arg == "question" else ast.literal_eval(k.value)
              for k in calls[0].keywords}
    assert ast.unparse(calls[0].args[0]) == "_answer"
    assert isinstance(tree.body[-1], ast.Expr) and tree.body[-1].value is calls[0], "grade() must be the last line"
    return kwargs


def load(name: str):
    return nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)


SHOW = re.compile(r"^Q\d+\.show\(\)$", re.M)


def question_of(show_source: str) -> quiz.Question:
    """The ``quiz.Question`` a ``qNN_show`` cell defines (run without its ``show()`` line)."""
    namespace = {"quiz": quiz}
    exec(SHOW.sub("", show_source), namespace)  # the repository's own notebook cell
    (question,) = [v for v in namespace.values() if isinstance(v, quiz.Question)]
    return question


def questions(name: str) -> list[dict]:
    """Per question: grade ids, points, the hidden grade() arguments and the question of the source notebook.

    ``text`` is the question as the canonical variant reads it: the Markdown cell (heading and stem) and the
    options, lettered in their written order, as ``Question.show`` displays them without a student.
    """
    nb = load(name)
    out = []
    cells = nb.cells
    for i, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        if re.fullmatch(r"q\d\d", meta.get("grade_id", "")):
            test, show = cells[i + 1], cells[i - 1]
            question = question_of(show.source)
            text = cells[i - 2].source + "\n\n" + question.markdown(question.variant(None))
            out.append({"id": meta["grade_id"], "answer": cell, "test": test, "show": show, "question": question,
                        "points": test.metadata.nbgrader["points"], "call": grade_call(test.source), "text": text})
    return out


@pytest.mark.parametrize("name", QUIZZES)
def test_source_notebook_structure(name):
    qs = questions(name)
    assert [q["id"] for q in qs] == [f"q{i:02d}" for i in range(1, 11)]
    nb = load(name)
    intro = nb.cells[0].source
    assert "计分规则" in intro and "max(0" in intro
    assert "每个人看到的选项顺序不同" in intro and "make lab" in intro and "JupyterHub" in intro
    assert f'quiz.announce("{name}")' in nb.cells[1].source
    for i, q in enumerate(qs, 1):
        ans, test, call = q["answer"].metadata.nbgrader, q["test"].metadata.nbgrader, q["call"]
        show, question = q["show"].metadata.nbgrader, q["question"]
        assert ans["solution"] and not ans["grade"]
        assert test["grade"] and not test["solution"] and test["locked"]
        assert show["grade_id"] == f"q{i:02d}_show" and show["locked"] and not show["grade"] and not show["solution"]
        assert q["show"].source.rstrip().endswith(f"Q{i}.show()")
        assert (question.assignment, question.number, question.multi, question.points) == (
            name, i, call["multi"], call["points"])
        assert call["question"] == f"Q{i}"
        assert call["points"] == q["points"] == (2 if call["multi"] else 1)
        assert call["number"] == i
        assert set(call["explanations"]) == set("ABCD") and all(len(t) > 10 for t in call["explanations"].values())
        assert question.letters == "ABCD"
        assert ("多选" if call["multi"] else "单选") in q["text"]
        assert not re.search(r"^- \*\*[A-H]\.\*\*", q["answer"].source + "".join(
            c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == f"q{i:02d}_text"), re.M)
        assert f'answer = "{call["key"]}"' in q["answer"].source
        visible = q["test"].source.split("### BEGIN HIDDEN TESTS")[0]
        assert "take_answer(globals())" in visible and f"Q{i}.check(_answer)" in visible


# --------------------------------------------------------------------------- per-student option orders

def filled(text: str, variant: quiz.Variant) -> str:
    """``text`` (an option or explanation) as ``variant`` reads it: its ``{name}`` placeholders filled, if any."""
    return text.format(**variant.values) if variant.values else text


STUDENTS = ("alice", "bob", "carol")  # two may draw the same order of a question (1 in 24); three all alike: 1 in 576


def test_students_see_different_option_orders_in_every_question_of_every_quiz():
    for name in QUIZZES:
        for q in questions(name):
            alice, *others = (q["question"].variant(s) for s in STUDENTS)
            assert len({v.order for v in (alice, *others)}) > 1, (name, q["id"])
            assert all(sorted(v.order) == [0, 1, 2, 3] for v in (alice, *others))
            # each sees every option once, lettered A-D in their own order
            shown = re.findall(r"^- \*\*([A-D])\.\*\* (.+)$", q["question"].markdown(alice), re.M)
            assert [letter for letter, _ in shown] == list("ABCD")
            assert [text for _, text in shown] == [filled(q["question"].options[c], alice) for c in alice.order]


def test_the_canonical_variant_is_the_written_order(monkeypatch):
    for var in (variants.ENV_STUDENT, "JUPYTERHUB_USER"):
        monkeypatch.delenv(var, raising=False)
    variants.pin(None)
    for name in QUIZZES:
        for q in questions(name):
            question = q["question"]
            assert question.variant().order == (0, 1, 2, 3) and question.variant().student is None
            written = re.findall(r"^- \*\*([A-D])\.\*\* (.+)$", question.markdown(), re.M)
            canonical = question.variant()
            assert written == list(zip("ABCD", (filled(o, canonical) for o in question.options), strict=True))
            # the instructor's solution is the canonical answer: the canonical variant scores it full marks
            got = quiz.grade(q["call"]["key"], question=question, key=q["call"]["key"], multi=question.multi,
                             points=question.points, explanations=q["call"]["explanations"], number=question.number)
            assert got == question.points


def test_a_student_reads_the_feedback_in_their_own_letters(capsys):
    q = questions("quiz-sdpa")[0]  # key B: "衡量查询与键有多相似"
    question, call = q["question"], q["call"]
    variants.pin("alice")
    try:
        variant = question.variant()
        shown_key = variant.shown(call["key"])
        assert shown_key != call["key"]
        assert quiz.grade(shown_key, question=question, key=call["key"], explanations=call["explanations"]) == 1
        out = capsys.readouterr().out
        assert f"你的答案：{shown_key}" in out and f"正确答案：{shown_key}" in out
        # the explanation of each option stands beside the letter alice saw it under
        for position, canonical in enumerate(variant.order):
            assert f"    {'ABCD'[position]}（" + ("✓" if canonical == 1 else "✗") in out
            assert call["explanations"]["ABCD"[canonical]] in out.split(f"    {'ABCD'[position]}（")[1].split("\n")[0]
        # the canonical letters, copied from the written order, lose the point
        assert quiz.grade(call["key"], question=question, key=call["key"], explanations=call["explanations"]) == 0
    finally:
        variants.pin(None)


def test_announce_names_whose_order_is_shown(monkeypatch, capsys):
    for var in (variants.ENV_STUDENT, "JUPYTERHUB_USER"):
        monkeypatch.delenv(var, raising=False)
    variants.pin(None)
    assert quiz.announce("quiz-sdpa") is None
    assert "标准顺序" in capsys.readouterr().out
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    quiz.announce("quiz-sdpa")
    out = capsys.readouterr().out
    assert "alice" in out and "quiz-sdpa" in out and out.count("\n") == 1


def test_sdpa_question_5_is_sound():
    q5 = questions("quiz-sdpa")[4]
    assert q5["call"]["multi"] and q5["call"]["key"] == "ABD" and "多选" in q5["text"]
    assert "教师注" in hidden_region(q5["test"].source)


# --------------------------------------------------------------------------- keys checked against attnlib

def test_key_variance_of_dot_product_is_d_k():  # sdpa q04, q02; qkv q03
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 20000, 64))
    raw = np.einsum("nd,nd->n", q, k)
    assert abs(raw.var() - 64) < 3 and abs(raw.std() - 8) < 0.2
    scaled = anp.attention_scores(q[:2000, None, :], k[:2000, None, :])[:, 0, 0]
    assert abs(scaled.var() - 1) < 0.1


def test_key_softmax_rows_nonnegative_sum_to_one_scores_signed():  # sdpa q03, qkv q04, q08
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((3, 6, 8))
    scores = anp.attention_scores(q, k)
    out, w = anp.scaled_dot_product_attention(q, k, v)
    assert scores.shape == (6, 6) and (scores < 0).any() and (scores > 1).any()
    assert (w > 0).all() and np.allclose(w.sum(-1), 1)
    assert np.allclose(out, w @ v)  # qkv q05: the output combines V


def test_key_causal_mask_hides_the_future():  # sdpa q07
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 5, 4))
    out, _ = anp.scaled_dot_product_attention(q, k, v, causal=True)
    k2, v2 = k.copy(), v.copy()
    k2[3:], v2[3:] = rng.standard_normal((2, 2, 4))
    out2, _ = anp.scaled_dot_product_attention(q, k2, v2, causal=True)
    assert np.allclose(out[:3], out2[:3]) and not np.allclose(out[3:], out2[3:])


def test_key_attention_needs_position_information():  # sdpa q08 D: permutation equivariance
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 8))
    w = rng.standard_normal((3, 8, 8))
    perm = rng.permutation(5)
    out, _ = anp.scaled_dot_product_attention(*anp.qkv_projection(x, *w))
    out_p, _ = anp.scaled_dot_product_attention(*anp.qkv_projection(x[perm], *w))
    assert np.allclose(out_p, out[perm])
    # ... but a causal mask breaks the symmetry: a decoder can read order from the mask itself
    causal, _ = anp.scaled_dot_product_attention(*anp.qkv_projection(x, *w), causal=True)
    causal_p, _ = anp.scaled_dot_product_attention(*anp.qkv_projection(x[perm], *w), causal=True)
    assert not np.allclose(causal_p, causal[perm])


def test_key_shared_projection_gives_symmetric_scores():  # qkv q02 C, sdpa q06 A
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((5, 8)), rng.standard_normal((8, 8))
    q, k, _ = anp.qkv_projection(x, w, w, w)
    s = anp.attention_scores(q, k)
    assert np.allclose(s, s.T)
    q, k, _ = anp.qkv_projection(x, w, rng.standard_normal((8, 8)), w)
    s = anp.attention_scores(q, k)
    assert not np.allclose(s, s.T)


def test_key_heads_with_shared_weights_repeat_each_other():  # sdpa q10 D, qkv q06
    rng = np.random.default_rng(5)
    d, h = 8, 2
    x = rng.standard_normal((4, d))
    block = rng.standard_normal((d, d // h))
    shared = np.concatenate([block] * h, axis=1)
    w_o = np.eye(d)
    _, w_same = anp.multi_head_attention(x, x, shared, shared, shared, w_o, h)
    assert np.allclose(w_same[0], w_same[1])
    ws = rng.standard_normal((3, d, d))
    _, w_diff = anp.multi_head_attention(x, x, *ws, w_o, h)
    assert not np.allclose(w_diff[0], w_diff[1])
    # qkv q06 C: h heads of width d/h have as many projection weights as one head of width d
    assert h * block.size == d * d


def test_key_stable_softmax_shift_prevents_overflow_not_saturation():  # qkv q10
    x = np.array([1000.0, 1050.0])
    assert np.allclose(anp.softmax(x), anp.softmax(x - 1050))
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(x) / np.exp(x).sum()
    assert np.isnan(naive).any()
    t = torch.tensor([0.0, 50.0], dtype=torch.float64, requires_grad=True)
    att.softmax(t)[1].backward()
    assert anp.softmax(np.array([0.0, 50.0]))[0] < 1e-20 and t.grad.abs().max() < 1e-20


def test_key_scaling_keeps_softmax_gradient_alive():  # sdpa q02, qkv q03
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 64, 1024, generator=gen, dtype=torch.float64)
    upstream = torch.randn(64, 64, generator=gen, dtype=torch.float64)
    peak, grad = {}, {}
    for scale in (True, False):
        s = att.attention_scores(q, k, scale=scale).detach().requires_grad_(True)
        w = att.softmax(s)
        (w * upstream).sum().backward()
        peak[scale], grad[scale] = w.max(-1).values.mean().item(), s.grad.norm(dim=-1).median().item()
    assert peak[False] > 0.9 > 0.2 > peak[True]  # unscaled rows are nearly one-hot
    assert grad[False] < 0.01 * grad[True]  # and pass back almost no gradient


def test_key_score_matrix_grows_quadratically():  # qkv q07, q09 C
    rng = np.random.default_rng(6)
    sizes = [anp.attention_scores(*rng.standard_normal((2, n, 8))).size for n in (64, 128)]
    assert sizes[1] == 4 * sizes[0]
    # with a KV cache, step t still scores t keys: the total over n steps is n(n+1)/2
    n = 32
    q, k = rng.standard_normal((2, n, 8))
    cached = sum(anp.attention_scores(q[t:t + 1], k[: t + 1]).size for t in range(n))
    assert cached == n * (n + 1) // 2
    # per step the cache cuts the work from t x t scores (recompute the prefix) to t (qkv q09 C's explanation);
    # one forward pass over the whole sequence has nothing cached to reuse: all n x n scores
    t = 20
    assert anp.attention_scores(q[:t], k[:t]).size == t * t and anp.attention_scores(q[t - 1:t], k[:t]).size == t
    assert anp.attention_scores(q, k).size == n * n


# --------------------------------------------------------------------------- no key before grading

def secrets(name: str) -> list[str]:
    """Strings that would give answers away: the explanation of every option (they say which are right)."""
    return [t for q in questions(name) for t in q["call"]["explanations"].values()]


def student_files() -> list[pathlib.Path]:
    files = [p for p in (ROOT / "attnlib").rglob("*.py")]
    files += [p for p in (ROOT / "notebooks").rglob("*.ipynb")] if (ROOT / "notebooks").exists() else []
    files += [p for p in (ROOT / "book").rglob("*") if p.is_file() and p.suffix in {".md", ".ipynb", ".yml", ".py"}]
    return files


def test_no_key_in_student_facing_files():
    files = student_files()
    assert any(p.name == "quiz.py" for p in files)
    for name in QUIZZES:
        for secret in secrets(name):
            for path in files:
                assert secret not in path.read_text(encoding="utf-8", errors="replace"), (secret, path)


# --------------------------------------------------------------------------- the nbgrader chain

@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A temporary course directory using the repository's nbgrader configuration, both quizzes generated."""
    from grading.course import Course

    course = Course(tmp_path_factory.mktemp("quizcourse"))
    course.add_sources(QUIZZES)
    for name in QUIZZES:
        course.nbgrader("generate_assignment", name, "--force")
    return course


# sample sheet -> expected points per question (the sheets are kept in grading/samples/). Each sheet is submitted
# under its folder's name as the student id and holds its answers in the letters that student sees; the comments
# give them in canonical letters (the written order), in which these scores are easiest to check.
EXPECTED = {
    "quiz-sdpa": {
        "all-correct": [1, 1, 1, 1, 2, 1, 1, 2, 1, 2],
        # "b", "Ｂ", ["C"], ("A",), "A, B" (2 of 3), {"b"}, "d", ["a","c"] (1-1), "A", "A B D" (2-1 of 3)
        "mixed-formats": [1, 1, 0, 1, 4 / 3, 1, 0, 0, 1, 2 / 3],
        # "E", "", 1, "AA", ["A", 2], "答案A", "A" (right), stub left (must not reuse q07's "A"), "AB" (single), None
        "invalid-answers": [0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
    },
    "quiz-qkv": {
        "all-correct": [1, 1, 1, 1, 1, 1, 1, 2, 2, 2],
        # "B", "a", "Ｃ", {"C"}, ("A",), " b ", "c", "A，B" (2 of 3), ["A","B","C"] (2-1 of 2), "A、B"
        "mixed-formats": [1, 1, 0, 1, 1, 1, 1, 4 / 3, 1, 2],
        # "Z", "A" (right), stub left (must not reuse q02's "A"), "CC", [], 3.0, {"C", 3}, "ABCDE", "A-B", b"AB"
        "invalid-answers": [0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
    },
    "quiz-modern": {
        "all-correct": [1, 2, 1, 1, 1, 1, 2, 2, 1, 1],
        # "b", ["d"] (1 of 2), "Ｃ", ("D",), "c", {"c"}, "A，B，D" (2-1 of 2), "A B C D" (3-1 of 3), " d. ", "D"
        "mixed-formats": [1, 1, 1, 1, 0, 1, 1, 4 / 3, 1, 0],
        # "", "AE", "C" (right), no answer at all (must not reuse q03's "C"), "AA", 16, "A+B", ["A", None],
        # "AB" (single), "答案B"
        "invalid-answers": [0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
    },
    "quiz-frontier": {
        "all-correct": [1, 1, 2, 1, 1, 2, 1, 1, 2, 1],
        # "b", "Ｂ", ["a"] (1 of 2), ("C",), " b. ", "A，B，C" (2-1 of 2), {"a"}, "d", "A B", ["B"]
        "mixed-formats": [1, 1, 1, 0, 1, 1, 1, 0, 2, 1],
        # "", "BE", "AA", "B" (right), no answer at all (must not reuse q04's "B"), 7, "A+B", ["A", None],
        # "答案AB", "AB" (single)
        "invalid-answers": [0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
    },
    "quiz-practice": {
        "all-correct": [2, 1, 1, 1, 1, 1, 2, 1, 1, 2],
        # ["a"] (1 of 2), "b", "Ｃ", ("A",), " b. ", {"d"}, "A，B，C" (2-1 of 2), "B.", "d", "A B D" (2-1 of 2)
        "mixed-formats": [1, 1, 1, 0, 1, 0, 1, 1, 1, 1],
        # "", "BE", "CC", "D" (right), no answer at all (must not reuse q04's "D"), 7, "A+B", ["B", None],
        # "AD" (single), "答案BD"
        "invalid-answers": [0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
    },
}
TOTALS = {"quiz-sdpa": {"all-correct": 13, "mixed-formats": 7.0, "invalid-answers": 1, "blank": 0},
          "quiz-qkv": {"all-correct": 13, "mixed-formats": 31 / 3, "invalid-answers": 1, "blank": 0},
          "quiz-modern": {"all-correct": 13, "mixed-formats": 25 / 3, "invalid-answers": 1, "blank": 0},
          "quiz-frontier": {"all-correct": 13, "mixed-formats": 9, "invalid-answers": 1, "blank": 0},
          "quiz-practice": {"all-correct": 13, "mixed-formats": 8, "invalid-answers": 1, "blank": 0}}
#: Submissions whose letters were right for somebody else: the instructor's source (the canonical letters) handed
#: in by student "source", and all-correct's sheet handed in by student "copied".
COPIED = {"source": None, "copied": "all-correct"}


def copied_scores(name: str, student: str, written_for: str | None) -> list[float]:
    """Per question, what ``student`` earns with the right answers of ``written_for`` (None: canonical letters)."""
    scores = []
    for q in questions(name):
        question, key = q["question"], q["call"]["key"]
        letters = question.variant(written_for).shown(key)  # what the sheet says
        picked = question.variant(student).canonical(letters)  # what it means for the student who hands it in
        scores.append(quiz.score(picked, key, multi=question.multi, points=question.points))
    return scores


def test_sample_sheets_are_release_notebooks_with_answers():
    for name in QUIZZES:
        release = nbformat.read(ROOT / "notebooks" / name / f"{name}.ipynb", as_version=4)
        sheets = sorted(p.name for p in (ROOT / "grading" / "samples" / name).iterdir())
        assert sheets == sorted(EXPECTED[name])
        for sheet in sheets:
            nb = nbformat.read(ROOT / "grading" / "samples" / name / sheet / f"{name}.ipynb", as_version=4)
            text = "\n".join(c.source for c in nb.cells)
            assert "HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
            assert TOTALS[name][sheet] == pytest.approx(sum(EXPECTED[name][sheet]))
            # every cell but the answers reads as in the release (the qNN_show cells included)
            fixed = [(c.cell_type, c.source) for c in nb.cells if not c.metadata.get("nbgrader", {}).get("solution")]
            assert fixed == [(c.cell_type, c.source) for c in release.cells
                             if not c.metadata.get("nbgrader", {}).get("solution")], (name, sheet)


def test_canonical_letters_copied_lose_points():
    for name in QUIZZES:
        for student, written_for in COPIED.items():
            assert sum(copied_scores(name, written_for, written_for)) == 13  # right for whom they were written
            got = copied_scores(name, student, written_for)
            assert sum(got) < 13 - 3, (name, student, got)  # 4 options: a few survive the reshuffle by chance


def expected_total(name: str, student: str) -> float:
    if student in COPIED:
        return sum(copied_scores(name, student, COPIED[student]))
    return TOTALS[name][student]


def _submissions(course, name) -> dict:
    release = course.path("notebooks", name, f"{name}.ipynb")
    submissions = {"source": course.path("solutions", name, f"{name}.ipynb"), "blank": release}
    for sheet in EXPECTED[name]:
        submissions[sheet] = ROOT / "grading" / "samples" / name / sheet / f"{name}.ipynb"
    submissions["copied"] = submissions["all-correct"]
    return submissions


def _autograde_pins_the_submitter() -> bool:
    """Whether the course's autograde steps grade each submission as its submitter (``grading/variants.py``)."""
    from nbgrader.preprocessors import Execute

    from grading.nbgrader_autograde import autograde_steps

    return any(getattr(step, "__name__", "") == "PinStudent" for step in autograde_steps(Execute))


@pytest.fixture(scope="module")
def graded(course):
    """Every quiz submitted by the source, a blank sheet, every kept sample and a copy; autograded; feedback made.

    Each submission is graded as its student: by the course's own autograde steps where they pin the submitter
    (one ``autograde`` per quiz), else one ``autograde`` per student with ``ATTNLIB_STUDENT`` set to the student id.
    """
    pinned = _autograde_pins_the_submitter()
    for name in QUIZZES:
        for student, path in _submissions(course, name).items():
            dest = course.path("submitted", student, name)
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest / f"{name}.ipynb")
            if not pinned:
                with pytest.MonkeyPatch.context() as env:
                    env.setenv(variants.ENV_STUDENT, student)
                    course.nbgrader("autograde", name, "--student", student, "--force")
        if pinned:
            course.nbgrader("autograde", name, "--force")
        course.nbgrader("generate_feedback", name, "--force")
    return course


@pytest.mark.grading
@pytest.mark.slow
@pytest.mark.parametrize("name", QUIZZES)
def test_autograde_source_blank_and_samples(graded, name):
    course = graded
    release = course.path("notebooks", name, f"{name}.ipynb")
    text = release.read_text(encoding="utf-8")
    assert "HIDDEN TESTS" not in text and "quiz.grade" not in text and "BEGIN SOLUTION" not in text
    for secret in secrets(name):
        assert secret not in text
    answer_cells = [c for c in nbformat.reads(text, as_version=4).cells
                    if re.fullmatch(r"q\d\d", c.metadata.get("nbgrader", {}).get("grade_id", ""))]
    assert len(answer_cells) == 10
    # The only assignment left in a released answer cell is the empty answer: no key slips through.
    assert all(re.findall(r"^answer\s*=.*$", c.source, re.M) == ['answer = ""'] for c in answer_cells)
    submissions = _submissions(course, name)

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.path('gradebook.db')}") as gb:
        for student in submissions:
            sub = gb.find_submission(name, student)
            assert sub.max_score == 13
            assert sub.score == pytest.approx(expected_total(name, student), abs=1e-9), student
            per_question = EXPECTED[name].get(student) or (
                copied_scores(name, student, COPIED[student]) if student in COPIED else None)
            if per_question:
                nb = gb.find_submission_notebook(name, name, student)
                got = {g.name: g.score for g in nb.grades if g.name.endswith("_test")}
                want = {f"q{i:02d}_test": s for i, s in enumerate(per_question, 1)}
                assert got == pytest.approx(want, abs=1e-9), student

    for student in submissions:
        html = course.path("feedback", student, name, f"{name}.html").read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in html and "quiz.grade" not in html
        for q in questions(name):
            call, variant = q["call"], q["question"].variant(student)
            assert f"第 {call['number']} 题（" in html
            for expl in call["explanations"].values():
                assert filled(expl, variant).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in html
        assert html.count("正确答案：") == 10
        # the feedback speaks in the letters this student saw, and says whose order they were
        assert re.findall(r"正确答案：([A-D]+)", html) == [
            q["question"].variant(student).shown(q["call"]["key"]) for q in questions(name)], student
        assert f"显示的是学生 {student} 的选项顺序" in html
    mixed = course.path("feedback", "mixed-formats", name, f"{name}.html").read_text(encoding="utf-8")
    assert "部分正确" in mixed
    invalid = course.path("feedback", "invalid-answers", name, f"{name}.html").read_text(encoding="utf-8")
    assert "无效的字符" in invalid and "没有找到变量 answer" in invalid
    assert math.isclose(sum(EXPECTED[name]["all-correct"]), 13)
    right = course.path("feedback", "all-correct", name, f"{name}.html").read_text(encoding="utf-8")
    assert re.findall(r"你的答案：([A-D]+)", right) == re.findall(r"正确答案：([A-D]+)", right)


@pytest.mark.grading
@pytest.mark.browser
@pytest.mark.parametrize("name", QUIZZES)
def test_feedback_lines_wrap_in_a_1100px_window(graded, name, tmp_path):
    """Every option's explanation is readable on the page: no output box scrolls sideways at 1100 px."""
    from conftest import provision

    page = tmp_path / "feedback.html"
    html = graded.path("feedback", "all-correct", name, f"{name}.html").read_text(encoding="utf-8")
    probe = """<script>window.addEventListener("load", () => {
      const boxes = Array.from(document.querySelectorAll("div.output_area pre, div.output_subarea pre"));
      const wide = boxes.filter(b => b.scrollWidth > b.clientWidth + 1);
      document.title = "boxes:" + boxes.length + " wide:" + wide.length + " page:" +
        (document.documentElement.scrollWidth > window.innerWidth + 1);
    });</script></body>"""
    page.write_text(html.replace("</body>", probe), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        run = subprocess.run([provision.find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                              "--disable-background-networking", f"--user-data-dir={profile}", "--window-size=1100,900",
                              "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=120, check=False)
    title = re.search(r"<title>(.*?)</title>", run.stdout)
    assert title, run.stderr[-2000:]
    boxes, wide, page_scrolls = re.fullmatch(r"boxes:(\d+) wide:(\d+) page:(\w+)", title.group(1)).groups()
    assert int(boxes) >= 10, "each question's feedback is printed output"
    assert int(wide) == 0 and page_scrolls == "false", title.group(1)
