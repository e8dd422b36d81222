"""attnlib.{numpy,torch}.speculative (chapter 24): the acceptance rule, tree attention, the draft-verify loop.

The acceptance rule is checked exactly: with the acceptance probability min(1, p/q) read off the function
(it accepts a draft iff ``u < p/q``) and the residual it returns, the first token's distribution is computed
over a small vocabulary and equals the target's ``p`` to float64 rounding (1e-15), while the two usual slips
(accepting iff p > q, resampling from p) miss it by more than 1e-3.  A sampling test draws through the whole
loop on a tiny random model; its tolerance is five standard deviations of the empirical frequencies, and the
slips' exact distributions lie further away than that.  The loop, tree verification and the cache's
rollback run on a tiny random LlamaModel in float64, where the two backends agree to 1e-10 and a wrong
mask or position moves logits by more than 1e-3.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import pretrained
from attnlib import torch as att
from attnlib.numpy import llama as nl
from attnlib.torch import llama as tl

CHINESE = re.compile(r"[\u4e00-\u9fff]")
TINY = {"n_layers": 3, "d_model": 16, "n_heads": 4, "n_kv_heads": 2, "d_head": 4, "d_ff": 24, "vocab_size": 8,
        "rope_base": 100.0, "norm_eps": 1e-6}


def tiny_weights(seed=0, scale=0.5):
    gen = np.random.default_rng(seed)
    out = {}
    for name, shape in pretrained.weight_shapes(TINY).items():
        out[name] = 1.0 + 0.1 * gen.standard_normal(shape) if len(shape) == 1 else scale * gen.standard_normal(shape)
    return out


@pytest.fixture(scope="module")
def models():
    w = tiny_weights()
    tensors = {n: torch.from_numpy(a) for n, a in w.items()}
    return {"numpy": nl.LlamaModel(TINY, w), "torch": tl.LlamaModel(TINY, tensors)}


def lib(backend):
    return anp if backend == "numpy" else att


def as_numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def distributions(gen, rows, vocab):
    x = gen.gamma(0.7, size=(rows, vocab))
    return x / x.sum(-1, keepdims=True)


# --------------------------------------------------------------------------- the acceptance rule

def first_token_distribution(p, q, accept=None, resample=None):
    """The exact distribution of the first output token for k = 1: draft d ~ q, accepted with probability
    ``accept(d)``, otherwise the token is drawn from ``resample``."""
    out = np.zeros_like(p[0])
    for d, qd in enumerate(q[0]):
        if qd == 0:
            continue
        a = accept(d)
        out[d] += qd * a
        out += qd * (1 - a) * resample
    return out


def acceptance_from_the_function(p, q, d):
    """min(1, p/q) recovered from the function alone: it accepts iff u < that number."""
    a = min(1.0, p[0, d] / q[0, d])
    below, above = np.nextafter(a, 0) * (1 - 1e-12), min(a * (1 + 1e-12), np.nextafter(1.0, 0))
    assert anp.accept_drafts(p, q, [d], [below])[0] == 1
    if a < 1:
        assert anp.accept_drafts(p, q, [d], [above])[0] == 0
    return a


@pytest.mark.parametrize("vocab", [2, 5, 9])
def test_the_acceptance_rule_leaves_the_target_distribution_unchanged_exactly(vocab):
    gen = np.random.default_rng(vocab)
    for _ in range(20):
        p, q = distributions(gen, 2, vocab), distributions(gen, 1, vocab)
        residual = anp.residual_distribution(p[0], q[0])
        rejected = [d for d in range(vocab) if p[0, d] < q[0, d]]  # some draft can be rejected: the function's
        assert np.array_equal(anp.accept_drafts(p, q, [rejected[0]], [np.nextafter(1.0, 0)])[1], residual)
        out = first_token_distribution(p, q, lambda d, p=p, q=q: acceptance_from_the_function(p, q, d), residual)
        np.testing.assert_allclose(out, p[0], atol=1e-14)
        # the slips: accept iff p > q, or resample from p
        greedy = first_token_distribution(p, q, lambda d, p=p, q=q: float(p[0, d] > q[0, d]), residual)
        from_p = first_token_distribution(p, q, lambda d, p=p, q=q: min(1, p[0, d] / q[0, d]), p[0])
        assert np.abs(from_p - p[0]).max() > 1e-3 and np.abs(greedy - p[0]).max() > 1e-3


def test_all_accepted_draws_from_the_last_row_and_a_rejection_from_the_residual():
    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    q = np.array([[0.25, 0.25, 0.5], [0.6, 0.2, 0.2]])
    n, dist = anp.accept_drafts(p, q, [0, 1], [0.9, 0.1])  # p/q = 2, 1.5: both accepted
    assert n == 2 and np.array_equal(dist, p[2])
    n, dist = anp.accept_drafts(p, q, [0, 0], [0.9, 0.5])  # the second: p/q = 1/3 < 0.5, rejected
    assert n == 1 and np.allclose(dist, [0, 0.1 / 0.4, 0.3 / 0.4])
    assert np.allclose(anp.residual_distribution(p[0], p[0]), p[0])  # nothing left: p itself


def test_the_loop_samples_the_target_distribution():
    """speculative_generate(rng=...) on the tiny model: the first two tokens' joint frequencies over 1,500 runs
    match the target's exact joint distribution within five standard deviations."""
    w = tiny_weights()
    target = nl.LlamaModel(TINY, w)
    draft = nl.LlamaModel(TINY, tiny_weights(seed=1))  # another model: a poor draft, many rejections
    prompt = [1, 2, 3]
    p1 = anp.softmax(target.forward(prompt)[-1])
    exact = np.stack([p1[a] * anp.softmax(target.forward(prompt + [a])[-1]) for a in range(8)])  # (8, 8)
    runs, gen = 1500, np.random.default_rng(0)
    counts = np.zeros((8, 8))
    accepted = 0
    for _ in range(runs):
        new, acc = anp.speculative_generate(target, draft, prompt, 2, 2, rng=gen)
        counts[new[0], new[1]] += 1
        accepted += acc[0]
    freq = counts / runs
    tolerance = 5 * np.sqrt(exact * (1 - exact) / runs) + 1e-3
    assert np.all(np.abs(freq - exact) <= tolerance)
    assert 0 < accepted < 2 * runs  # both acceptance and rejection happened
    # the draft's own distribution (what sampling from q alone would give) lies outside the tolerance
    q1 = anp.softmax(draft.forward(prompt)[-1])
    assert np.abs(q1 - p1).max() > 5 * tolerance.max()


# --------------------------------------------------------------------------- trees

def test_the_tree_mask_holds_each_node_s_ancestors_and_the_positions_its_depth():
    parents = [-1, 0, 0, 1, 1, 2, -1]
    m = anp.tree_mask(parents)
    assert m.dtype == bool and np.array_equal(m, np.tril(m))  # lower triangular
    assert m[3].tolist() == [True, True, False, True, False, False, False]  # itself, parent 1, root 0
    assert not m[2, 1] and not m[4, 3] and not m[6, :6].any()  # siblings and other trees are hidden
    assert np.array_equal(anp.tree_mask([-1, 0, 1, 2]), np.tril(np.ones((4, 4), dtype=bool)))  # a chain: causal
    assert anp.tree_positions(parents, 10).tolist() == [10, 11, 11, 12, 12, 12, 10]
    for backend in ("numpy", "torch"):
        assert np.array_equal(as_numpy(lib(backend).tree_mask(parents)), m)
        assert as_numpy(lib(backend).tree_positions(parents, 10)).tolist() == [10, 11, 11, 12, 12, 12, 10]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_verifying_a_tree_equals_verifying_each_branch_alone_and_the_cache_keeps_the_path(models, backend):
    model, L = models[backend], lib(backend)
    prefix = [1, 5, 2, 7]
    tokens, parents = [3, 4, 6, 0, 2, 5], [-1, 0, 0, 1, 1, 2]
    cache = model.new_cache()
    with torch.no_grad():
        model.step(prefix, cache)
        logits = as_numpy(L.verify_tree(model, cache, tokens, parents))
        for node in range(len(parents)):
            branch = [node]
            while parents[branch[0]] >= 0:
                branch.insert(0, parents[branch[0]])
            alone = as_numpy(model.forward(prefix + [tokens[i] for i in branch]))[-1]
            np.testing.assert_allclose(logits[node], alone, atol=1e-10)
        # the positions from the flattened index instead of the depth move the logits
        wrong = model.new_cache()
        model.step(prefix, wrong)
        mask = np.concatenate([np.ones((6, 4), dtype=bool), anp.tree_mask(parents)], 1)
        moved = as_numpy(model.step(tokens, wrong, mask=torch.from_numpy(mask) if backend == "torch" else mask))
        assert np.abs(moved[3:] - logits[3:]).max() > 1e-3
        # keep the path 0 -> 1 -> 4 (not contiguous): the cache equals running the path after the prefix
        L.gather_path(cache, 4, [0, 1, 4])
        assert cache.length == 7
        again = model.new_cache()
        model.step(prefix + [tokens[0], tokens[1], tokens[4]], again)
        for layer in range(model.n_layers):
            for got, want in zip(cache.read(layer), again.read(layer), strict=True):
                np.testing.assert_allclose(as_numpy(got), as_numpy(want), atol=1e-10)
        nxt = as_numpy(model.step([3], cache))[-1]
        np.testing.assert_allclose(nxt, as_numpy(model.forward(prefix + [3, 4, 2, 3]))[-1], atol=1e-10)


# --------------------------------------------------------------------------- the loop

@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_greedy_speculative_decoding_gives_the_target_s_greedy_tokens(models, backend):
    model, L = models[backend], lib(backend)
    prompt = [1, 2, 3, 4]
    want = model.generate(prompt, 12)
    poor = L.early_exit(model, 1)
    for draft, k in ((poor, 1), (poor, 3), (L.early_exit(model, 3), 4)):
        new, accepted = L.speculative_generate(model, draft, prompt, 12, k)
        assert new == want
        assert len(accepted) <= 12 and all(0 <= a <= k for a in accepted)
    _, accepted = L.speculative_generate(model, L.early_exit(model, 3), prompt, 12, 4)
    assert accepted[:2] == [4, 4]  # the whole model as its own draft: every draft accepted
    assert L.speculative_generate(model, poor, prompt, 0, 2) == ([], [])


def test_the_backends_agree(models):
    gen = np.random.default_rng(3)
    p, q = distributions(gen, 4, 6), distributions(gen, 3, 6)
    for u in ([0.1, 0.2, 0.3], [0.99, 0.5, 0.5], [0.0, 0.999, 0.2]):
        n_np, d_np = anp.accept_drafts(p, q, [1, 2, 3], u)
        n_t, d_t = att.accept_drafts(torch.from_numpy(p), torch.from_numpy(q), [1, 2, 3], u)
        assert n_np == n_t and np.allclose(as_numpy(d_t), d_np, atol=1e-15)
    flipped = p[::-1].copy()
    got = att.residual_distribution(torch.from_numpy(p), torch.from_numpy(flipped))
    np.testing.assert_allclose(as_numpy(got), anp.residual_distribution(p, flipped), atol=1e-15)
    a = anp.speculative_generate(models["numpy"], anp.early_exit(models["numpy"], 2), [1, 2], 6, 3,
                                 rng=np.random.default_rng(5))
    b = att.speculative_generate(models["torch"], att.early_exit(models["torch"], 2), [1, 2], 6, 3,
                                 rng=np.random.default_rng(5))
    assert a == b


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_bad_input_is_refused_in_chinese(models, backend):
    L, model = lib(backend), models[backend]
    p, q = np.full((2, 3), 1 / 3), np.full((1, 3), 1 / 3)
    cases = [
        lambda: L.tree_mask([0]),  # a node its own parent
        lambda: L.tree_mask([-1, 2, 0]),  # a parent after its child
        lambda: L.tree_mask([]),
        lambda: L.tree_positions([-1, 0], -1),
        lambda: L.accept_drafts(p, q, [3], [0.5]),  # token outside the vocabulary
        lambda: L.accept_drafts(p, q, [0], [1.0]),  # u not in [0, 1)
        lambda: L.accept_drafts(p, p, [0], [0.5]),  # p must have one more row
        lambda: L.accept_drafts(p * 2, q, [0], [0.5]),  # not a distribution
        lambda: L.accept_drafts(p, np.array([[0.0, 0.5, 0.5]]), [0], [0.5]),  # a draft q could not give
        lambda: L.early_exit(model, 4),
        lambda: L.speculative_generate(model, model, [1], 3, 0),
        lambda: L.verify_tree(model, model.new_cache(), [1, 2], [-1]),
    ]
    for case in cases:
        with pytest.raises((ValueError, TypeError)) as err:
            case()
        assert CHINESE.search(str(err.value)), str(err.value)
    cache = model.new_cache()
    model.step([1, 2, 3], cache)
    for bad in (lambda: L.gather_path(cache, 4, [0]), lambda: L.gather_path(cache, 1, [2]),
                lambda: L.gather_path(cache, 1, [0, 0])):
        with pytest.raises(ValueError, match="[\u4e00-\u9fff]"):
            bad()
