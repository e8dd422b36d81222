"""Grades that measure understanding: the kept solutions in ``grading/wrong/`` and ``grading/right/``.

A kept wrong solution (``grading/wrong/<assignment>/*.py``) names its mistake,
the test cells that must catch it, its class and the words of its diagnosis::

    # wrong: forward accepts mask but never passes it on
    # caught by: test_self_attention
    # severity: essential
    # diagnosis: 输出没有随掩码改变
    # %% self_attention
    ...

* ``essential``: the solution misses the exercise's point.  Each cell it names
  keeps at most a third of its points, with the hidden tests and with the
  visible ones alone (Validate tells the student before hand-in), and the
  diagnosis appears in what those cells print.
* ``edge``: an edge case (input left untouched, error type, validation).  Each
  cell it names loses points, and the diagnosis appears in the graded output.

A kept right solution (``grading/right/<assignment>/*.py``, header
``# right: <its style>``) is a correct answer in another style (loops, einsum,
its own softmax, ...): it keeps full marks, visible and hidden.

The solution notebook itself scores full marks in the same runner, so every
loss is the mistake's doing.
"""

from __future__ import annotations

import pathlib

import pytest
from nbrun import ROOT, execute, grade_id, is_test_cell, read_kept, source_notebook

from attnlib.grading import STRICT_ENV

WRONG = ROOT / "grading" / "wrong"
RIGHT = ROOT / "grading" / "right"
FIXTURES = sorted(WRONG.glob("*/*.py"))
ALTERNATIVES = sorted(RIGHT.glob("*/*.py"))
CHAPTER_ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.name.startswith("ch"))
CAP = 1 / 3
EPS = 1e-9

# Mistakes that miss the whole point of their exercise: they must stay essential.
MUST_BE_ESSENTIAL = {
    "ch06-attention/drops_the_mask", "ch06-attention/no_max_shift", "ch06-attention/fill_minus_1e9",
    "ch06-attention/softmax_over_the_wrong_axis", "ch07-parallel/no_max_shift", "ch08-masks/mask_after_softmax",
    "ch08-masks/inverted_polarity", "ch10-efficiency/tiles_keep_every_block", "ch10-efficiency/window_by_dense_mask",
    "ch11-kv-cache/values_not_appended", "ch11-kv-cache/attend_before_append", "ch11-kv-cache/no_causal_mask",
    "ch15-positions/rope_half_split", "ch15-positions/rope_wrong_frequency",
    "ch15-positions/decode_positions_from_zero", "ch16-gqa/interleaved_groups", "ch16-gqa/bytes_with_query_heads",
    "ch17-mla/rope_on_reconstructed_keys", "ch17-mla/scale_sqrt_d_head", "ch17-mla/bytes_rope_key_per_head",
    "ch17-mla/bytes_per_head_keys_values", "ch17-mla/absorbed_keys_one_head_at_a_time",
    "ch17-mla/absorbed_scale_head_minus_rope", "ch18-backward/plus_delta", "ch18-backward/delta_per_block",
    "ch18-backward/causal_mask_off_by_one", "ch18-backward/causal_mask_kept_whole", "ch17-mla/decode_rope_at_zero",
    "ch17-mla/absorbed_keys_reconstructed", "ch18-backward/no_minus_delta", "ch18-backward/dq_without_scale",
    "ch18-backward/dk_without_scale", "ch18-backward/weights_from_block_max", "ch18-backward/last_query_block_only",
    "ch18-backward/stores_weights", "ch18-backward/causal_skips_diagonal", "ch18-backward/function_saves_weights",
    "ch20-serving/slot_off_by_one", "ch20-serving/blocks_floor", "ch20-serving/blocks_share_partial",
    "ch20-serving/topk_before_mask", "ch20-serving/topk_ties_higher", "ch20-serving/softmax_over_all_visible",
    "ch20-serving/fork_copies_nothing", "ch20-serving/free_ignores_refs", "ch19-delta/no_erase",
    "ch22-sinks/sink_added_to_scores", "ch22-sinks/window_one_short", "ch22-sinks/sinks_dropped",
    "ch22-sinks/original_positions", "ch19-delta/gate_after_write", "ch19-delta/beta_erase_only",
    "ch19-delta/read_before_update", "ch19-delta/keys_not_normalised", "ch19-delta/chunks_from_zero_state",
    "ch20-serving/topk_masked_keeps_k", "ch20-serving/topk_argpartition", "ch20-serving/blocks_copies_not_counted",
    "ch20-serving/fork_shares_table", "ch22-sinks/window_one_long",
    "ch24-speculative/accept_if_p_greater", "ch24-speculative/resample_from_p", "ch24-speculative/siblings_visible",
    "ch24-speculative/positions_flat_index", "ch24-speculative/no_rollback",
    "ch23-kv-compression/keys_per_token", "ch23-kv-compression/whole_tensor_scale", "ch23-kv-compression/levels_2b",
    "ch23-kv-compression/recent_evicted", "ch23-kv-compression/future_keys",
}

pytestmark = pytest.mark.grading


def _points(nb) -> dict[str, float]:
    return {c.metadata.nbgrader.grade_id: float(c.metadata.nbgrader.points) for c in nb.cells if is_test_cell(c)}


def _code_test_cells(nb) -> list[str]:
    """The autograded test cells of ``nb`` (each checks one code exercise)."""
    return [grade_id(c) for c in nb.cells if is_test_cell(c)]


def _ident(path: pathlib.Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _printed(outputs: dict[str, str], cells) -> str:
    return "\n".join(outputs[c] for c in cells)


@pytest.mark.parametrize("assignment", CHAPTER_ASSIGNMENTS)
def test_every_chapter_assignment_keeps_wrong_and_right_solutions(assignment):
    kept = sorted((WRONG / assignment).glob("*.py"))
    assert len(kept) >= 2, f"{assignment}: keep at least two wrong-but-plausible solutions in grading/wrong/"
    assert sorted((RIGHT / assignment).glob("*.py")), (
        f"{assignment}: keep at least one right answer in another style in grading/right/{assignment}/")


@pytest.mark.parametrize("assignment", CHAPTER_ASSIGNMENTS)
def test_every_code_exercise_has_an_essential_wrong_solution(assignment):
    cells = set(_code_test_cells(source_notebook(assignment)))
    covered = set()
    for path in (WRONG / assignment).glob("*.py"):
        kept = read_kept(path)
        if kept.severity == "essential":
            covered |= set(kept.caught_by)
    assert not cells - covered, (f"{assignment}: no essential kept wrong solution for {sorted(cells - covered)}: "
                                 "keep one that misses the exercise's point")


@pytest.mark.parametrize("assignment", CHAPTER_ASSIGNMENTS)
def test_every_code_exercise_names_its_point(assignment):
    """The instructions just before each code exercise's test cell say what it exists to teach (本题要点)."""
    nb = source_notebook(assignment)
    missing = []
    text = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            text = cell.source
        elif is_test_cell(cell) and "本题要点" not in text:
            missing.append(grade_id(cell))
    assert not missing, f"{assignment}: the instructions before {missing} do not name the exercise's point (本题要点)"


def test_the_points_that_must_be_essential_are():
    kept = {_ident(p): read_kept(p).severity for p in FIXTURES}
    assert MUST_BE_ESSENTIAL <= set(kept), sorted(MUST_BE_ESSENTIAL - set(kept))
    assert {k for k in MUST_BE_ESSENTIAL if kept[k] != "essential"} == set()


@pytest.mark.parametrize("assignment", CHAPTER_ASSIGNMENTS)
def test_the_solution_scores_full_marks_and_every_check_tells_its_mistakes_apart(assignment, monkeypatch):
    """The solution earns every point; in strict mode every mistake model of every check (hidden ones included)
    runs on the check's input, and the expected result and the models are pairwise different there, so a hint
    can only name the mistake the student's function behaves as."""
    monkeypatch.setenv(STRICT_ENV, "1")
    nb = source_notebook(assignment)
    scores, printed = execute(nb)
    assert scores == pytest.approx(_points(nb)), "\n".join(printed.values())


@pytest.mark.parametrize("path", FIXTURES, ids=[_ident(p) for p in FIXTURES])
def test_the_kept_wrong_solution_is_caught_and_named(path: pathlib.Path):
    kept = read_kept(path)
    assert kept.severity in ("essential", "edge"), f"{path.name}: needs '# severity: essential' or 'edge'"
    assert kept.diagnosis, f"{path.name}: needs '# diagnosis: <the Chinese words its hint must contain>'"
    nb = source_notebook(path.parent.name)
    points = _points(nb)
    assert set(kept.caught_by) <= set(points), f"{path.name}: unknown test cells {set(kept.caught_by) - set(points)}"
    full, full_out = execute(nb, replace=kept.cells)
    visible, visible_out = execute(nb, replace=kept.cells, hidden=False)
    shares = {c: round(full[c] / points[c], 3) for c in kept.caught_by}
    seen = f"with hidden tests {full}, visible tests alone {visible}"
    if kept.severity == "essential":
        over = {c: s for c, s in shares.items() if s > CAP + EPS}
        assert not over, f"{path.name} ({kept.what}) keeps more than a third of {over}; {seen}"
        unseen = {c: visible[c] for c in kept.caught_by if visible[c] > points[c] * CAP + EPS}
        assert not unseen, (f"{path.name} ({kept.what}): no essential visible check catches it in {sorted(unseen)}, "
                            f"so Validate does not tell the student; {seen}")
        printed = _printed(visible_out, kept.caught_by)
        assert kept.diagnosis in printed, (f"{path.name}: Validate's output does not name the mistake "
                                           f"({kept.diagnosis!r}):\n{printed}")
    else:
        missed = {c: s for c, s in shares.items() if s >= 1 - EPS}
        assert not missed, f"{path.name} ({kept.what}) is not caught by {sorted(missed)}; {seen}"
    printed = _printed(full_out, kept.caught_by)
    assert kept.diagnosis in printed, (f"{path.name}: the feedback does not name the mistake "
                                       f"({kept.diagnosis!r}):\n{printed}")


@pytest.mark.parametrize("path", ALTERNATIVES, ids=[_ident(p) for p in ALTERNATIVES])
def test_a_right_answer_in_another_style_keeps_full_marks(path: pathlib.Path):
    kept = read_kept(path)
    assert not kept.caught_by, f"{path.name}: a right answer starts with '# right: <its style>'"
    nb = source_notebook(path.parent.name)
    for hidden in (True, False):
        scores, printed = execute(nb, replace=kept.cells, hidden=hidden)
        lost = {c: s for c, s in scores.items() if s < _points(nb)[c] - EPS}
        assert not lost, (f"{path.name} ({kept.what}) loses points ({'hidden' if hidden else 'visible'} tests): "
                          f"{lost}\n{_printed(printed, lost)}")
