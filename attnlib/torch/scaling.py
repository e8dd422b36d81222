"""Why scores are divided by sqrt(d_k) (chapter 4), torch backend: same names and contracts as ``attnlib.numpy``.

Samples are drawn by a seeded ``torch.Generator`` on the requested device, so
they differ from NumPy's (another generator) but follow the same distribution;
:func:`softmax_grad_norm` takes its gradient from autograd.
"""

from __future__ import annotations

import torch

from .. import _checks
from ._tensors import as_float, as_float_tensors

#: Random numbers drawn per step by :func:`sample_dot_products`: bounds its memory whatever ``d_k``.
_CHUNK = 2**18


def sample_dot_products(d_k, n_samples, *, std_q=1.0, std_k=1.0, scale=False, seed=0, device=None):
    """Dot products of ``n_samples`` independent random query-key pairs (components normal, mean 0).

    Parameters
    ----------
    d_k : int >= 1
    n_samples : int >= 2
    std_q, std_k : float > 0
        Standard deviations of the query and key components.
    scale : bool or float
        ``True`` divides by ``sqrt(d_k)``; ``False`` (the default here) keeps raw dot products.
    seed : int >= 0
        Seeds a ``torch.Generator`` on ``device``.
    device : None, str or torch.device
        Where the samples are drawn (default: the CPU).

    Returns
    -------
    tensor of float64, shape (n_samples,), on ``device``
    """
    _checks.check_count("d_k", d_k)
    _checks.check_count("n_samples", n_samples, minimum=2)
    _checks.check_seed(seed)
    sq, sk = _checks.check_std("std_q", std_q), _checks.check_std("std_k", std_k)
    factor = _checks.check_scale(scale, d_k)
    device = torch.device("cpu" if device is None else device)
    gen = torch.Generator(device=device).manual_seed(seed)
    rows = max(1, _CHUNK // d_k)
    dots = torch.empty(n_samples, dtype=torch.float64, device=device)
    for start in range(0, n_samples, rows):
        stop = min(start + rows, n_samples)
        shape = (stop - start, d_k)
        q = torch.randn(shape, generator=gen, dtype=torch.float64, device=device) * sq  # (rows, d_k)
        k = torch.randn(shape, generator=gen, dtype=torch.float64, device=device) * sk  # (rows, d_k)
        dots[start:stop] = (q * k).sum(dim=-1)  # one dot product per pair: (rows,)
    return dots * factor


def dot_product_variance(d_k, n_samples=10_000, *, std_q=1.0, std_k=1.0, scale=False, seed=0, device=None):
    """The unbiased sample variance (a Python float) of :func:`sample_dot_products`.

    Theory: ``d_k * std_q**2 * std_k**2`` unscaled, ``std_q**2 * std_k**2`` with ``scale=True``.
    """
    dots = sample_dot_products(d_k, n_samples, std_q=std_q, std_k=std_k, scale=scale, seed=seed, device=device)
    return float(dots.var(correction=1))


def weight_entropy(weights, axis=-1):
    """The entropy of each row of attention weights, in nats (``0 log 0 = 0``).

    weights : (..., n_k), entries in [0, 1]; returns the shape without ``axis``,
    from 0 (one-hot: saturated) to ``log n_k`` (uniform).  Device and dtype are kept.
    """
    w = as_float(weights, "weights")
    axis = _checks.check_axis(axis, w.dim())
    _checks.check_weights(bool((~torch.isfinite(w)).any() | (w < 0).any()))
    log_w = torch.log(torch.where(w > 0, w, torch.ones_like(w)))  # 0 log 0 counts as 0
    return 0.0 - (w * log_w).sum(dim=axis)  # 0.0 - x: a one-hot row gives 0.0, not -0.0


def softmax_grad_norm(scores, upstream, axis=-1):
    """The norm of the gradient that reaches each row of ``scores`` through softmax, by autograd.

    scores, upstream : same shape (..., n_k); ``L = sum(softmax(scores) * upstream)``;
    returns ``|dL/dscores|`` along ``axis`` (a detached tensor, the shape without
    ``axis``).  Near 0 where softmax is saturated.
    """
    s, u = as_float_tensors(scores=scores, upstream=upstream)
    _checks.check_same_shape({"scores": tuple(s.shape), "upstream": tuple(u.shape)})
    axis = _checks.check_axis(axis, s.dim())
    # autograd works here even when the caller switched it off (no_grad, inference_mode)
    with torch.inference_mode(False), torch.enable_grad():
        leaf = s.detach().clone().requires_grad_(True)
        w = torch.softmax(leaf, dim=axis)
        (grad,) = torch.autograd.grad(w, leaf, grad_outputs=u.detach().clone())  # J^T u
    return torch.linalg.vector_norm(grad, dim=axis)
