"""The delta rule (chapter 19), torch backend: any device, the dtype of the inputs, autograd.

The formulas, fla's conventions (state ``d_k x d_v`` read as ``S^T q``, the
gate before the erase, no ``1/sqrt(d_k)``, keys used as given) and the chunked
form's derivation are those of ``attnlib.numpy.delta``; so are the input
checks, so both backends raise the same errors.  The chunked form solves its
triangular systems with ``torch.linalg.solve_triangular``; gradients flow
through both functions.
"""

from __future__ import annotations

import torch

from ..numpy.delta import INPUTS, _check_chunk_size, _check_gate, _check_shapes, _given
from ._tensors import as_float_tensors


def delta_rule(q, k, v, beta, *, alpha=None, initial_state=None):
    """``S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T``, ``o_t = S_t^T q_t``, step by step.

    q, k : (..., n, d_k); v : (..., n, d_v); beta, alpha : (..., n); initial_state : (..., d_k, d_v).
    Returns ``(out (..., n, d_v), state (..., d_k, d_v))``; see ``attnlib.numpy.delta.delta_rule``.
    """
    q, k, v, beta, alpha, state = _as_inputs(q, k, v, beta, alpha, initial_state)
    outs = []
    for t in range(q.shape[-2]):
        q_t, k_t, v_t = q[..., t, None, :], k[..., t, None, :], v[..., t, None, :]  # (..., 1, d) rows
        state = alpha[..., t, None, None] * state  # alpha_t S_{t-1}: the gate fades the old memory
        v_old = k_t @ state  # (..., 1, d_v): (alpha_t S_{t-1})^T k_t, what the memory holds under k_t
        state = state + beta[..., t, None, None] * (k_t.mT @ (v_t - v_old))  # erase, then write
        outs.append((q_t @ state)[..., 0, :])  # o_t = S_t^T q_t
    return _stack(outs, state, v), state


def _stack(rows: list, state, v):
    """The output rows ``(..., d_v)`` as ``(..., n, d_v)`` (an empty one when n = 0)."""
    if rows:
        return torch.stack(rows, dim=-2)
    return state.new_zeros(state.shape[:-2] + (0, v.shape[-1]))


def _as_inputs(q, k, v, beta, alpha, initial_state):
    """Checked tensors with the batch broadcast; ``alpha`` of ones and a zero state when not given."""
    named = _given(q, k, v, beta, alpha, initial_state)
    t = dict(zip(named, as_float_tensors(**named), strict=True))  # checked: float, one dtype, one device, finite
    shapes = {name: tuple(x.shape) for name, x in t.items()}
    batch = _check_shapes(*(shapes.get(name) for name in INPUTS))
    n, d_k, d_v = shapes["q"][-2], shapes["q"][-1], shapes["v"][-1]
    q, k, v = (t[name].broadcast_to(batch + shapes[name][-2:]) for name in ("q", "k", "v"))
    beta = t["beta"].broadcast_to(batch + (n,))
    if "alpha" in t:
        if t["alpha"].numel():
            _check_gate(float(t["alpha"].detach().min()), float(t["alpha"].detach().max()))
        alpha = t["alpha"].broadcast_to(batch + (n,))
    else:
        alpha = q.new_ones(batch + (n,))
    if "initial_state" in t:
        state = t["initial_state"].broadcast_to(batch + (d_k, d_v))
    else:
        state = q.new_zeros(batch + (d_k, d_v))
    return q, k, v, beta, alpha, state


def chunked_delta_rule(q, k, v, beta, *, alpha=None, initial_state=None, chunk_size=64):
    """:func:`delta_rule` parallel inside chunks of ``chunk_size`` steps (WY/UT representation).

    Same results up to rounding; the derivation is in the chunked-form section of ``attnlib.numpy.delta``.
    """
    q, k, v, beta, alpha, state = _as_inputs(q, k, v, beta, alpha, initial_state)
    size = _check_chunk_size(chunk_size)
    n = q.shape[-2]
    q, k, v = (_chunks(a, size, -2) for a in (q, k, v))  # (..., m, C, d)
    beta, log_alpha = _chunks(beta, size, -1), _chunks(torch.log(alpha), size, -1)  # (..., m, C)
    u, w, within, q_gated, k_to_end, gamma_end = _chunk_parts(q, k, v, beta, log_alpha)
    outs = []
    for c in range(q.shape[-3]):  # the only sequential loop: ceil(n / C) steps
        d = u[..., c, :, :] - w[..., c, :, :] @ state  # (..., C, d_v): D = U - W S
        outs.append(q_gated[..., c, :, :] @ state + within[..., c, :, :] @ d)
        state = gamma_end[..., c, None, None] * state + k_to_end[..., c, :, :].mT @ d
    out = torch.cat(outs, dim=-2) if outs else state.new_zeros(state.shape[:-2] + (0, v.shape[-1]))
    return out[..., :n, :], state


def _chunks(a, size: int, step_axis: int):
    """Cut ``step_axis`` into ceil(n / C) chunks of ``size``, the last one padded with zeros (steps that do nothing)."""
    axis = step_axis % a.ndim
    n = a.shape[axis]
    m = -(-n // size)
    pad = [0, 0] * (a.ndim - 1 - axis) + [0, m * size - n]  # torch's pad lists the last dimension first
    a = torch.nn.functional.pad(a, pad)
    return a.reshape(a.shape[:axis] + (m, size) + a.shape[axis + 1:])


def _chunk_parts(q, k, v, beta, log_alpha):
    """U, W, ``Q K^T * Gamma`` (causal), ``diag(gamma) Q``, ``diag(gamma_C / gamma) K``, ``gamma_C`` for every chunk."""
    size = q.shape[-2]
    g = torch.cumsum(log_alpha, dim=-1)  # (..., m, C): G_r = log gamma_r
    steps = torch.arange(size, device=q.device)
    causal = steps[:, None] >= steps[None, :]  # (C, C): i <= r
    gaps = (g[..., :, None] - g[..., None, :]).masked_fill(~causal, float("-inf"))
    decay = torch.exp(gaps)  # Gamma_ri in [0, 1] for i <= r, 0 above
    below = steps[:, None] > steps[None, :]  # i < r
    a = (beta[..., :, None] * (k @ k.mT) * decay).masked_fill(~below, 0.0)  # A = tril(diag(beta) (K K^T * Gamma), -1)
    system = torch.eye(size, dtype=q.dtype, device=q.device) + a  # I + A, unit lower triangular
    gamma = torch.exp(g)
    rhs = torch.cat([beta[..., None] * v, (beta * gamma)[..., None] * k], dim=-1)  # (..., m, C, d_v + d_k)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # U and W together
    d_v = v.shape[-1]
    u, w = solved[..., :d_v], solved[..., d_v:]
    within = (q @ k.mT) * decay  # q_r . k_i * gamma_r / gamma_i, i <= r
    k_to_end = torch.exp(g[..., -1:] - g)[..., None] * k  # k_i * gamma_C / gamma_i
    return u, w, within, gamma[..., None] * q, k_to_end, gamma[..., -1]
