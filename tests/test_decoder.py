"""attnlib.torch.decoder (chapter 11): a small decoder whose cached decoding equals running it on the whole prefix."""

from __future__ import annotations

import math

import pytest
import torch

from attnlib import torch as att
from attnlib.torch.decoder import TinyDecoder
from attnlib.torch.positions import sinusoidal_positions


def small(**kwargs) -> TinyDecoder:
    settings = {"vocab_size": 11, "d_model": 16, "n_heads": 4, "n_layers": 3, "dtype": torch.float64} | kwargs
    return TinyDecoder(**settings)


def tokens(*shape, vocab=11, seed=0) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def test_torch_only_and_not_exported():
    """The two backends export the same names; the decoder has no NumPy twin, so it stays out of __all__."""
    assert "TinyDecoder" not in att.__all__ and not hasattr(att, "TinyDecoder")
    import attnlib.torch.decoder as module

    assert "not exported" in module.__doc__ and "NumPy" in module.__doc__


def test_shapes_and_parameter_count():
    model = small(d_mlp=24)
    x = tokens(2, 5, 7)  # two batch dimensions
    assert model.forward(x).shape == (2, 5, 7, 11)
    kvs = model.keys_values(x)
    assert len(kvs) == 3 and all(k.shape == v.shape == (2, 5, 4, 7, 4) for k, v in kvs)
    d, m, vocab, layers = 16, 24, 11, 3
    assert model.n_parameters() == vocab * d + layers * (4 * d * d + 2 * d * m) + d * vocab
    assert TinyDecoder().n_parameters() == 256 * 128 * 2 + 2 * (4 * 128**2 + 2 * 128 * 512)  # the chapter's model


def test_the_seed_fixes_the_weights():
    x = tokens(6)
    assert torch.equal(small(seed=3).forward(x), small(seed=3).forward(x))
    assert not torch.allclose(small(seed=3).forward(x), small(seed=4).forward(x))


@pytest.mark.parametrize("chunks", [[5, 1, 1, 1, 1], [1, 1, 1], [3, 4, 1, 2], [9]])
def test_cached_steps_equal_the_whole_sequence_at_every_step(chunks):
    """Prefill (any number of tokens), then steps of any size: each step's logits equal forward's at those positions."""
    model = small()
    seq = tokens(2, sum(chunks), seed=1)
    full = model.forward(seq)
    cache, start = model.new_cache(capacity=2), 0  # tiny capacity: the buffers grow on the way
    for n in chunks:
        got = model.step(seq[:, start:start + n], cache)
        torch.testing.assert_close(got, full[:, start:start + n], rtol=1e-10, atol=1e-10)
        start += n
    assert cache.length == sum(chunks)


def test_float32_agrees_within_rounding():
    model = small(dtype=torch.float32, d_model=32)
    seq = tokens(40, seed=2)
    cache = model.new_cache()
    stepped = torch.cat([model.step(seq[:8], cache)] + [model.step(seq[i:i + 1], cache) for i in range(8, 40)])
    assert (stepped - model.forward(seq)).abs().max() < 1e-4


def test_greedy_generation_is_the_same_with_and_without_the_cache():
    model = small(vocab_size=50, d_model=32, seed=5)
    prompt = tokens(2, 4, vocab=50, seed=3)
    cached = model.generate(prompt, 30)
    assert cached.shape == (2, 34) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, model.generate(prompt, 30, use_cache=False))
    assert torch.equal(model.generate(prompt, 0), prompt)
    # each generated token is the argmax of the logits of the sequence before it
    logits = model.forward(cached[:, :-1])
    assert torch.equal(logits[:, 3:].argmax(dim=-1), cached[:, 4:])


def test_earlier_keys_and_values_do_not_change_when_a_token_is_appended():
    """Causal: every layer's keys and values of positions 0..t-1 are the same for t and t+1 tokens.

    Without the causal mask only the first layer's stay (they depend on the token and its position alone).
    """
    model = small()
    seq = tokens(9, seed=4)
    short, longer = model.keys_values(seq[:8]), model.keys_values(seq)
    for (k, v), (k2, v2) in zip(short, longer, strict=True):
        torch.testing.assert_close(k2[..., :8, :], k, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(v2[..., :8, :], v, rtol=1e-12, atol=1e-12)
    short, longer = model.keys_values(seq[:8], causal=False), model.keys_values(seq, causal=False)
    torch.testing.assert_close(longer[0][0][..., :8, :], short[0][0], rtol=1e-12, atol=1e-12)
    for (k, v), (k2, v2) in zip(short[1:], longer[1:], strict=True):
        assert (k2[..., :8, :] - k).abs().max() > 1e-3 and (v2[..., :8, :] - v).abs().max() > 1e-3


def test_score_count_is_queries_times_keys():
    model = small()
    seq = tokens(2, 10, seed=6)
    model.forward(seq)
    assert model.score_count == 3 * 2 * 4 * 10 * 10  # layers x batch x heads x n_q x n_k
    model.score_count = 0
    cache = model.new_cache()
    model.step(seq[:, :6], cache)
    assert model.score_count == 3 * 2 * 4 * 6 * 6
    model.score_count = 0
    model.step(seq[:, 6:7], cache)
    assert model.score_count == 3 * 2 * 4 * 1 * 7  # one query, every cached key


def test_a_step_takes_the_next_position():
    """The new token's position is cache.length: the same token decoded as if at position 0 gives other logits."""
    model = small()
    seq = tokens(7, seed=7)
    cache = model.new_cache()
    model.step(seq[:6], cache)
    at_six = model.step(seq[6:], cache)
    at_zero = model.step(seq[6:], model.new_cache())
    assert (at_six - at_zero).abs().max() > 1e-3


def test_sinusoidal_positions():
    """The decoder's codes come from attnlib.torch.positions (float64, converted by the model)."""
    p = sinusoidal_positions(8, 6)
    assert p.shape == (8, 6) and p.dtype == torch.float64
    assert torch.equal(p[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0], dtype=torch.float64))
    assert math.isclose(p[3, 2], math.sin(3 / 10000 ** (2 / 6)))
    torch.testing.assert_close(sinusoidal_positions(3, 6, start=5), p[5:])
    assert sinusoidal_positions(2, 5).shape == (2, 5)  # an odd width drops the last cosine
    model = small(d_model=8, n_heads=2, n_layers=1)
    assert model._table.dtype == model.dtype
    torch.testing.assert_close(model._table, sinusoidal_positions(64, 8).to(model.dtype))


def test_positions_beyond_the_first_table():
    """The position table grows on demand: a long sequence decodes as it runs."""
    model = small(d_model=8, n_heads=2, n_layers=1)
    seq = tokens(150, seed=8)
    cache = model.new_cache()
    model.step(seq[:140], cache)
    torch.testing.assert_close(model.step(seq[140:], cache), model.forward(seq)[140:], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda m: m.forward(torch.ones(3)), TypeError, "整数"),
    (lambda m: m.forward(torch.tensor([0, 11])), ValueError, "0 到 10"),
    (lambda m: m.forward(torch.tensor([-1, 2])), ValueError, "0 到 10"),
    (lambda m: m.forward(torch.zeros(2, 0, dtype=torch.int64)), ValueError, "n >= 1"),
    (lambda m: m.step(torch.tensor([1]), att.KVCache(2, 4, 4)), ValueError, "缓存的形状"),
    (lambda m: m.step(torch.tensor([1]), object()), TypeError, "KVCache"),
    (lambda m: m.generate(torch.tensor([1]), -1), ValueError, "n_new"),
    (lambda m: TinyDecoder(d_model=10, n_heads=4), ValueError, "整除"),
    (lambda m: TinyDecoder(dtype=torch.int64), TypeError, "浮点"),
])
def test_bad_use_is_refused_in_chinese(make, error, match):
    with pytest.raises(error, match=match):
        make(small())


def test_on_every_device(device):
    model = small(device=device)
    seq = tokens(6, seed=9).to(device)
    assert model.forward(seq).device.type == device
    cache = model.new_cache()
    got = torch.cat([model.step(seq[:3], cache), model.step(seq[3:], cache)])
    torch.testing.assert_close(got, model.forward(seq), rtol=1e-10, atol=1e-10)
