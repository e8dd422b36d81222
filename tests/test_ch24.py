"""Chapter 24 (推测解码与树形注意力): the lesson's claims hold, the self-check is right, the assignment grades.

What the lesson's cells leave shows, on SmolLM2-135M-Instruct answering one chat question (32 new tokens, greedy,
one thread): verifying k drafts in one cached step gives the logits of a full forward; the acceptance rule
min(1, p/q) with the residual max(0, p - q) leaves p unchanged (an exact computation over five tokens and a
sampling test; resampling from p misses it); an early exit of the first L layers agrees with the target at few
positions until the last layers; greedy speculative decoding with the first 28 layers reproduces the target's
greedy tokens, and its rounds are the ones its agreement predicts; on this machine it is slower, with a draft step
close to a target step; a flattened tree verified in one step equals each branch verified alone, positions from the
flattened index do not, and the accepted path (not contiguous) is gathered into the cache.  The self-check's facts
are checked with attnlib, and the assignment, which needs no model, is generated, submitted and autograded.
"""

from __future__ import annotations

import re

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp
from grading import runner

ASSIGNMENT = "ch24-speculative"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapters_11_and_21_and_cites_the_papers():
    body = prose(CHAPTER)
    opening = body[:body.index("## 起草，然后一次验证")]
    for doc in ("ch11-kv-cache", "ch21-real-model"):
        assert f"{{doc}}`{doc}`" in opening, doc
    assert "Leviathan 等，2023" in opening and "Chen 等，2023" in opening
    tree = section(body, "树形注意力：一次验证几条续写")
    assert "Miao 等，2023" in tree and "Cai 等，2024" in tree
    assert "Elhoushi 等，2024" in section(body, "同一个模型的前几层当草稿")
    assert "ch23" not in opening  # chapter 23 is referred to only generally


def test_the_conditions_of_every_measurement_are_stated():
    body, source = prose(CHAPTER), _source()
    assert "torch.set_num_threads(1)" in source and "N = 32" in source
    assert "{glue:text}`ch24_cpus` 个 CPU 核的本机上用一个线程" in body
    assert "seed" not in body.lower() and "种子" not in body
    assert "optim" not in source and "backward" not in source  # nothing is trained


# --------------------------------------------------------------------------- the lesson's claims

def test_one_verification_step_gives_the_logits_of_a_full_forward(chapter):
    g = chapter["glued"]
    assert g["ch24_verify_diff"] < 1e-3  # float32; a changed token moves logits by units
    n = g["ch24_first_n"]
    assert chapter["drafts"][:n] + [chapter["best"][n]] == chapter["ref"][:n + 1]
    assert chapter["cache"].length == len(chapter["prompt"]) + n
    assert g["ch24_first_kept"].startswith("一个也没有猜对") == (n == 0)


def test_the_acceptance_rule_keeps_the_target_distribution(chapter):
    g = chapter["glued"]
    assert chapter["exact_err"] < 1e-13 and g["ch24_exact"].startswith("与 $p$")
    assert g["ch24_sample_err"] < g["ch24_tol"] < g["ch24_wrong_gap"] / 4


@pytest.mark.cjk_font
def test_an_early_exit_agrees_only_near_the_last_layers_and_greedy_output_is_unchanged(chapter):
    g, agree = chapter["glued"], chapter["agree"]
    assert agree[16] <= 0.1 and agree[24] < 0.25  # "也只有"
    assert agree[28] > 0.5 and g["ch24_draft_layers"] == 28
    assert chapter["new"] == chapter["ref"]
    assert 2 <= g["ch24_per_step"] < 3  # the self-check: "两个多词元"
    assert g["ch24_per_step_8"] < 3
    fig = chapter["accept_fig"]
    assert_draws_without_warnings(fig)
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == ["每轮起草的词元数 k"] * 2


def test_the_timing_sentences_are_the_ones_the_measurements_pick(chapter):
    g = chapter["glued"]
    slower = g["ch24_spec_ms"] >= g["ch24_plain_ms"]
    assert g["ch24_faster"] == ("反而比普通贪心慢" if slower else "比普通贪心快")
    assert g["ch24_verify_ratio"] < g["ch24_k1"]  # the self-check: "远不到 5 倍"
    assert g["ch24_draft_ratio"] > 0.5  # "接近目标的一步"
    # a one-layer draft isolates what no draft sheds (embedding, norm, read-out, the call): "只占一小份" or not
    assert g["ch24_one_ratio"] < g["ch24_draft_ratio"]
    assert g["ch24_where"].startswith("只占一小份") == (g["ch24_one_ratio"] < 0.25)


@pytest.mark.cjk_font
def test_a_tree_verified_at_once_equals_each_branch_and_the_path_is_gathered(chapter):
    g = chapter["glued"]
    assert g["ch24_tree_diff"] < 1e-3 < 1 < g["ch24_flat_diff"]
    assert chapter["path"][:2] == [0, 4] and g["ch24_path"] >= 1
    assert chapter["tree"].length == chapter["start"] + len(chapter["path"])
    assert_draws_without_warnings(chapter["tree_fig"])


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_facts():
    asked = questions(ASSIGNMENT)
    # 1: drafts 0, 1 equal their rows, 2 does not, 3 does: 2 accepted + the target's token; keep c + 1 + 2
    same = [True, True, False, True]
    n = next(i for i, s in enumerate(same) if not s)
    assert (n + 1, 1 + n) == (3, 3) and correct(asked[0]) == ["3 个新词元，回滚到 $c + 3$"]
    # 2: the exact distributions of the three rules on a small example
    p, q = np.array([[2, 3, 1, 1, 1], [1, 1, 1, 1, 4]]) / 8, np.array([[4, 1, 2, 0, 1]]) / 8
    out = np.zeros(5)
    for d in range(5):
        if q[0, d]:
            a = min(1, p[0, d] / q[0, d])
            out += q[0, d] * (a * np.eye(5)[d] + (1 - a) * anp.residual_distribution(p[0], q[0]))
    assert np.allclose(out, p[0]) and "max(0, p - q)" in correct(asked[1])[0]
    # 3: the mask and positions of [-1, 0, 0, 1, 2] after 10 cached tokens
    m = anp.tree_mask([-1, 0, 0, 1, 2])
    assert np.flatnonzero(m[3]).tolist() == [0, 1, 3] and not m[4, 3]
    assert anp.tree_positions([-1, 0, 0, 1, 2], 10).tolist() == [10, 11, 11, 12, 12]
    assert [o["text"][:4] for o in asked[2]["options"] if o.get("correct")] == ["节点 3", "节点的位"]


def test_selfcheck_the_draft_is_almost_as_costly(chapter):
    g = chapter["glued"]
    assert g["ch24_draft_layers"] == 28 and g["ch24_k"] == 4 and g["ch24_faster"] == "反而比普通贪心慢"
    assert correct(questions(ASSIGNMENT)[3])[0].startswith("草稿的一步几乎和目标的一步一样贵")


# --------------------------------------------------------------------------- the assignment

def test_the_exercises_need_no_model():
    """Grading runs where the model may be missing (a class hub, kernels run as nobody): no cell loads it."""
    from nbrun import source_notebook

    text = "\n".join(c.source for c in source_notebook(ASSIGNMENT).cells if c.cell_type == "code")
    assert "pretrained" not in text and "load_smollm2" not in text and "LlamaModel" not in text


DELEGATING = {
    "accept_step": "def accept_step(p, q, draft, u):\n"
                   "    return anp.accept_drafts(p, q, draft, u)\n",
    "tree_mask_and_positions": "def tree_mask_and_positions(parents, start):\n"
                               "    return anp.tree_mask(parents), anp.tree_positions(parents, start)\n",
    "verify_step": "def verify_step(target, cache, last, drafts):\n"
                   "    new, _ = anp.speculative_generate(target, target, [last], 1, len(drafts))\n"
                   "    return new, cache.length\n",
}


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "resample_from_p", "positions_flat_index", "no_rollback")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's acceptance step, tree mask and generation loop behind the student's names score 0
        "delegating": assignments.with_cells(source, DELEGATING),
        "mixed": assignments.with_cells(source, mixed),
        # right, but every call prints to stderr, warns and writes to fd 2: nbgrader zeroes a test cell with any
        # stderr, so the test cells run the student's code only through checks.call
        "noisy": runner.sheet(source, "noisy"),
    }, {
        "delegating": [0, 0, 0],
        # each misses its exercise's point: a failed essential check caps its cell at a third (resampling from p
        # passes 3 of its 10 checks: 0.9, below the cap of 1)
        "mixed": [0.9, 1, 1],
        "noisy": [3, 3, 3],
    })  # 9 autograded + the written answer (2, by hand)


def test_a_hint_names_only_what_the_function_did():
    """Resampling from p is named where the step's result equals that model; the exact-distribution check names
    it too.  The tree mask with siblings visible is named on the mask check, and nothing on the positions check."""
    from lessons import ROOT
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    printed = {}
    for name, cell in (("resample_from_p", "test_accept_step"), ("siblings_visible", "test_tree_mask")):
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        _, out = execute(nb, replace=kept.cells, hidden=False)
        printed[name] = out[cell]
    first = re.search(r"✗ 【要点】k = 1.*?(?=\n[✓✗])", printed["resample_from_p"], re.S).group(0)
    assert "被拒绝以后从 p 重新抽取" in first
    mask = re.search(r"✗ 【要点】7 个节点的树.*?(?=\n[✓✗])", printed["siblings_visible"], re.S).group(0)
    assert "兄弟节点" in mask
    assert "✓ 【要点】同一棵树、start = 5：位置" in printed["siblings_visible"]
