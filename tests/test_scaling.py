"""Chapter 3's cosine scores and chapter 4's scaling experiments: theory, NumPy/torch parity, devices, bad input.

Variance measurements are compared with the theory ``d_k * std_q**2 * std_k**2``
within a tolerance taken from their own sampling error (not from one run): for
Gaussian components the dot product X has ``E[X^4] = 3 d_k^2 + 6 d_k`` (unit
variances), so the sample variance of n dot products has a relative standard
error of ``sqrt((2 + 6 / d_k) / n)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att
from conftest import tol

R = np.random.default_rng(4)


def relative_se(d_k: int, n: int) -> float:
    """Relative standard error of the sample variance of n Gaussian dot products of length d_k."""
    return math.sqrt((2 + 6 / d_k) / n)


# --------------------------------------------------------------------------- dot-product variance

@pytest.mark.parametrize("d_k", [1, 4, 64, 1024])
@pytest.mark.parametrize("lib", [anp, att], ids=["numpy", "torch"])
def test_variance_of_dot_products_is_d_k(lib, d_k):
    n = 8_000
    for seed in (0, 1):
        v = lib.dot_product_variance(d_k, n, seed=seed)
        assert abs(v / d_k - 1) < 5 * relative_se(d_k, n), (d_k, seed, v)


@pytest.mark.parametrize("lib", [anp, att], ids=["numpy", "torch"])
def test_scaling_brings_the_variance_to_one_only_for_unit_components(lib):
    n, d_k = 8_000, 256
    assert abs(lib.dot_product_variance(d_k, n, scale=True) - 1) < 5 * relative_se(d_k, n)
    # components with std 2 and 1.5: Var(q.k) = d_k * 4 * 2.25, and dividing by sqrt(d_k) leaves 9
    raw = lib.dot_product_variance(d_k, n, std_q=2.0, std_k=1.5)
    scaled = lib.dot_product_variance(d_k, n, std_q=2.0, std_k=1.5, scale=True)
    assert abs(raw / (9 * d_k) - 1) < 5 * relative_se(d_k, n)
    assert abs(scaled / 9 - 1) < 5 * relative_se(d_k, n)
    # a number as scale multiplies, as in attention_scores
    third = lib.dot_product_variance(d_k, n, scale=1 / 3)
    assert third == pytest.approx(lib.dot_product_variance(d_k, n) / 9, rel=1e-12)


@pytest.mark.parametrize("lib", [anp, att], ids=["numpy", "torch"])
def test_samples_are_seeded_and_have_mean_zero(lib):
    a = np.asarray(lib.sample_dot_products(32, 5_000, seed=3))
    b = np.asarray(lib.sample_dot_products(32, 5_000, seed=3))
    c = np.asarray(lib.sample_dot_products(32, 5_000, seed=4))
    assert a.shape == (5_000,) and a.dtype == np.float64
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert abs(a.mean()) < 5 * math.sqrt(32 / 5_000)  # mean 0, standard error sqrt(d_k / n)
    assert lib.dot_product_variance(32, 5_000, seed=3) == pytest.approx(np.var(a, ddof=1), rel=1e-12)


@pytest.mark.parametrize("lib", [anp, att], ids=["numpy", "torch"])
def test_samples_do_not_depend_on_how_they_are_chunked(lib, monkeypatch):
    """The chunk size only bounds memory: with a small n every pair is drawn in one step anyway."""
    module = __import__(f"attnlib.{'numpy' if lib is anp else 'torch'}.scaling", fromlist=["_CHUNK"])
    whole = np.asarray(lib.sample_dot_products(8, 100, seed=1))
    monkeypatch.setattr(module, "_CHUNK", 8 * 7)  # 7 pairs per step
    chunked = np.asarray(lib.sample_dot_products(8, 100, seed=1))
    assert chunked.shape == whole.shape and abs(np.var(chunked) / 8 - 1) < 5 * relative_se(8, 100)  # same law
    monkeypatch.setattr(module, "_CHUNK", 1)  # d_k larger than a chunk still draws whole rows
    assert np.asarray(lib.sample_dot_products(8, 10, seed=1)).shape == (10,)


def test_torch_samples_are_drawn_on_the_requested_device(device):
    dots = att.sample_dot_products(16, 1_000, seed=0, device=device)
    assert dots.device.type == device and dots.dtype == torch.float64
    assert isinstance(att.dot_product_variance(16, 1_000, device=device), float)


# --------------------------------------------------------------------------- saturation: entropy of weight rows

def test_entropy_is_zero_when_saturated_and_log_n_when_uniform(backend):
    w = np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    h = backend.call("weight_entropy", w)
    assert np.allclose(h, [0.0, math.log(4), math.log(2), 0.0], rtol=1e-12, atol=0)
    assert not np.signbit(h[0])  # a one-hot row is 0.0, not -0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_entropy_matches_the_definition_on_any_axis(backend, dtype):
    s = R.normal(size=(2, 3, 5)) * 3
    for axis in (0, 1, -1):
        w = anp.softmax(s, axis=axis).astype(dtype)
        h = backend.call("weight_entropy", w, axis=axis)
        expected = -np.sum(w.astype(float) * np.log(w.astype(float)), axis=axis)
        assert h.dtype == dtype and h.shape == expected.shape
        assert np.allclose(h, expected, **tol(dtype))
        assert (h >= 0).all() and (h <= math.log(w.shape[axis]) + 1e-6).all()


def test_sharper_rows_have_lower_entropy(backend):
    row = R.normal(size=8)
    rows = np.stack([anp.softmax(row * c) for c in (0.5, 1, 2, 4, 8)])
    h = backend.call("weight_entropy", rows)
    assert (np.diff(h) < 0).all()


# --------------------------------------------------------------------------- gradient through softmax

def test_gradient_norm_equals_the_jacobian_product(backend):
    s, u = R.normal(size=(3, 4, 6)), R.normal(size=(3, 4, 6))
    got = backend.call("softmax_grad_norm", s, u)
    w = anp.softmax(s)
    jac = np.einsum("...j,jk->...jk", w, np.eye(6)) - w[..., :, None] * w[..., None, :]  # diag(w) - w w^T
    expected = np.linalg.norm(np.einsum("...jk,...k->...j", jac, u), axis=-1)
    assert got.shape == (3, 4) and np.allclose(got, expected, rtol=1e-10, atol=1e-14)


def test_gradient_norm_numpy_matches_torch_autograd_on_every_axis(device):
    s, u = R.normal(size=(4, 5, 3)) * 2, R.normal(size=(4, 5, 3))
    for axis in (0, 1, 2):
        ours = anp.softmax_grad_norm(s, u, axis=axis)
        theirs = att.softmax_grad_norm(torch.tensor(s, device=device), torch.tensor(u, device=device), axis=axis)
        assert theirs.device.type == device and not theirs.requires_grad
        assert np.allclose(ours, theirs.cpu().numpy(), rtol=1e-10, atol=1e-14)


def test_gradient_norm_against_finite_differences():
    s, u = R.normal(size=5), R.normal(size=5)
    eps = 1e-6
    grad = np.array([(np.sum(anp.softmax(s + eps * e) * u) - np.sum(anp.softmax(s - eps * e) * u)) / (2 * eps)
                     for e in np.eye(5)])
    assert anp.softmax_grad_norm(s, u) == pytest.approx(np.linalg.norm(grad), rel=1e-6)


def test_saturated_softmax_passes_almost_no_gradient(backend):
    s, u = R.normal(size=(16, 8)), R.normal(size=(16, 8))
    norms = [np.median(backend.call("softmax_grad_norm", s * c, u)) for c in (1, 4, 16, 64)]
    assert (np.diff(norms) < 0).all() and norms[-1] < 1e-3 * norms[0]


def test_torch_gradient_norm_leaves_the_inputs_alone():
    s = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    u = torch.randn(3, 4, dtype=torch.float64)
    g = att.softmax_grad_norm(s, u)
    assert s.grad is None and g.shape == (3,)
    with torch.no_grad():  # works where autograd is switched off around it
        assert torch.allclose(att.softmax_grad_norm(s, u), g)
    with torch.inference_mode():
        assert torch.allclose(att.softmax_grad_norm(s, u), g)
        s_inf, u_inf = s.detach().clone(), u.clone()  # tensors made in inference mode
        assert torch.allclose(att.softmax_grad_norm(s_inf, u_inf), g)


# --------------------------------------------------------------------------- cosine scores

def test_cosine_is_the_dot_product_of_unit_vectors(backend):
    q, k = R.normal(size=(2, 3, 4)), R.normal(size=(2, 5, 4))
    cos = backend.call("cosine_scores", q, k)
    dots = anp.attention_scores(q, k, scale=False)
    lengths = np.linalg.norm(q, axis=-1)[..., :, None] * np.linalg.norm(k, axis=-1)[..., None, :]
    assert cos.shape == (2, 3, 5) and np.allclose(cos * lengths, dots, rtol=1e-12, atol=1e-12)
    assert (np.abs(cos) <= 1).all()


def test_cosine_ignores_lengths_and_the_dot_product_does_not(backend):
    q, k = R.normal(size=(3, 6)), R.normal(size=(4, 6))
    stretch = np.array([[0.1], [2.0], [30.0], [1.0]])
    cos, cos_long = backend.call("cosine_scores", q, k), backend.call("cosine_scores", q * 7, k * stretch)
    assert np.allclose(cos, cos_long, rtol=1e-12, atol=1e-12)
    assert np.allclose(np.diag(backend.call("cosine_scores", k, k)), 1.0, rtol=0, atol=1e-15)
    assert np.allclose(backend.call("cosine_scores", q, -q).diagonal(), -1.0)
    dots = anp.attention_scores(q, k * stretch, scale=False)
    assert not np.allclose(dots.argsort(-1), cos.argsort(-1))  # lengths reorder the dot products here


def test_cosine_float32_and_device(device):
    q, k = torch.randn(2, 3, 8, device=device), torch.randn(2, 4, 8, device=device)
    cos = att.cosine_scores(q, k)
    assert cos.dtype == torch.float32 and cos.device.type == device
    expected = anp.cosine_scores(q.double().cpu().numpy(), k.double().cpu().numpy())
    assert np.allclose(cos.cpu().numpy(), expected, **tol(np.float32))


# --------------------------------------------------------------------------- bad input

Q = R.normal(size=(3, 4))
BAD = {
    "zero query": ("cosine_scores", (np.zeros((2, 4)), Q), {}, ValueError, ["q", "零向量"]),
    "zero key": ("cosine_scores", (Q, np.vstack([Q[:2], np.zeros((1, 4))])), {}, ValueError, ["k", "零向量"]),
    "cosine d_k": ("cosine_scores", (Q, R.normal(size=(3, 5))), {}, ValueError, ["d_k", "(3, 4)", "(3, 5)"]),
    "cosine integers": ("cosine_scores", (np.ones((2, 4), int), Q), {}, TypeError, ["q", "int"]),
    "entropy negative": ("weight_entropy", (np.array([0.5, 0.7, -0.2]),), {}, ValueError, ["weights", "负数"]),
    "entropy NaN": ("weight_entropy", (np.array([0.5, np.nan]),), {}, ValueError, ["NaN"]),
    "entropy integers": ("weight_entropy", (np.array([1, 0]),), {}, TypeError, ["weights", "int"]),
    "entropy axis": ("weight_entropy", (np.full((2, 2), 0.5),), {"axis": 2}, ValueError, ["axis=2"]),
    "grad shapes": ("softmax_grad_norm", (Q, Q[:, :3]), {}, ValueError, ["scores.shape=(3, 4)", "(3, 3)"]),
    "grad dtype": ("softmax_grad_norm", (Q, Q.astype(np.float32)), {}, TypeError, ["float32", "float64"]),
    "grad inf": ("softmax_grad_norm", (np.array([1.0, np.inf]), np.ones(2)), {}, ValueError, ["scores"]),
}
SAMPLING = {
    "d_k zero": ((0, 100), {}, ValueError, ["d_k", "0"]),
    "d_k float": ((8.0, 100), {}, ValueError, ["d_k", "8.0"]),
    "one sample": ((8, 1), {}, ValueError, ["n_samples", "2"]),
    "negative std": ((8, 100), {"std_k": -1.0}, ValueError, ["std_k"]),
    "text std": ((8, 100), {"std_q": "big"}, TypeError, ["std_q"]),
    "scale zero": ((8, 100), {"scale": 0.0}, ValueError, ["scale"]),
    "negative seed": ((8, 100), {"seed": -1}, ValueError, ["seed"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_a_clear_error(backend, case):
    fname, args, kwargs, error, fragments = BAD[case]
    with pytest.raises(error) as info:
        backend.call(fname, *args, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value), (case, str(info.value))


@pytest.mark.parametrize("case", list(SAMPLING))
@pytest.mark.parametrize("fname", ["sample_dot_products", "dot_product_variance"])
@pytest.mark.parametrize("lib", [anp, att], ids=["numpy", "torch"])
def test_bad_sampling_arguments_raise_a_clear_error(lib, fname, case):
    args, kwargs, error, fragments = SAMPLING[case]
    with pytest.raises(error) as info:
        getattr(lib, fname)(*args, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value), (case, str(info.value))


def test_numpy_refuses_a_gpu_device():
    with pytest.raises(ValueError, match="CPU"):
        anp.sample_dot_products(8, 10, device="cuda")
    assert anp.sample_dot_products(8, 10, device="cpu").shape == (10,)
