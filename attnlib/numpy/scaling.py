"""Why scores are divided by sqrt(d_k): their variance, softmax saturation and its gradient (chapter 4).

The experiments of the chapter as small functions.  If every component of q
and k is independent with mean 0, ``Var(q . k) = d_k * std_q**2 * std_k**2``:
:func:`dot_product_variance` measures it on seeded random samples.  Large
scores saturate softmax (one weight near 1, the rest near 0), which
:func:`weight_entropy` measures, and a saturated softmax passes almost no
gradient back, which :func:`softmax_grad_norm` measures (with :func:`softmax_vjp`,
the softmax backward that attention's backward pass reuses).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float, as_float_arrays
from .softmax import softmax

#: Random numbers drawn per step by :func:`sample_dot_products`: bounds its memory whatever ``d_k``.
_CHUNK = 2**18


def sample_dot_products(d_k, n_samples, *, std_q=1.0, std_k=1.0, scale=False, seed=0, device=None):
    """Dot products of ``n_samples`` independent random query-key pairs.

    Every component of a query is drawn from a normal distribution with mean 0
    and standard deviation ``std_q``, every component of a key likewise with
    ``std_k``, all independently.

    Parameters
    ----------
    d_k : int >= 1
        Length of each query and key.
    n_samples : int >= 2
        Number of (q, k) pairs.
    std_q, std_k : float > 0
        Standard deviations of the components.
    scale : bool or float
        As in :func:`attention_scores`: ``True`` divides by ``sqrt(d_k)``,
        ``False`` (the default here) keeps the raw dot products.
    seed : int >= 0
        Seeds ``numpy.random.default_rng``: the same seed gives the same samples.
    device : None or "cpu"
        For parity with the torch twin; NumPy runs on the CPU.

    Returns
    -------
    ndarray of float64, shape (n_samples,)
        ``scale * q_i . k_i`` for each pair i.
    """
    _check_sampling(d_k, n_samples, seed, device)
    sq, sk = _checks.check_std("std_q", std_q), _checks.check_std("std_k", std_k)
    factor = _checks.check_scale(scale, d_k)
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // d_k)
    dots = np.empty(n_samples)
    for start in range(0, n_samples, rows):
        stop = min(start + rows, n_samples)
        q = rng.standard_normal((stop - start, d_k)) * sq  # (rows, d_k)
        k = rng.standard_normal((stop - start, d_k)) * sk  # (rows, d_k)
        dots[start:stop] = np.sum(q * k, axis=-1)  # one dot product per pair: (rows,)
    return dots * factor


def dot_product_variance(d_k, n_samples=10_000, *, std_q=1.0, std_k=1.0, scale=False, seed=0, device=None):
    """The sample variance of random dot products (see :func:`sample_dot_products`).

    Theory: ``d_k * std_q**2 * std_k**2`` unscaled; ``std_q**2 * std_k**2``
    with ``scale=True``.  The measurement's relative standard error is about
    ``sqrt(2 / n_samples)``.

    Returns
    -------
    float
        The unbiased sample variance (``ddof=1``) of the ``n_samples`` dot products.
    """
    dots = sample_dot_products(d_k, n_samples, std_q=std_q, std_k=std_k, scale=scale, seed=seed, device=device)
    return float(np.var(dots, ddof=1))


def weight_entropy(weights, axis=-1):
    """The entropy of each row of attention weights, in nats: a measure of saturation.

    ``H = -sum_j w_j log w_j``, with ``0 log 0 = 0``.  A uniform row over n
    keys has the largest entropy, ``log n``; a saturated (one-hot) row has 0.

    Parameters
    ----------
    weights : array_like of float, shape (..., n_k)
        Softmax outputs: each entry in [0, 1], each row summing to 1 (a fully
        masked row of zeros has entropy 0).
    axis : int
        The axis of a row.

    Returns
    -------
    ndarray, the shape of ``weights`` without ``axis``
    """
    w = as_float(weights, "weights")
    axis = _checks.check_axis(axis, w.ndim)
    _checks.check_weights(bool(not np.isfinite(w).all() or (w < 0).any()))
    log_w = np.log(np.where(w > 0, w, 1.0))  # log 1 = 0 where w = 0, so 0 log 0 counts as 0
    return 0.0 - np.sum(w * log_w, axis=axis)  # 0.0 - x: a one-hot row gives 0.0, not -0.0


def softmax_grad_norm(scores, upstream, axis=-1):
    """How much gradient flows back through softmax to the scores, row by row.

    For ``L = sum(softmax(scores) * upstream)`` the gradient with respect to
    one row of scores is the vector-Jacobian product ``J^T u = w * (u - w . u)``
    (``w`` the row's weights, ``u`` its upstream gradient); its Euclidean
    norm is returned.  The torch twin obtains the same numbers by autograd.

    Parameters
    ----------
    scores : array_like of float, shape (..., n_k)
    upstream : array_like of float, same shape as ``scores``
        The gradient arriving at the weights from the layers above.
    axis : int
        The axis softmax normalises.

    Returns
    -------
    ndarray, the shape of ``scores`` without ``axis``
        Near 0 where softmax is saturated.
    """
    s, u = as_float_arrays(scores=scores, upstream=upstream)
    _checks.check_same_shape({"scores": s.shape, "upstream": u.shape})
    axis = _checks.check_axis(axis, s.ndim)
    grad = softmax_vjp(softmax(s, axis=axis), u, axis=axis)  # J^T u, the shape of s
    return np.sqrt(np.sum(grad * grad, axis=axis))


def softmax_vjp(weights: np.ndarray, upstream: np.ndarray, axis: int = -1, row_dots=None) -> np.ndarray:
    """The gradient that flows back through softmax to its scores: ``J^T u = w * (u - w . u)``, row by row.

    Parameters
    ----------
    weights : ndarray, shape (..., n_k)
        Softmax outputs ``w`` (a fully masked row of zeros gets a zero gradient).
    upstream : ndarray, shape (..., n_k)
        The gradient ``u`` arriving at the weights.
    axis : int
        The axis softmax normalised.
    row_dots : ndarray, shape (..., 1), optional
        Each row's ``w . u`` when it is already known: attention's backward pass
        gets it as ``rowsum(dO * O)`` without a pass over the weights (chapter 18).

    Returns
    -------
    ndarray, the broadcast shape of ``weights`` and ``upstream``
    """
    if row_dots is None:
        row_dots = np.sum(weights * upstream, axis=axis, keepdims=True)  # (..., 1)
    grad = upstream - row_dots  # u - w . u: a new array, the inputs stay as they were
    grad *= weights  # w * (u - w . u), in place: one array the size of the weights, not two
    return grad


def _check_sampling(d_k, n_samples, seed, device) -> None:
    _checks.check_count("d_k", d_k)
    _checks.check_count("n_samples", n_samples, minimum=2)
    _checks.check_seed(seed)
    if device not in (None, "cpu"):
        raise ValueError(f"NumPy 后端只在 CPU 上运行：device 只能是 None 或 'cpu'，收到 {device!r} "
                         f"(the NumPy backend runs on the CPU only)。")
