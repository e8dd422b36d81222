"""The tiled backward pass of attention (chapter 18): gradients recomputed block by block from lse and D.

``flash_attention_backward`` (NumPy, and its torch twin) and the torch
``autograd.Function`` behind ``att.flash_attention`` must give the gradients
that autograd gets through the formula ``softmax(q k^T / sqrt(d)) v``, for any
block size, with masks, causality and fully masked rows, while holding one
block of scores at a time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import flash
from attnlib.torch import flash as torch_flash
from conftest import peak_bytes, to_numpy, to_torch

CLOSE = {"rtol": 1e-10, "atol": 1e-11}


def naive(q, k, v, mask=None, causal=False):
    """Attention as its formula in torch, for autograd to differentiate: ``(out, lse)``.

    A fully masked row gets zero weights (its scores are replaced by a constant, so no NaN
    reaches autograd); lse is the logsumexp of the visible scaled scores.
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril(n_k - n_q)  # row i sees keys j <= i + n_k - n_q (bottom-right aligned)
    if mask is not None:
        allowed = allowed & mask
    s = (q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(~allowed, float("-inf"))
    seen = allowed.any(dim=-1, keepdim=True)
    weights = torch.softmax(s.masked_fill(~seen, 0.0), dim=-1) * allowed
    return weights @ v, torch.logsumexp(s, dim=-1)


def reference(q, k, v, d_out, mask=None, causal=False):
    """out, lse and (dq, dk, dv) by autograd through :func:`naive`, in float64 on the CPU."""
    leaves = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out, lse = naive(*leaves, mask=None if mask is None else torch.tensor(mask), causal=causal)
    out.backward(torch.tensor(d_out))
    return to_numpy(out), to_numpy(lse), tuple(to_numpy(t.grad) for t in leaves)


def tiled(backend, q, k, v, d_out, **kw):
    """out, lse and the gradients from a backend: NumPy's tiled backward, or autograd through the torch Function."""
    if backend.name == "numpy":
        out, lse = anp.flash_attention(q, k, v, return_lse=True, **kw)
        return out, lse, flash.flash_attention_backward(q, k, v, out, lse, d_out, **kw)
    kw = {name: backend.arr(a) if isinstance(a, np.ndarray) else a for name, a in kw.items()}
    leaves = [backend.arr(a).requires_grad_() for a in (q, k, v)]
    out, lse = att.flash_attention(*leaves, return_lse=True, **kw)
    out.backward(backend.arr(d_out))
    return to_numpy(out), to_numpy(lse), tuple(to_numpy(t.grad) for t in leaves)


def problem(shapes, seed=0, masked=False):
    """Random q, k, v, an upstream gradient, and a mask with one fully masked row (or None)."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=s) for s in shapes)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    d_out = rng.normal(size=batch + (q.shape[-2], v.shape[-1]))
    if not masked:
        return q, k, v, d_out, None
    mask = rng.random(batch[:1] + (1,) * (len(batch) - 1) + (q.shape[-2], k.shape[-2])) < 0.6  # broadcasts
    mask[..., 2, :] = False  # a fully masked row
    return q, k, v, d_out, mask


SHAPES = {
    "batch and heads, n_q < n_k": ((2, 3, 13, 8), (3, 17, 8), (3, 17, 5)),
    "n_q > n_k": ((19, 4), (11, 4), (11, 6)),
    "n_q = n_k": ((2, 16, 8), (2, 16, 8), (2, 16, 8)),
}


@pytest.mark.parametrize("block_size", [1, 3, (4, 5), 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("case", list(SHAPES))
def test_gradients_equal_autograd_through_the_formula(backend, case, masked, causal, block_size):
    """Block sizes that divide nothing, one row and one key per block, one block for everything."""
    q, k, v, d_out, mask = problem(SHAPES[case], masked=masked)
    expected = reference(q, k, v, d_out, mask, causal)
    out, lse, grads = tiled(backend, q, k, v, d_out, mask=mask, causal=causal, block_size=block_size)
    np.testing.assert_allclose(out, expected[0], **CLOSE)
    np.testing.assert_array_equal(np.isfinite(lse), np.isfinite(expected[1]))
    for name, got, want in zip("qkv", grads, expected[2], strict=True):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, **CLOSE, err_msg=f"d{name}")


def test_the_default_blocks_give_the_same_gradients(backend):
    """Without block_size: blocks of up to 4096 keys and enough rows, causal in several query blocks."""
    q, k, v, d_out, _ = problem(((2, 300, 16), (2, 300, 16), (2, 300, 16)), seed=1)
    for causal in (False, True):
        _, _, grads = tiled(backend, q, k, v, d_out, causal=causal)
        for got, want in zip(grads, reference(q, k, v, d_out, causal=causal)[2], strict=True):
            np.testing.assert_allclose(got, want, **CLOSE)


def test_lse_is_the_logsumexp_of_the_visible_scaled_scores(backend):
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(2, 9, 4)) * 5.0, rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 3))
    mask = rng.random((2, 9, 6)) < 0.7
    mask[1, 7] = False
    for kw in ({}, {"mask": mask}, {"causal": True}, {"mask": mask, "causal": True}):
        expected = to_numpy(naive(*(torch.tensor(a) for a in (q, k, v)),
                                  mask=None if "mask" not in kw else torch.tensor(mask), causal="causal" in kw)[1])
        _, lse = backend.call("flash_attention", q, k, v, block_size=(4, 4), return_lse=True, **kw)
        assert lse.shape == (2, 9)
        np.testing.assert_allclose(lse, expected, **CLOSE)  # -inf exactly where a row sees no key
    _, lse = backend.call("flash_attention", q, k, v, mask=mask, causal=True, block_size=2, return_lse=True)
    assert np.isneginf(lse[1, 7]) and np.isneginf(lse[:, :3]).all()  # 9 queries, 6 keys: rows 0-2 see nothing
    assert np.isfinite(np.delete(lse[1], [0, 1, 2, 7])).all()


def test_fully_masked_rows_give_zero_gradients_never_nan(backend):
    q, k, v, d_out, mask = problem(((10, 4), (7, 4), (7, 3)), seed=3, masked=True)
    _, _, (dq, dk, dv) = tiled(backend, q, k, v, d_out, mask=mask, block_size=3)
    assert all(np.isfinite(g).all() for g in (dq, dk, dv))
    np.testing.assert_array_equal(dq[2], 0.0)  # row 2 sees no key: its query gets nothing back
    _, _, grads = tiled(backend, q, k, v, d_out, mask=np.zeros((10, 7), dtype=bool), block_size=3)
    for g in grads:
        np.testing.assert_array_equal(g, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_two_backward_functions_agree_and_keep_the_dtype(device, dtype):
    q, k, v, d_out, mask = problem(((3, 12, 8), (3, 10, 8), (3, 10, 4)), seed=4, masked=True)
    q, k, v, d_out = (a.astype(dtype) for a in (q, k, v, d_out))
    out, lse = anp.flash_attention(q, k, v, mask=mask, causal=True, block_size=(5, 3), return_lse=True)
    ours = flash.flash_attention_backward(q, k, v, out, lse, d_out, mask=mask, causal=True, block_size=(5, 3))
    theirs = torch_flash.flash_attention_backward(*(to_torch(a, device) for a in (q, k, v, out, lse, d_out)),
                                                  mask=to_torch(mask, device), causal=True, block_size=(5, 3))
    close = {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else CLOSE
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == dtype and b.dtype == torch.from_numpy(a).dtype and b.device.type == device
        np.testing.assert_allclose(to_numpy(b), a, **close)


def test_the_backward_holds_one_block_of_scores_not_the_weights():
    """n = 1024, blocks of 64: the tiled backward stays far below one n x n float64 array; the untiled backward from
    the stored weights (what autograd keeps) needs several of them on top of the weights it was given."""
    n, d, block = 1024, 8, 64
    q, k, v, d_out, _ = problem(((n, d), (n, d), (n, d)), seed=5)
    out, lse = anp.flash_attention(q, k, v, return_lse=True)
    weights = anp.scaled_dot_product_attention(q, k, v)[1]
    one_matrix = n * n * 8
    tiled_peak = peak_bytes(lambda: flash.flash_attention_backward(q, k, v, out, lse, d_out, block_size=block))
    stored_peak = peak_bytes(lambda: flash.backward_from_weights(q, k, v, weights, out, d_out))
    assert tiled_peak < one_matrix / 4, tiled_peak / one_matrix
    assert stored_peak > one_matrix, stored_peak / one_matrix


def test_the_function_saves_q_k_v_out_and_lse_never_the_weights(device):
    n, d = 64, 8
    q, k, v = (torch.randn(2, n, d, dtype=torch.float64, device=device, requires_grad=True) for _ in range(3))
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = att.flash_attention(q, k, v, causal=True, block_size=16)
    assert sorted(saved) == sorted([(2, n, d)] * 4 + [(2, n)]), saved  # q, k, v, out; lse
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"masked": True}, {"masked": True, "causal": True}],
                         ids=["plain", "causal", "mask", "mask-causal"])
def test_gradcheck(device, kw):
    """torch's finite differences agree with the Function's backward, through the output and through lse."""
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, n, 4, generator=g, dtype=torch.float64).to(device).requires_grad_()
               for n in (5, 7, 7))
    mask = (torch.rand(1, 5, 7, generator=g) < 0.7).to(device) if kw.get("masked") else None
    if mask is not None:
        mask[:, :, -1] = True  # every row sees a key, so lse is finite everywhere
    opts = {"mask": mask, "causal": kw.get("causal", False), "block_size": (2, 3)}
    assert torch.autograd.gradcheck(lambda *t: att.flash_attention(*t, return_lse=True, **opts), (q, k, v))
    if mask is not None:
        mask[0, 1] = False  # a fully masked row: its lse is -inf, its output 0
        assert torch.autograd.gradcheck(lambda *t: att.flash_attention(*t, **opts), (q, k, v))


def test_bad_backward_inputs_are_refused():
    q, k, v, d_out, _ = problem(((4, 3), (5, 3), (5, 2)))
    out, lse = anp.flash_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="lse"):
        flash.flash_attention_backward(q, k, v, out, lse[:3], d_out)
    with pytest.raises(ValueError, match="d_out"):
        flash.flash_attention_backward(q, k, v, out, lse, d_out[:, :1])
    with pytest.raises(ValueError, match="lse"):
        flash.flash_attention_backward(q, k, v, out, np.full(4, np.nan), d_out)
    with pytest.raises(ValueError, match="lse"):
        q_t, k_t, v_t, out_t, d_out_t = (torch.tensor(a) for a in (q, k, v, out, d_out))
        torch_flash.flash_attention_backward(q_t, k_t, v_t, out_t, torch.zeros(5, dtype=torch.float64), d_out_t)


def test_values_with_batch_dimensions_of_their_own(backend):
    """Only v has a batch dimension: the gradients of q and k are summed over it."""
    q, k, v, d_out, _ = problem(((9, 4), (6, 4), (2, 6, 3)), seed=8)
    for causal in (False, True):
        expected = reference(q, k, v, d_out, causal=causal)
        _, _, grads = tiled(backend, q, k, v, d_out, causal=causal, block_size=(4, 4))
        for got, want in zip(grads, expected[2], strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, **CLOSE)
