"""``attnlib.variants``: a variant is a pure function of (student, assignment, question), stable everywhere.

The order a student sees is fixed by SHA-256 of the three strings, so it is the
same in another process (another ``PYTHONHASHSEED``) and on another machine;
every order of the options is reachable, about equally often; no student is the
canonical variant (the written order, the first value of every parameter).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import os
import subprocess
import sys

import pytest

from attnlib import variants

STUDENTS = [f"s{i:04d}" for i in range(2400)]


@pytest.fixture(autouse=True)
def no_student(monkeypatch):
    """Each test starts with no pin and neither variable set (and leaves no pin behind)."""
    for name in (variants.ENV_STUDENT, "JUPYTERHUB_USER"):
        monkeypatch.delenv(name, raising=False)
    variants.pin(None)
    yield
    variants.pin(None)


def test_the_same_three_strings_give_the_same_order_and_values_in_another_process():
    here = [variants.order(s, "quiz-sdpa", 3, 4) for s in ("alice", "bob", "张三")]
    drawn = variants.draw("alice", "quiz-sdpa", 3, {"n": [32, 40, 48, 64], "d": [64, 128]})
    code = ("from attnlib import variants\n"
            "print([variants.order(s, 'quiz-sdpa', 3, 4) for s in ('alice', 'bob', '张三')])\n"
            "print(variants.draw('alice', 'quiz-sdpa', 3, {'n': [32, 40, 48, 64], 'd': [64, 128]}))")
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        env.pop(variants.ENV_STUDENT, None)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.splitlines() == [repr(here), repr(drawn)]


def test_the_order_is_fixed_by_sha256_of_the_strings():
    # pinned values: a change of the hash or of the shuffle would silently re-letter every class's answers
    assert variants.order("alice", "quiz-sdpa", 1, 4) == (1, 0, 3, 2)
    assert variants.order("bob", "quiz-sdpa", 1, 4) == (3, 1, 0, 2)
    digest = hashlib.sha256(b"order3\x1fquiz-sdpa\x1f1\x1falice").digest()
    assert variants.unit_float("alice", "quiz-sdpa", 1, "order3") == int.from_bytes(digest[:8], "big") / 2**64


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_every_order_is_reachable_and_about_equally_often(n):
    counts = collections.Counter(variants.order(s, "quiz-x", 1, n) for s in STUDENTS)
    perms = set(itertools.permutations(range(n)))
    assert set(counts) == perms
    if n <= 4:  # 2400 students: at least 100 per order, a count within half of its expectation either way
        expected = len(STUDENTS) / len(perms)
        assert all(0.5 * expected < c < 1.5 * expected for c in counts.values()), counts


def test_each_student_s_order_is_a_permutation_and_questions_are_drawn_independently():
    for s in STUDENTS[:200]:
        assert sorted(variants.order(s, "quiz-x", 1, 4)) == [0, 1, 2, 3]
    same = sum(variants.order(s, "quiz-x", 1, 4) == variants.order(s, "quiz-x", 2, 4) for s in STUDENTS)
    assert same < len(STUDENTS) / 10  # 1 in 24 if independent, not "everyone's order repeats"
    other = sum(variants.order(s, "quiz-x", 1, 4) == variants.order(s, "quiz-y", 1, 4) for s in STUDENTS)
    assert other < len(STUDENTS) / 10


def test_the_canonical_variant_is_the_written_order_and_the_first_values():
    assert variants.student_id() is None
    for n in range(1, 9):
        assert variants.order(None, "quiz-x", 1, n) == tuple(range(n))
    assert variants.draw(None, "quiz-x", 1, {"n": [32, 40], "d": ["a", "b", "c"]}) == {"n": 32, "d": "a"}
    assert variants.unit_float(None, "quiz-x", 1) == 0.0


def test_every_value_of_a_parameter_is_drawn():
    values = [32, 40, 48, 56, 64]
    drawn = collections.Counter(variants.draw(s, "quiz-x", 2, {"n": values})["n"] for s in STUDENTS[:500])
    assert set(drawn) == set(values)
    with pytest.raises(ValueError, match="没有可选的取值"):
        variants.draw("alice", "quiz-x", 2, {"n": []})


@pytest.mark.parametrize("n", [0, 9])
def test_an_impossible_number_of_options_is_refused_in_chinese(n):
    with pytest.raises(ValueError, match="n_options 必须在 1 到 8 之间"):
        variants.order("alice", "quiz-x", 1, n)


def test_shown_and_canonical_letters_are_inverse():
    for s in STUDENTS[:100]:
        perm = variants.order(s, "quiz-x", 1, 5)
        for k in range(1, 6):
            for letters in itertools.combinations("ABCDE", k):
                shown = variants.canonical_to_shown("".join(letters), perm)
                assert variants.shown_to_canonical(shown, perm) == "".join(letters)
    perm = (2, 0, 3, 1)  # shown A is canonical C, shown B canonical A, ...
    assert variants.shown_to_canonical("A", perm) == "C" and variants.canonical_to_shown("C", perm) == "A"
    assert variants.shown_to_canonical("BD", perm) == "AB"


def test_the_student_is_the_pin_then_attnlib_student_then_the_hub_user(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "hubuser")
    assert variants.student_id() == "hubuser"
    monkeypatch.setenv(variants.ENV_STUDENT, "graded")
    assert variants.student_id() == "graded"
    variants.pin("pinned")
    assert variants.student_id() == "pinned" and variants.pinned() == "pinned"
    variants.pin(None)
    assert variants.pinned() is None and variants.student_id() == "graded"
    monkeypatch.setenv(variants.ENV_STUDENT, "")  # empty counts as unset
    assert variants.student_id() == "hubuser"
