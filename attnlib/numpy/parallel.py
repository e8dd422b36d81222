"""Attention one query at a time, and a recurrent scan to contrast it with (chapter 7).

Chapter 7 compares three ways of turning a sequence into a sequence:

* :func:`attention_loop` is scaled dot-product attention written as a loop over
  the queries.  No pass of the loop needs the result of another pass: the rows
  could be computed in any order, or all at once, which is what
  :func:`attnlib.numpy.scaled_dot_product_attention` does with one matrix
  product for the scores and one for the output.  Both forms do the same
  multiply-adds, ``n_q * n_k * (d_k + d_v)``.
* :func:`rnn_scan` is a tiny tanh recurrent network,
  ``h_t = tanh(x_t W + h_{t-1} U)``.  The input part ``x_t W`` of every step is
  one matrix product; the rest of step t needs ``h_{t-1}``, so the n steps run
  one after another, on any hardware.

Both loops are written lean (one input check, then no per-step checks), so a
measured difference between the forms is the difference between many small
calls and one large call, not extra validation.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays
from .softmax import softmax_


def attention_loop(q, k, v):
    """Scaled dot-product attention computed one query at a time (the loop form).

    Parameters
    ----------
    q : array_like of float, shape (..., n_q, d_k)
    k : array_like of float, shape (..., n_k, d_k)
    v : array_like of float, shape (..., n_k, d_v)
        Leading batch/head dimensions broadcast; all three share one dtype.

    Returns
    -------
    ndarray, shape (..., n_q, d_v)
        Equal to ``scaled_dot_product_attention(q, k, v)[0]`` up to rounding:
        row i is ``softmax(q_i k^T / sqrt(d_k)) v``, computed by pass i of a
        Python loop that uses no other pass's result.
    """
    q, k, v = as_float_arrays(q=q, k=k, v=v)
    batch = _checks.check_qkv(q.shape, k.shape, v.shape)
    n_q, d_k = q.shape[-2:]
    scale = 1.0 / math.sqrt(d_k)  # a Python float: float32 inputs stay float32
    k_t = np.swapaxes(k, -1, -2)  # (..., d_k, n_k), a view
    out = np.empty(batch + (n_q, v.shape[-1]), dtype=q.dtype)  # (..., n_q, d_v)
    for i in range(n_q):  # pass i reads query i and every key and value, writes output row i
        s = (q[..., i:i + 1, :] * scale) @ k_t  # (..., 1, n_k): this query's scores
        w = softmax_(s, axis=-1)  # (..., 1, n_k): in place, its weights
        out[..., i, :] = (w @ v)[..., 0, :]  # (..., d_v): the weighted sum of the values
    return out


def rnn_scan(x, w, u, h0=None):
    """A tanh recurrent network run over a sequence: ``h_t = tanh(x_t W + h_{t-1} U)``.

    Parameters
    ----------
    x : array_like of float, shape (..., n, d_in)
        One input vector per step.
    w : array_like of float, shape (d_in, d_h)
        Input-to-state matrix.
    u : array_like of float, shape (d_h, d_h)
        State-to-state matrix: what makes step t wait for step t - 1.
    h0 : array_like of float, shape (..., d_h), optional
        The state before the first step (default zeros); broadcasts to the batch of ``x``.

    Returns
    -------
    ndarray, shape (..., n, d_h)
        Row t is the state ``h_t`` after reading ``x_0 ... x_t``.
    """
    named = {"x": x, "w": w, "u": u} if h0 is None else {"x": x, "w": w, "u": u, "h0": h0}
    arrays = as_float_arrays(**named)
    x, w, u = arrays[:3]
    _checks.check_min_ndim("x", x.shape)
    _checks.check_matrix("w", w.shape, x.shape[-1])
    d_h = w.shape[1]
    _checks.check_matrix("u", u.shape, d_h, d_h)
    batch, n = x.shape[:-2], x.shape[-2]
    h = np.zeros(batch + (d_h,), dtype=x.dtype)  # (..., d_h)
    if h0 is not None:
        check_state(arrays[3].shape, batch + (d_h,))
        h = h + arrays[3]
    xw = x @ w  # (..., n, d_h): the input part of every step, in one call
    hs = np.empty(batch + (n, d_h), dtype=x.dtype)  # (..., n, d_h)
    for t in range(n):  # step t needs h_{t-1}: strictly one after another
        h = np.tanh(xw[..., t, :] + h @ u)  # (..., d_h)
        hs[..., t, :] = h
    return hs


def check_state(shape: tuple, target: tuple) -> None:
    """An initial state must broadcast to ``target`` = (batch of x) + (d_h,) without enlarging it."""
    try:
        ok = _checks.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"h0.shape={tuple(shape)} 无法广播到状态的形状 {tuple(target)} "
                         f"(h0 must broadcast to {tuple(target)})。")
