"""attnlib.torch.seq2seq (chapter 12): an encoder-decoder whose cached decoding equals decoding the whole prefix."""

from __future__ import annotations

import pytest
import torch

from attnlib import torch as att
from attnlib.torch.seq2seq import TinySeq2Seq


def small(**kwargs) -> TinySeq2Seq:
    settings = {"src_vocab": 7, "tgt_vocab": 9, "d_model": 16, "n_heads": 4, "n_layers": 2,
                "dtype": torch.float64} | kwargs
    return TinySeq2Seq(**settings)


def tokens(*shape, vocab=7, seed=0) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def test_torch_only_and_not_exported():
    """The two backends export the same names; the encoder-decoder has no NumPy twin, so it stays out of __all__."""
    assert "TinySeq2Seq" not in att.__all__ and not hasattr(att, "TinySeq2Seq")
    import attnlib.torch.seq2seq as module

    assert "not exported" in module.__doc__ and "NumPy" in module.__doc__


def test_shapes_and_weights_per_head():
    model = small()
    src, tgt = tokens(2, 3, 5), tokens(2, 3, 4, vocab=9, seed=1)  # two batch dimensions
    memory, enc = model.encode(src, need_weights=True)
    assert memory.shape == (2, 3, 5, 16) and len(enc) == 2 and enc[0].shape == (2, 3, 4, 5, 5)
    logits, w = model.decode(tgt, memory, need_weights=True)
    assert logits.shape == (2, 3, 4, 9)
    assert w["self"][1].shape == (2, 3, 4, 4, 4) and w["cross"][1].shape == (2, 3, 4, 4, 5)
    torch.testing.assert_close(w["cross"][0].sum(-1), torch.ones(2, 3, 4, 4, dtype=torch.float64))
    assert (w["self"][0].triu(1) == 0).all()  # causal self-attention; the cross-attention sees every source word
    d, m = 16, 32
    assert model.n_parameters() == 7 * d + 9 * d + 2 * (4 * d * d + 2 * d * m) + 2 * (8 * d * d + 2 * d * m) + d * 9


def test_the_seed_fixes_the_weights_and_autograd_reaches_every_one():
    src, tgt = tokens(6), tokens(4, vocab=9, seed=1)
    assert torch.equal(small(seed=3).forward(src, tgt), small(seed=3).forward(src, tgt))
    assert not torch.allclose(small(seed=3).forward(src, tgt), small(seed=4).forward(src, tgt))
    model = small()
    model.forward(src, tgt).sum().backward()
    assert all(p.is_leaf and p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("chunks", [[1, 1, 1, 1, 1], [3, 1, 2], [6]])
def test_cached_steps_equal_decoding_the_whole_prefix(chunks):
    model = small()
    src, tgt_in = tokens(2, 5, seed=2), tokens(2, sum(chunks), vocab=9, seed=3)
    memory = model.encode(src)
    full = model.decode(tgt_in, memory)
    caches, start = model.new_caches(memory), 0
    for n in chunks:
        got = model.step(tgt_in[:, start:start + n], caches)
        torch.testing.assert_close(got, full[:, start:start + n], rtol=1e-10, atol=1e-10)
        start += n
    assert caches[0].length == sum(chunks) and caches[1].length == 5


def test_greedy_generation_is_the_same_with_and_without_the_cache():
    model = small(tgt_vocab=30, d_model=32, seed=5)
    src = tokens(3, 6, seed=4)
    cached = model.generate(src, 12)
    assert cached.shape == (3, 12) and torch.equal(cached, model.generate(src, 12, use_cache=False))
    assert model.generate(src, 0).shape == (3, 0)
    # each token is the argmax of the logits of the prefix before it
    tgt_in = torch.cat([torch.zeros(3, 1, dtype=torch.long), cached[:, :-1]], 1)
    assert torch.equal(model.forward(src, tgt_in).argmax(-1), cached)


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda m: m.encode(torch.ones(3)), TypeError, "整数"),
    (lambda m: m.encode(torch.tensor([0, 7])), ValueError, "0 到 6"),
    (lambda m: m.decode(torch.tensor([9]), m.encode(torch.tensor([1]))), ValueError, "0 到 8"),
    (lambda m: m.step(torch.tensor([1]), att.KVCache(2, 4, 4)), TypeError, "KVCache"),
    (lambda m: m.step(torch.tensor([1]), (att.KVCache(2, 2, 8), att.KVCache(2, 2, 8))), ValueError, "形状"),
    (lambda m: m.step(torch.tensor([1]), (m.new_caches(m.encode(torch.tensor([1])))[0],) * 2), ValueError, "空"),
    (lambda m: m.generate(torch.tensor([1]), -1), ValueError, "n_new"),
    (lambda m: TinySeq2Seq(5, 5, d_model=10, n_heads=4), ValueError, "整除"),
    (lambda m: TinySeq2Seq(5, 5, dtype=torch.int64), TypeError, "浮点"),
])
def test_bad_use_is_refused_in_chinese(make, error, match):
    with pytest.raises(error, match=match):
        make(small())


def test_on_every_device(device):
    model = small(device=device)
    src, tgt_in = tokens(5, seed=6).to(device), tokens(4, vocab=9, seed=7).to(device)
    memory = model.encode(src)
    assert memory.device.type == device
    caches = model.new_caches(memory)
    got = torch.cat([model.step(tgt_in[:2], caches), model.step(tgt_in[2:], caches)])
    torch.testing.assert_close(got, model.decode(tgt_in, memory), rtol=1e-10, atol=1e-10)
    assert torch.equal(model.generate(src, 5), model.generate(src, 5, use_cache=False))
