"""The delta rule: linear attention whose state is a key-value memory that erases before it writes (chapter 19).

Chapter 10's causal linear attention keeps a state ``S_t = S_{t-1} + k_t v_t^T``
of size ``d_k x d_v`` and reads it with ``o_t = S_t^T q_t``: it only ever adds,
so writing a second value under the same key leaves the sum of both.  The
delta rule (Widrow and Hoff's learning rule, used as the fast-weight update of
DeltaNet by Schlag, Irie and Schmidhuber, 2021, "Linear Transformers Are
Secretly Fast Weight Programmers"; the chunkwise parallel form is Yang et al.,
2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence
Length") first asks the memory what it holds under ``k_t`` and moves that
answer towards ``v_t`` (a fraction ``beta_t`` of the way for a unit key); Gated
DeltaNet (Yang, Kautz, Hatamizadeh, 2025) multiplies the old state by a gate
``alpha_t`` first, so old memories fade::

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T      S: (d_k, d_v)
    o_t = S_t^T q_t                                                     o: (d_v,)

Multiplied out, this is "erase, then write"::

    S_t = alpha_t S_{t-1} - beta_t k_t (alpha_t k_t^T S_{t-1} - v_t^T)
        = alpha_t S_{t-1} + beta_t k_t (v_t - v_old_t)^T,      v_old_t = (alpha_t S_{t-1})^T k_t

``v_old_t`` is what the (gated) memory returns for the key ``k_t``; for a unit
key the update moves that answer a fraction ``beta_t`` of the way to ``v_t``.  With a unit key
and ``beta_t = 1`` the memory then returns exactly ``v_t`` for ``k_t``, and keys
orthogonal to ``k_t`` are untouched: orthonormal keys make an exact key-value
memory.  ``alpha_t = 1`` (the default) is DeltaNet; ``alpha_t < 1`` forgets.

Conventions: those of flash-linear-attention (``fla/ops/gated_delta_rule/naive.py``),
the papers' own kernels:

* the state is ``d_k x d_v`` and read as ``S^T q`` (the papers write its
  transpose, ``S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T``, ``o_t = S_t q_t``);
* the gate multiplies the old state before the erase, so the erase uses the
  decayed memory (fla passes ``g = log alpha``);
* keys and queries are used as given: fla's layers L2-normalise them before
  the kernel, which this function leaves to its caller.  It matters:
  ``I - beta k k^T`` multiplies the part of the state along ``k`` by
  ``1 - beta |k|^2``, so with ``beta |k|^2 > 2`` rewriting one key makes the
  memory grow without bound instead of overwriting it;
* no ``1/sqrt(d_k)``: the papers' formulas have none.  fla's kernels multiply
  the queries by ``scale = d_k ** -0.5`` by default, which scales every output
  by that constant and leaves the state alone: their output is
  ``delta_rule(q * d_k ** -0.5, k, v, beta, ...)[0]``.

:func:`delta_rule` is the recurrence, one step at a time.  :func:`chunked_delta_rule`
computes the same outputs and final state in a few large matrix products per
chunk of ``chunk_size`` steps (the WY/UT representation, below): machinery for
speed, in its own section.

The input checks are small functions on shapes here; the torch twin
(``attnlib.torch.delta``) calls the same ones, so both backends raise the same
errors with the same messages.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float_arrays

# --------------------------------------------------------------------------- shared checks (both backends)


def _check_shapes(q_shape: tuple, k_shape: tuple, v_shape: tuple, beta_shape: tuple,
                  alpha_shape: tuple | None, state_shape: tuple | None) -> tuple:
    """q, k ``(..., n, d_k)``, v ``(..., n, d_v)``, beta and alpha ``(..., n)``, state ``(..., d_k, d_v)``.

    Returns the broadcast batch shape of all of them.
    """
    _checks.check_qkv(q_shape, k_shape, v_shape)
    if q_shape[-2] != k_shape[-2]:
        raise ValueError(f"delta 规则每一步读一个查询、写一个键：q 与 k 的长度 n 必须相同 (one query per key)，"
                         f"收到 q.shape={q_shape}，k.shape={k_shape}。")
    n, d_k, d_v = k_shape[-2], k_shape[-1], v_shape[-1]
    full = {"q": q_shape, "k": k_shape, "v": v_shape}  # the shapes, for the messages
    batches = [q_shape[:-2], k_shape[:-2], v_shape[:-2]]
    for name, shape in (("beta", beta_shape), ("alpha", alpha_shape)):
        if shape is None:
            continue
        if len(shape) < 1 or shape[-1] != n:
            raise ValueError(f"{name} 的形状应为 (..., n) = (..., {n})，每一步一个数，收到 {name}.shape={shape} "
                             f"(expected one {name} per step)；常数可以写成 np.full(n, 值)。")
        full[name], batches = shape, batches + [shape[:-1]]
    if state_shape is not None:
        if len(state_shape) < 2 or tuple(state_shape[-2:]) != (d_k, d_v):
            raise ValueError(f"initial_state 的形状应为 (..., d_k, d_v) = (..., {d_k}, {d_v})，"
                             f"收到 initial_state.shape={state_shape} (state shape mismatch)。")
        full["initial_state"], batches = state_shape, batches + [state_shape[:-2]]
    try:
        return _checks.broadcast_shapes(*batches)
    except ValueError:
        listing = ", ".join(f"{n}.shape={s}" for n, s in full.items())
        raise ValueError(f"前导的批量/头维度无法广播 (batch dimensions do not broadcast): {listing}") from None


#: The inputs of both functions, in the order of their signatures.
INPUTS = ("q", "k", "v", "beta", "alpha", "initial_state")


def _given(q, k, v, beta, alpha, initial_state) -> dict:
    """The inputs by name, the optional ones only when given."""
    optional = {"alpha": alpha, "initial_state": initial_state}
    return {"q": q, "k": k, "v": v, "beta": beta, **{name: x for name, x in optional.items() if x is not None}}


def _check_gate(low: float, high: float) -> None:
    """``alpha`` keeps a fraction of the old state: every entry in ``(0, 1]``.

    0 is refused because the chunked form works with ``log alpha``; above 1 the
    state grows geometrically instead of fading (no layer's gate does that).
    """
    if not (low > 0 and high <= 1):
        raise ValueError(f"alpha 是遗忘门，表示旧状态保留的比例，每个值都必须在 (0, 1] 之内 "
                         f"(alpha must be in (0, 1])，收到的最小值 {low!r}、最大值 {high!r}。")


def _check_chunk_size(chunk_size) -> int:
    return _checks.check_count("chunk_size", chunk_size)


# --------------------------------------------------------------------------- the recurrence


def delta_rule(q, k, v, beta, *, alpha=None, initial_state=None):
    """The (gated) delta rule, one step at a time.

    ``S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T`` and
    ``o_t = S_t^T q_t``, computed as erase-then-write (module docstring).

    Parameters
    ----------
    q : array_like of float, shape (..., n, d_k)
        Queries, used as given (no ``1/sqrt(d_k)``).
    k : array_like of float, shape (..., n, d_k)
        Keys, used as given (not normalised here).
    v : array_like of float, shape (..., n, d_v)
    beta : array_like of float, shape (..., n)
        Writing strength of each step, not checked: DeltaNet's layers take a sigmoid, in (0, 1);
        for unit keys any beta in (0, 2) keeps the erase from amplifying the state.
    alpha : array_like of float, shape (..., n), optional
        Gate: the fraction of the old state kept at each step, in (0, 1]; ``None`` means 1 (DeltaNet).
    initial_state : array_like of float, shape (..., d_k, d_v), optional
        ``S_0``; zeros when ``None``.

    Returns
    -------
    out : ndarray, shape (..., n, d_v)
        ``o_t`` for every step.
    state : ndarray, shape (..., d_k, d_v)
        ``S_n``, the state after the last step.

    The leading dimensions of all inputs broadcast; every input shares one float dtype.
    """
    q, k, v, beta, alpha, state = _as_inputs(q, k, v, beta, alpha, initial_state)
    out = np.empty(state.shape[:-2] + (q.shape[-2], v.shape[-1]), dtype=q.dtype)  # (..., n, d_v)
    for t in range(q.shape[-2]):
        q_t, k_t, v_t = q[..., t, None, :], k[..., t, None, :], v[..., t, None, :]  # (..., 1, d) rows
        state = alpha[..., t, None, None] * state  # alpha_t S_{t-1}: the gate fades the old memory
        v_old = k_t @ state  # (..., 1, d_v): (alpha_t S_{t-1})^T k_t, what the memory holds under k_t
        state = state + beta[..., t, None, None] * (np.swapaxes(k_t, -1, -2) @ (v_t - v_old))  # erase, then write
        out[..., t, :] = (q_t @ state)[..., 0, :]  # o_t = S_t^T q_t
    return out, state


def _as_inputs(q, k, v, beta, alpha, initial_state):
    """Checked float arrays with the batch broadcast; ``alpha`` of ones and a zero state when not given."""
    named = _given(q, k, v, beta, alpha, initial_state)
    a = dict(zip(named, as_float_arrays(**named), strict=True))
    shapes = {name: x.shape for name, x in a.items()}
    batch = _check_shapes(*(shapes.get(name) for name in INPUTS))
    n, d_k, d_v = shapes["q"][-2], shapes["q"][-1], shapes["v"][-1]
    q, k, v = (np.broadcast_to(a[name], batch + shapes[name][-2:]) for name in ("q", "k", "v"))  # read-only views
    beta = np.broadcast_to(a["beta"], batch + (n,))
    if "alpha" in a:
        if a["alpha"].size:
            _check_gate(float(a["alpha"].min()), float(a["alpha"].max()))
        alpha = np.broadcast_to(a["alpha"], batch + (n,))
    else:
        alpha = np.ones(batch + (n,), dtype=q.dtype)
    if "initial_state" in a:
        state = np.broadcast_to(a["initial_state"], batch + (d_k, d_v))
    else:
        state = np.zeros(batch + (d_k, d_v), dtype=q.dtype)
    return q, k, v, beta, alpha, state


# --------------------------------------------------------------------------- the chunked form (speed machinery)
#
# Inside a chunk of C steps starting from the state S (the state before the chunk), write
# gamma_r = alpha_1 ... alpha_r (the gate accumulated up to step r of the chunk, from the
# cumulative sum of log alpha) and unroll the erase-then-write form S_r = alpha_r S_{r-1} + k_r d_r^T:
#
#     S_r = gamma_r S + sum_{i <= r} (gamma_r / gamma_i) k_i d_i^T
#     d_r = beta_r (v_r - gamma_r S^T k_r - sum_{i < r} (gamma_r / gamma_i) (k_r . k_i) d_i)
#
# so the C corrections d_r solve one unit lower-triangular system per chunk (the UT transform),
# inverted once per chunk (:func:`unit_lower_inverse`) and applied to both right-hand sides:
#
#     (I + A) D = diag(beta) V - diag(beta gamma) K S,   A = tril(diag(beta) (K K^T * Gamma), -1)
#     D = U - W S,   U = (I + A)^{-1} diag(beta) V,   W = (I + A)^{-1} diag(beta gamma) K
#
# with Gamma_ri = gamma_r / gamma_i = exp(G_r - G_i).  U and W depend on the chunk alone, so every
# chunk's are computed at once; only D = U - W S waits for the state.  Then
#
#     O     = diag(gamma) Q S + (Q K^T * Gamma * causal) D      the chunk's outputs
#     S_new = gamma_C S + (diag(gamma_C / gamma) K)^T D        the state handed to the next chunk
#
# which is fla's naive_chunk_gated_delta_rule and, with alpha = 1, DeltaNet's appendix B.
# Only ratios gamma_r / gamma_i with i <= r are formed, as exp(G_r - G_i) (never a division by a
# small gamma), so every factor lies in [0, 1] and a gate that underflows to 0 gives no NaN.
# A last chunk shorter than C is padded with steps that change nothing (k = v = q = 0,
# beta = 0, alpha = 1) and their outputs dropped.


def chunked_delta_rule(q, k, v, beta, *, alpha=None, initial_state=None, chunk_size=64):
    """:func:`delta_rule` computed chunk by chunk: parallel inside each chunk, the state carried between them.

    Same parameters and results as :func:`delta_rule` (equal up to rounding), plus

    chunk_size : int >= 1
        Steps per chunk.  The last chunk may be shorter; ``chunk_size >= n`` is one chunk,
        ``chunk_size = 1`` is the recurrence again.

    The work is O(n C (C + d_k + d_v) + n d_k d_v) in matrix products, one C x C
    triangular inverse per chunk among them; only ``ceil(n / C)`` steps are sequential.
    """
    q, k, v, beta, alpha, state = _as_inputs(q, k, v, beta, alpha, initial_state)
    size = _check_chunk_size(chunk_size)
    n = q.shape[-2]
    q, k, v = _chunks(size, q, k, v, step_axis=-2)  # (..., m, C, d)
    beta, log_alpha = _chunks(size, beta, np.log(alpha), step_axis=-1)  # (..., m, C)
    u, w, within, q_gated, k_to_end, gamma_end = _chunk_parts(q, k, v, beta, log_alpha)
    outs = []
    for c in range(q.shape[-3]):  # the only sequential loop: ceil(n / C) steps
        d = u[..., c, :, :] - w[..., c, :, :] @ state  # (..., C, d_v): the chunk's corrections D = U - W S
        outs.append(q_gated[..., c, :, :] @ state + within[..., c, :, :] @ d)  # (..., C, d_v)
        state = gamma_end[..., c, None, None] * state + np.swapaxes(k_to_end[..., c, :, :], -1, -2) @ d
    out = np.concatenate(outs, axis=-2) if outs else np.empty(state.shape[:-2] + (0, v.shape[-1]), q.dtype)
    return out[..., :n, :], state


def _chunks(size: int, *arrays: np.ndarray, step_axis: int) -> list[np.ndarray]:
    """Cut ``step_axis`` (length n) into ceil(n / C) chunks of ``size``: ``(..., n, ...)`` -> ``(..., m, C, ...)``.

    The last chunk is padded with zeros: a step with zero key, value, query and beta, and
    ``log alpha = 0``, changes nothing (its output is dropped).
    """
    n = arrays[0].shape[step_axis]
    m = -(-n // size)  # ceil(n / C)
    out = []
    for a in arrays:
        axis = step_axis % a.ndim
        pad = [(0, 0)] * a.ndim
        pad[axis] = (0, m * size - n)
        out.append(np.pad(a, pad).reshape(a.shape[:axis] + (m, size) + a.shape[axis + 1:]))
    return out


def _chunk_parts(q, k, v, beta, log_alpha):
    """Everything a chunk needs that does not depend on the state, for every chunk at once.

    Returns U ``(..., m, C, d_v)``, W ``(..., m, C, d_k)``, the causal in-chunk read
    ``Q K^T * Gamma`` ``(..., m, C, C)``, ``diag(gamma) Q`` ``(..., m, C, d_k)``,
    ``diag(gamma_C / gamma) K`` ``(..., m, C, d_k)`` and ``gamma_C`` ``(..., m)``.
    """
    size = q.shape[-2]
    g = np.cumsum(log_alpha, axis=-1)  # (..., m, C): G_r = log gamma_r
    causal = np.tril(np.ones((size, size), dtype=bool))  # i <= r
    gaps = np.where(causal, g[..., :, None] - g[..., None, :], -np.inf)  # G_r - G_i, -inf above the diagonal
    decay = np.exp(gaps)  # (..., m, C, C): Gamma_ri in (0, 1] for i <= r, 0 above
    keys = k @ np.swapaxes(k, -1, -2)  # (..., m, C, C): k_r . k_i
    a = np.tril(beta[..., :, None] * keys * decay, -1)  # A = tril(diag(beta) (K K^T * Gamma), -1)
    t = unit_lower_inverse(a)  # (I + A)^{-1}: (..., m, C, C)
    gamma = np.exp(g)  # (..., m, C)
    u = t @ (beta[..., None] * v)  # (..., m, C, d_v): U = (I + A)^{-1} diag(beta) V
    w = t @ ((beta * gamma)[..., None] * k)  # (..., m, C, d_k): W = (I + A)^{-1} diag(beta gamma) K
    within = (q @ np.swapaxes(k, -1, -2)) * decay  # (..., m, C, C): q_r . k_i * gamma_r / gamma_i, i <= r
    k_to_end = np.exp(g[..., -1:] - g)[..., None] * k  # (..., m, C, d_k): k_i * gamma_C / gamma_i
    return u, w, within, gamma[..., None] * q, k_to_end, gamma[..., -1]


def unit_lower_inverse(a: np.ndarray) -> np.ndarray:
    """``(I + a)^{-1}`` for strictly lower-triangular ``a`` ``(..., C, C)``, by doubling the inverted blocks.

    A unit lower-triangular matrix split in halves inverts as::

        [[I + a11, 0], [a21, I + a22]]^{-1} = [[T1, 0], [-T2 a21 T1, T2]],   T1 = (I + a11)^{-1}, T2 = (I + a22)^{-1}

    so starting from the 1 x 1 diagonal blocks (whose inverse is 1), log2(C) levels of
    batched products give the whole inverse.  NumPy has no batched triangular solve:
    ``np.linalg.solve`` factors each chunk's matrix as a general one, LU with pivoting
    (``make bench BENCH=delta`` times the two).  C is padded to a power of two with
    zero rows, whose inverse block is the identity.
    """
    size = a.shape[-1]
    full = 1 << max(size - 1, 0).bit_length()  # the next power of two >= C
    a = np.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, full - size)] * 2)
    t = np.ones(a.shape[:-2] + (full, 1, 1), dtype=a.dtype)  # (..., blocks, s, s): inverses of the diagonal blocks
    s = 1
    while s < full:
        pairs = full // (2 * s)
        blocks = a.reshape(a.shape[:-2] + (pairs, 2 * s, pairs, 2 * s))
        blocks = np.moveaxis(np.diagonal(blocks, axis1=-4, axis2=-2), -1, -3)  # (..., pairs, 2s, 2s) of a
        t1, t2 = t[..., 0::2, :, :], t[..., 1::2, :, :]  # the two halves' inverses of each pair: (..., pairs, s, s)
        t = np.zeros(a.shape[:-2] + (pairs, 2 * s, 2 * s), dtype=a.dtype)
        t[..., :s, :s], t[..., s:, s:] = t1, t2
        t[..., s:, :s] = -(t2 @ blocks[..., s:, :s]) @ t1  # -T2 a21 T1
        s *= 2
    return t[..., 0, :size, :size]
