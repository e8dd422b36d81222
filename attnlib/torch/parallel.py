"""Attention one query at a time, and a recurrent scan to contrast it with (chapter 7), torch backend.

The same two functions as :mod:`attnlib.numpy.parallel`, on any device.  On a
GPU each pass of these loops launches its own small kernels, one after
another: the loop form shows what the one large call of
:func:`attnlib.torch.scaled_dot_product_attention` saves, and the scan shows
the chain of steps that no hardware can run at once.
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from ..numpy.parallel import check_state
from ._tensors import as_float_tensors


def attention_loop(q, k, v):
    """Scaled dot-product attention computed one query at a time; same contract as the NumPy twin.

    Parameters
    ----------
    q : tensor of float, shape (..., n_q, d_k)
    k : tensor of float, shape (..., n_k, d_k)
    v : tensor of float, shape (..., n_k, d_v)
        Same dtype and device; leading dimensions broadcast; autograd flows through.

    Returns
    -------
    tensor, shape (..., n_q, d_v)
        Equal to ``scaled_dot_product_attention(q, k, v)[0]`` up to rounding.
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    n_q, d_k = q.shape[-2:]
    scale = 1.0 / math.sqrt(d_k)
    k_t = k.mT  # (..., d_k, n_k), a view
    rows = []
    for i in range(n_q):  # pass i reads query i and every key and value
        s = (q[..., i:i + 1, :] * scale) @ k_t  # (..., 1, n_k): this query's scores
        w = torch.softmax(s, dim=-1)  # (..., 1, n_k): its weights
        rows.append(w @ v)  # (..., 1, d_v): the weighted sum of the values
    if not rows:
        return q.new_zeros(batch + (0, v.shape[-1]))
    return torch.cat(rows, dim=-2)  # (..., n_q, d_v)


def rnn_scan(x, w, u, h0=None):
    """A tanh recurrent network, ``h_t = tanh(x_t W + h_{t-1} U)``; same contract as the NumPy twin.

    Parameters
    ----------
    x : tensor of float, shape (..., n, d_in)
    w : tensor of float, shape (d_in, d_h)
    u : tensor of float, shape (d_h, d_h)
    h0 : tensor of float, shape (..., d_h), optional
        Default zeros; broadcasts to the batch of ``x``.

    Returns
    -------
    tensor, shape (..., n, d_h)
        Row t is the state after reading ``x_0 ... x_t``.
    """
    named = {"x": x, "w": w, "u": u} if h0 is None else {"x": x, "w": w, "u": u, "h0": h0}
    tensors = as_float_tensors(**named)
    x, w, u = tensors[:3]
    _checks.check_min_ndim("x", tuple(x.shape))
    _checks.check_matrix("w", tuple(w.shape), x.shape[-1])
    d_h = w.shape[1]
    _checks.check_matrix("u", tuple(u.shape), d_h, d_h)
    batch, n = tuple(x.shape[:-2]), x.shape[-2]
    h = x.new_zeros(batch + (d_h,))  # (..., d_h)
    if h0 is not None:
        check_state(tuple(tensors[3].shape), batch + (d_h,))
        h = h + tensors[3]
    xw = x @ w  # (..., n, d_h): the input part of every step, in one call
    states = []
    for t in range(n):  # step t needs h_{t-1}: strictly one after another
        h = torch.tanh(xw[..., t, :] + h @ u)  # (..., d_h)
        states.append(h)
    if not states:
        return x.new_zeros(batch + (0, d_h))
    return torch.stack(states, dim=-2)  # (..., n, d_h)
