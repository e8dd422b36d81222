"""Chapter 9 (多头注意力): the lesson's claims hold, its self-check is right, its assignment grades as intended.

The lesson's code cells are executed here in one namespace (as the book build
does) and every claim of its prose is asserted on the variables they leave,
including the small model it trains: its accuracy is held against chance and
its heads' specialisation against the single-head model's split weights.
"""

from __future__ import annotations

import inspect

import assignments
import numpy as np
import pytest
import torch
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import assert_draws_without_warnings, code_cells, prose

from attnlib import numpy as anp

ASSIGNMENT = "ch09-multihead"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    assert body.index("{doc}`ch08-masks`") < 100  # opens from chapter 8
    assert "{doc}`ch13-misconceptions`" in body  # untrained heads differ too: misconception 8
    assert "一种常见的说法是" in body  # "keeps the parameter count under control", quoted and then counted


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_split_is_a_reshape_then_a_transpose(chapter):
    x, step2, wrong = chapter["x"], chapter["step2"], chapter["wrong"]
    assert chapter["step1"].shape == (3, 2, 4) and step2.shape == (2, 3, 4)
    assert np.array_equal(step2[0], x[:, :4]) and np.array_equal(step2[1], x[:, 4:])  # "0–3、8–11、16–19"
    assert step2[0][:, 0].tolist() == [0, 8, 16]
    assert wrong[0].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]  # token 0 twice, then token 1
    assert wrong.shape == step2.shape and not np.array_equal(wrong, step2)
    assert not np.array_equal(step2.reshape(3, 8), x)  # merging without the transpose mixes tokens too


@pytest.mark.cjk_font
def test_the_worked_example_and_one_head(chapter):
    assert chapter["Q"].shape == (2, 4, 4) and chapter["head_w"].shape == (2, 4, 4)
    assert chapter["concat"].shape == (4, 8) and chapter["out"].shape == (4, 8)
    assert np.allclose(chapter["mha_out"], chapter["out"])
    gap = np.abs(chapter["head_w"][0] - chapter["head_w"][1]).max()
    assert gap > 0.1  # glued as ch09_head_gap: the two heads differ
    X, w_q, w_k, w_v, w_o = (chapter[n] for n in ("X", "w_q", "w_k", "w_v", "w_o"))
    # each head divides by sqrt(d_head) = 2, not sqrt(d_model)
    _, head0 = anp.scaled_dot_product_attention(X @ w_q[:, :4], X @ w_k[:, :4], X @ w_v[:, :4])
    assert np.allclose(chapter["head_w"][0], head0)
    wrong_scale = anp.softmax((X @ w_q[:, :4]) @ (X @ w_k[:, :4]).T / np.sqrt(8))
    assert not np.allclose(chapter["head_w"][0], wrong_scale)
    assert np.allclose(chapter["one_out"], chapter["single"] @ w_o)


def test_scaling_by_sqrt_d_model_flattens_every_head():
    """The pitfall: dividing a head's scores by sqrt(d_model) instead of sqrt(d_head) raises every row's entropy."""
    rng = np.random.default_rng(92)
    x, w_q, w_k = rng.normal(size=(10, 16)), *rng.normal(scale=0.25, size=(2, 16, 16))
    s = anp.split_heads(x @ w_q, 4) @ anp.split_heads(x @ w_k, 4).swapaxes(-1, -2)  # (4, 10, 10), d_head = 4
    right = anp.weight_entropy(anp.softmax(s / np.sqrt(4)))
    flat = anp.weight_entropy(anp.softmax(s / np.sqrt(16)))
    assert (flat > right).all()


@pytest.mark.cjk_font
def test_parameter_count_does_not_depend_on_the_heads(chapter):
    assert chapter["counts"] == {1: 4 * 512**2, 2: 4 * 512**2, 8: 4 * 512**2, 64: 4 * 512**2}
    assert 4 * 512**2 == 1_048_576
    # "every head of full width": three (512, 8*512) projections and an (8*512, 512) W_O, as the lesson counts
    assert 3 * 512 * (8 * 512) + (8 * 512) * 512 == 8 * 4 * 512**2
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 16))
    w = rng.normal(size=(3, 16, 4 * 16))  # 4 heads of full width 16 run in attnlib
    out, weights = anp.multi_head_attention(x, x, *w, rng.normal(size=(4 * 16, 16)), 4)
    assert out.shape == (3, 16) and weights.shape == (4, 3, 3)
    assert 3 * w[0].size + 4 * 16 * 16 == 4 * 4 * 16**2


@pytest.mark.cjk_font
def test_a_head_is_narrower(chapter):
    assert chapter["ranks"] == [4, 4] and np.linalg.matrix_rank(chapter["whole"]) == 8
    assert chapter["per_head"].shape == (2, 12, 12)


@pytest.mark.cjk_font
def test_head_width_is_a_convention(chapter):
    assert chapter["out6"].shape == (5, 6) and chapter["w6"].shape == (4, 5, 5)
    with pytest.raises(AssertionError):  # torch insists on d_model = h * d_head
        torch.nn.MultiheadAttention(6, 4)


@pytest.mark.cjk_font
def test_torch_weights_are_used_transposed(chapter):
    assert tuple(chapter["mha"].in_proj_weight.shape) == (24, 8)
    assert torch.allclose(chapter["got"], chapter["ref"]) and torch.allclose(chapter["got_w"], chapter["ref_w"])
    assert chapter["ref_w"].shape == (2, 2, 4, 4)  # per head: average_attn_weights=False
    assert (chapter["no_t"] - chapter["ref"]).abs().max() > 0.1


@pytest.mark.cjk_font
def test_two_heads_specialise_and_one_head_splits_its_weights(chapter):
    two, one = chapter["results"][2], chapter["results"][1]
    chance = 1 / chapter["VOCAB"] ** 2
    assert two["acc"] > 0.95 > 30 * chance  # both predictions right, far above guessing
    assert one["acc"] > 0.5  # one head learns the task too ("也达到了"), but...
    prev_head = int(np.argmax(two["prev"]))
    assert two["prev"][prev_head] > 0.8 and two["first"][1 - prev_head] > 0.8  # one relation per head
    assert two["prev"][1 - prev_head] < 0.1 and two["first"][prev_head] < 0.1
    assert 0.3 < one["prev"][0] < 0.7 and 0.3 < one["first"][0] < 0.7  # ...spreads one row over both places


@pytest.mark.cjk_font
def test_another_initialisation_may_swap_the_roles(chapter):
    """The prose: "换一组随机的初始权重，两个头的角色可能对调" (seed 1 does, at the lesson's settings)."""
    model = chapter["train"](2, seed=1)
    with torch.no_grad():
        _, w = model(chapter["x_test"])
    mean_w, later = w.mean(dim=0), chapter["later"]
    prev = mean_w[:, later, later - 1].mean(dim=-1)
    first = mean_w[:, later, 0].mean(dim=-1)
    assert int(prev.argmax()) != int(np.argmax(chapter["results"][2]["prev"]))
    assert prev.max() > 0.8 and first[int(prev.argmin())] > 0.8


@pytest.mark.cjk_font
def test_the_toy_task_needs_both_relations(chapter):
    """The targets really are the previous and the first token, and they differ for most positions i >= 2."""
    x, y = chapter["x_test"], chapter["y_test"]
    assert inspect.signature(chapter["train"]).parameters["steps"].default == 150  # "150 批"
    assert len(x) == 1000  # "1000 条没见过的序列"
    assert "make_batch(gen, 128)" in "\n".join(code_cells(CHAPTER))  # "每批 128 条"
    tokens = x[..., :chapter["VOCAB"]].argmax(dim=-1)
    assert torch.equal(y[..., 0], tokens[:, :-1]) and torch.equal(y[..., 1], tokens[:, :1].expand(-1, 7))
    assert (y[:, 1:, 0] != y[:, 1:, 1]).double().mean() > 0.8


@pytest.mark.cjk_font
def test_heads_figure_draws_three_labelled_panels(chapter):
    fig = chapter["fig"]
    assert_draws_without_warnings(fig)
    titles = [ax.get_title() for ax in fig.axes]
    assert "前一个位置" in titles[0] and "第一个位置" in titles[1] and "1 个头" in titles[2]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == chapter["labels"]


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_parameter_count():
    module = torch.nn.MultiheadAttention(512, 8, bias=False)
    assert sum(p.numel() for p in module.parameters()) == 1_048_576
    options = [int(o["text"].replace(",", "")) for o in questions(ASSIGNMENT)[0]["options"]]
    assert options == [4 * 512**2, 8 * 4 * 512**2, 3 * 512**2, 4 * 512 * 64]
    assert correct(questions(ASSIGNMENT)[0]) == ["1,048,576"]


def test_selfcheck_split_shape():
    x = np.zeros((10, 512))
    assert anp.split_heads(x, 8).shape == (8, 10, 64)
    assert x.reshape(10, 8, 64).shape == (10, 8, 64)  # option A: before the transpose
    assert correct(questions(ASSIGNMENT)[1]) == ["$(8, 10, 64)$"]


def test_selfcheck_statements():
    rng = np.random.default_rng(91)
    x = rng.normal(size=(5, 8))
    w_q, w_k, w_v, w_o = rng.normal(size=(4, 8, 8))
    out, w = anp.multi_head_attention(x, x, w_q, w_k, w_v, w_o, 2)
    q = anp.split_heads(x @ w_q, 2)
    k = anp.split_heads(x @ w_k, 2)
    assert np.allclose(w, anp.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(4)))  # A: sqrt(d_head)
    counts = {h: sum(p.numel() for p in torch.nn.MultiheadAttention(64, h, bias=False).parameters())
              for h in (1, 4, 16)}
    assert len(set(counts.values())) == 1  # B is wrong
    one, _ = anp.multi_head_attention(x, x, w_q, w_k, w_v, w_o, 1)
    single, _ = anp.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    assert np.allclose(one, single @ w_o)  # C
    heads, _ = anp.scaled_dot_product_attention(q, k, anp.split_heads(x @ w_v, 2))
    assert not np.allclose(out, heads.mean(axis=0) @ w_o[:4])  # D: not an average
    assert np.allclose(out, anp.merge_heads(heads) @ w_o)
    assert len(correct(questions(ASSIGNMENT)[2])) == 2


def test_selfcheck_torch_weight_direction():
    torch.manual_seed(9)
    d, h = 6, 2
    mha = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
    x = torch.randn(1, 4, d, dtype=torch.float64)
    W = mha.in_proj_weight.detach()
    with torch.no_grad():
        ref = mha(x, x, x)[0].numpy()

    def ours(w_q):
        out, _ = anp.multi_head_attention(x.numpy(), x.numpy(), w_q.numpy(), W[d:2 * d].T.numpy(),
                                          W[2 * d:].T.numpy(), mha.out_proj.weight.detach().T.numpy(), h)
        return out

    assert np.allclose(ours(W[:d].T), ref)  # B
    for wrong in (W[:d], W[0::3].T, mha.out_proj.weight.detach().T):
        assert not np.allclose(ours(wrong), ref)
    assert correct(questions(ASSIGNMENT)[3]) == ["`in_proj_weight[:d].T`"]


# --------------------------------------------------------------------------- the assignment

NOISY_COUNT = '''
import sys
import warnings


def count_parameters(d_model, n_heads, d_head=None, *, bias=False):
    print("调试：d_model =", d_model, file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    if d_head is None:
        if d_model % n_heads:
            raise ValueError("不能整除")
        d_head = d_model // n_heads
    inner = n_heads * d_head
    return 4 * d_model * inner + (3 * inner + d_model if bias else 0)
'''

DELEGATING_SPLIT = '''
from attnlib import numpy as lib


def split_heads(x, n_heads):
    return lib.split_heads(np.asarray(x), n_heads)


def merge_heads(x):
    return lib.merge_heads(np.asarray(x))
'''


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    no_w_o = assignments.wrong_cells(ASSIGNMENT, "forgot_w_o", "count_without_w_o")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # split and merge handed to attnlib: 0 there, and 0 for the attention that uses them
        "delegating": assignments.with_cells(source, {"split_merge": DELEGATING_SPLIT}),
        # W_O forgotten, in the attention and in the count
        "mixed": assignments.with_cells(source, no_w_o),
        # a right count that prints to stderr and warns
        "noisy": assignments.with_cells(source, {"count_parameters": NOISY_COUNT}),
    }, {
        "delegating": [0, 0, 2],
        # without W_O only the weights match (6 of 12 attention checks) and the count without W_O keeps only the
        # ValueError and the "returns an int" checks (2 of 10): both miss their exercise's point, so the attention
        # is capped at a third of its 4 points, and the count keeps 2/10 of 2 (under its cap)
        "mixed": [2, 4 / 3, 2 * 2 / 10],
        "noisy": [2, 4, 2],
    })  # 8 autograded + the written answer (2, by hand)
