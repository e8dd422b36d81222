"""softmax: stability, temperature, masks, axes, on both backends."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import Backend, tol

BACKENDS = [Backend("numpy"), Backend("torch")]


def test_extreme_scores_are_finite_and_exact(backend):
    w = backend.call("softmax", np.array([1e4, -1e4, 0.0]))
    np.testing.assert_array_equal(w, [1.0, 0.0, 0.0])
    w = backend.call("softmax", np.array([1e4, 1e4 - 1.0]))
    p = 1 / (1 + math.exp(-1))
    np.testing.assert_allclose(w, [p, 1 - p], rtol=1e-12)
    w = backend.call("softmax", np.array([-1e4, -1e4 - 1.0], dtype=np.float32))
    assert w.dtype == np.float32
    np.testing.assert_allclose(w, [p, 1 - p], rtol=1e-6)


def test_minus_infinity_gets_exactly_zero(backend):
    w = backend.call("softmax", np.array([[0.0, -np.inf, math.log(3.0)], [-np.inf, -np.inf, -np.inf]]))
    np.testing.assert_allclose(w[0], [0.25, 0.0, 0.75], rtol=1e-12)
    assert w[0, 1] == 0.0
    np.testing.assert_array_equal(w[1], [0.0, 0.0, 0.0])


def test_temperature_divides_the_scores(backend):
    x = np.array([1.0, 2.0, 4.0])
    for t in (0.1, 0.5, 2.0, 10.0):
        np.testing.assert_allclose(backend.call("softmax", x, temperature=t), backend.call("softmax", x / t))
    np.testing.assert_allclose(backend.call("softmax", x, temperature=1e6), [1 / 3] * 3, rtol=1e-5)
    np.testing.assert_allclose(backend.call("softmax", x, temperature=1e-3), [0, 0, 1], atol=1e-12)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_any_axis(backend, axis):
    x = np.random.default_rng(0).normal(size=(3, 4, 5))
    w = backend.call("softmax", x, axis=axis)
    expected = torch.softmax(torch.as_tensor(x), dim=axis).numpy()
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    np.testing.assert_allclose(w.sum(axis=axis), 1.0, rtol=1e-12)


def test_mask_gives_the_softmax_of_the_allowed_entries(backend):
    x = np.array([[2.0, 100.0, 1.0, 0.5], [3.0, 1.0, 2.0, 4.0]])
    mask = np.array([[True, False, True, True], [False, False, False, False]])
    w = backend.call("softmax", x, mask=mask)
    np.testing.assert_allclose(w[0, [0, 2, 3]], torch.softmax(torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64), 0))
    assert w[0, 1] == 0.0
    np.testing.assert_array_equal(w[1], 0.0)
    # A mask that broadcasts: one row of the mask shared by both rows of x.
    w = backend.call("softmax", x, mask=np.array([True, True, False, True]))
    assert (w[:, 2] == 0).all() and np.allclose(w.sum(-1), 1)


score = st.floats(-1e4, 1e4, allow_nan=False, width=32)


@settings(max_examples=60, deadline=None)
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=score),
       data=st.data())
def test_rows_sum_to_one_or_zero(x, data):
    mask = data.draw(hnp.arrays(np.bool_, x.shape))
    expected = torch.softmax(torch.as_tensor(x).masked_fill(~torch.as_tensor(mask), -math.inf), -1).nan_to_num(0.0)
    for b in BACKENDS:
        w = b.call("softmax", x, mask=mask)
        assert np.isfinite(w).all() and (w >= 0).all()
        assert (w[~mask] == 0).all()
        sums = w.sum(-1)
        np.testing.assert_allclose(sums, np.where(mask.any(-1), 1.0, 0.0), atol=1e-12)
        np.testing.assert_allclose(w, expected.numpy(), **tol(np.float64))


def test_dtype_and_device_are_kept(device):
    x = torch.randn(4, 5, dtype=torch.float32, device=device)
    w = att.softmax(x, mask=torch.rand(4, 5, device=device) > 0.3)
    assert w.dtype == torch.float32 and w.device.type == device
    assert anp.softmax(np.zeros(3, dtype=np.float32)).dtype == np.float32
