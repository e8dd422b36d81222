"""attnlib's position functions (chapter 15), both backends: sinusoidal codes, RoPE, ALiBi."""

import math

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import to_numpy, to_torch

BACKENDS = ("numpy", "torch")


def lib(name):
    return anp if name == "numpy" else att


def arr(x, backend, device="cpu"):
    return x if backend == "numpy" else to_torch(x, device)


def out(x):
    return x if isinstance(x, np.ndarray) else to_numpy(x)


def rope_by_formula(x, positions, base=10000.0):
    """The rotation written pair by pair, in loops."""
    y = np.array(x, dtype=np.float64)
    d = x.shape[-1]
    for row in range(x.shape[-2]):
        for i in range(d // 2):
            theta = positions[row] * base ** (-2 * i / d)
            a, b = x[..., row, 2 * i], x[..., row, 2 * i + 1]
            y[..., row, 2 * i] = a * math.cos(theta) - b * math.sin(theta)
            y[..., row, 2 * i + 1] = a * math.sin(theta) + b * math.cos(theta)
    return y


# --------------------------------------------------------------------------- sinusoidal codes

@pytest.mark.parametrize("backend", BACKENDS)
def test_sinusoidal_positions_follow_the_formula(backend):
    p = out(lib(backend).sinusoidal_positions(7, 6, start=2, base=100.0))
    assert p.shape == (7, 6) and p.dtype == np.float64
    for row in range(7):
        for i in range(3):
            angle = (2 + row) * 100.0 ** (-2 * i / 6)
            assert p[row, 2 * i] == pytest.approx(math.sin(angle), abs=1e-15)
            assert p[row, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-15)
    whole = out(lib(backend).sinusoidal_positions(9, 6, base=100.0))
    np.testing.assert_allclose(p, whole[2:], atol=1e-15)
    odd = out(lib(backend).sinusoidal_positions(4, 5))
    assert odd.shape == (4, 5)  # an odd width keeps the last pair's sine, at the rate 10000^(-4/5)
    np.testing.assert_allclose(odd[:, 4], np.sin(np.arange(4) * 10000.0 ** (-4 / 5)), atol=1e-15)
    assert out(lib(backend).sinusoidal_positions(0, 4)).shape == (0, 4)


def test_the_backends_agree_on_every_function():
    np.testing.assert_allclose(anp.sinusoidal_positions(50, 16, start=3), to_numpy(att.sinusoidal_positions(
        50, 16, start=3)), atol=1e-14)
    for args in ((4, 4, 8), (3, 7, 5), (6, 2, 12)):
        np.testing.assert_array_equal(anp.alibi_bias(*args), to_numpy(att.alibi_bias(*args)))
    x = np.random.default_rng(0).normal(size=(2, 3, 5, 8))
    np.testing.assert_allclose(anp.apply_rope(x, [4, 5, 6, 7, 8]), to_numpy(att.apply_rope(
        to_torch(x), torch.arange(4, 9))), atol=1e-14)


# --------------------------------------------------------------------------- RoPE

@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_is_the_pairwise_rotation(backend, device="cpu"):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 6))
    got = out(lib(backend).apply_rope(arr(x, backend)))
    np.testing.assert_allclose(got, rope_by_formula(x, range(5)), atol=1e-13)
    pos = [3.0, 10.0, 0.5, 7.0, 100.0]
    got = out(lib(backend).apply_rope(arr(x, backend), arr(np.array(pos), backend), base=50.0))
    np.testing.assert_allclose(got, rope_by_formula(x, pos, base=50.0), atol=1e-12)
    np.testing.assert_array_equal(out(lib(backend).apply_rope(arr(x, backend), [0] * 5)), x)  # position 0: unchanged


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_scores_depend_on_the_offset_only_and_lengths_are_kept(backend):
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(2, 16))
    f = lib(backend).apply_rope

    def score(m, n):
        a = out(f(arr(q[None], backend), [m]))[0]
        b = out(f(arr(k[None], backend), [n]))[0]
        return a @ b

    for offset in (0, 1, 5, -3):
        scores = [score(m + offset, m) for m in (0, 7, 30, 123)]
        np.testing.assert_allclose(scores, scores[0], atol=1e-12)
    x = rng.normal(size=(3, 9, 16))
    np.testing.assert_allclose(np.linalg.norm(out(f(arr(x, backend))), axis=-1), np.linalg.norm(x, axis=-1),
                               rtol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_positions_broadcast_per_sequence(backend):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 4, 3, 8))  # batch 2, 4 heads, 3 tokens
    pos = np.array([[0, 1, 2], [5, 6, 7]])[:, None, :]  # (2, 1, 3): each sequence its own positions
    got = out(lib(backend).apply_rope(arr(x, backend), arr(pos, backend)))
    for b in range(2):
        np.testing.assert_allclose(got[b], out(lib(backend).apply_rope(arr(x[b], backend), arr(pos[b, 0], backend))),
                                   atol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_keeps_float32(backend):
    x = np.random.default_rng(4).normal(size=(6, 8)).astype(np.float32)
    got = lib(backend).apply_rope(arr(x, backend))
    assert out(got).dtype == np.float32
    np.testing.assert_allclose(out(got), rope_by_formula(x.astype(float), range(6)), rtol=1e-5, atol=1e-6)


def test_rope_takes_device_and_dtype_from_x(device):
    x = torch.randn(2, 5, 8, dtype=torch.float32, device=device)
    y = att.apply_rope(x, torch.arange(3, 8, device=device))
    assert y.device.type == device and y.dtype == torch.float32
    torch.testing.assert_close(y.cpu(), att.apply_rope(x.cpu(), torch.arange(3, 8)))


def test_rope_has_gradients():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: att.apply_rope(t, [1.0, 2.0, 9.0]), (x,))


# --------------------------------------------------------------------------- ALiBi

SLOPES = {  # the ALiBi paper's slopes (official code: get_slopes), by head count
    1: [2**-8],
    2: [2**-4, 2**-8],
    4: [2**-2, 2**-4, 2**-6, 2**-8],
    8: [2.0 ** -i for i in range(1, 9)],
    6: [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3],  # 4 heads' slopes, then odd ones of 8 heads'
    12: [2.0 ** -i for i in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("heads", sorted(SLOPES))
def test_alibi_slopes_are_the_papers(backend, heads):
    bias = out(lib(backend).alibi_bias(2, 2, heads))
    assert bias.shape == (heads, 2, 2) and bias.dtype == np.float64
    np.testing.assert_allclose(-bias[:, 1, 0], SLOPES[heads], rtol=1e-15)  # distance 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_alibi_is_bottom_right_aligned_and_finite(backend):
    bias = out(lib(backend).alibi_bias(2, 5, 4))  # queries at positions 3 and 4
    m = np.array(SLOPES[4])[:, None]
    np.testing.assert_allclose(bias[:, 0], -m * [3, 2, 1, 0, 1])  # the future key (4) gets -m·1: finite, <= 0
    np.testing.assert_allclose(bias[:, 1], -m * [4, 3, 2, 1, 0])
    square = out(lib(backend).alibi_bias(5, 5, 4))
    np.testing.assert_array_equal(square[:, -2:], bias)  # a cached step sees the last rows of the full matrix
    assert np.isfinite(square).all() and (square <= 0).all()
    np.testing.assert_array_equal(np.diagonal(square, axis1=1, axis2=2), 0)
    mask = anp.causal_mask(5)
    rows = square[0][mask].reshape(-1)  # under the causal mask: -m·(i - j)
    i, j = np.nonzero(mask)
    np.testing.assert_allclose(rows, -SLOPES[4][0] * (i - j))


def test_alibi_in_attention_favours_near_keys():
    bias = anp.alibi_bias(6, 6, 8)
    q = np.zeros((8, 6, 4))  # equal scores: only the bias decides
    w = anp.softmax(q @ q.swapaxes(-1, -2) + bias, mask=anp.causal_mask(6))
    last = w[:, -1]
    assert (np.diff(last, axis=-1) > 0).all()  # nearer keys weigh more, in every head
    assert (last[:-1, -1] > last[1:, -1]).all()  # steeper slopes (first heads) look nearer


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call, error, words", [
    (lambda L, a: L.apply_rope(a(np.ones((3, 5)))), ValueError, "偶数"),
    (lambda L, a: L.apply_rope(a(np.ones(4))), ValueError, "至少需要 2 维"),
    (lambda L, a: L.apply_rope(a(np.ones((3, 4))), a(np.arange(4))), ValueError, "positions.shape=(4,)"),
    (lambda L, a: L.apply_rope(a(np.ones((3, 4))), a(np.array([0.0, np.nan, 1.0]))), ValueError, "NaN"),
    (lambda L, a: L.apply_rope(a(np.ones((3, 4))), a(np.array([0.0, np.inf, 1.0]))), ValueError, "有限"),
    (lambda L, a: L.apply_rope(a(np.ones((3, 4))), a(np.ones(3, dtype=bool))), TypeError, "positions"),
    (lambda L, a: L.apply_rope(a(np.ones((3, 4), dtype=np.int64))), TypeError, "浮点"),
    (lambda L, a: L.apply_rope(a(np.ones((3, 4))), base=0), ValueError, "base"),
    (lambda L, a: L.alibi_bias(3, 3, 0), ValueError, "n_heads"),
    (lambda L, a: L.alibi_bias(3, -1, 2), ValueError, "n_k"),
    (lambda L, a: L.alibi_bias(3, 3, 2.0), ValueError, "n_heads"),
    (lambda L, a: L.sinusoidal_positions(3, 0), ValueError, "d"),
    (lambda L, a: L.sinusoidal_positions(-1, 4), ValueError, "n"),
    (lambda L, a: L.sinusoidal_positions(3, 4, start=-2), ValueError, "start"),
])
def test_bad_input_is_refused_in_chinese(backend, call, error, words):
    with pytest.raises(error, match=None) as info:
        call(lib(backend), lambda x: arr(x, backend))
    assert words in str(info.value)
