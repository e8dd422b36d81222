"""FlashAttention-2 as Triton kernels, forward and backward (chapter 18), torch tensors on CUDA or CPU.

The same algorithm as :mod:`attnlib.torch.flash`, written as three GPU kernels
in Triton's block language instead of Python loops over blocks:

- ``_flash_forward``: one program per (query block, batch·head).  The query
  block stays loaded while the loop walks over the key blocks, keeping the
  online softmax's running maximum ``m``, running sum ``l`` and weighted sum
  ``acc``; it writes the output and each row's ``lse = m + log l``.
  FlashAttention-2's loop order: query blocks outside (one per program, in
  parallel), key blocks inside.
- ``_flash_backward_dkdv``: one program per (key block, batch·head), looping
  over the query blocks that see it; each block of weights is recomputed from
  lse, ``P = exp(S - lse)``, and dK, dV are summed in the program.
- ``_flash_backward_dq``: one program per (query block, batch·head), looping
  over the key blocks, as the forward does.  Two kernels instead of one, so no
  two programs ever add into the same rows of dQ (no atomics).
  ``D = rowsum(dO * O)``, the only other row statistic, comes first from
  ``_flash_backward_preprocess``.

Scale 1/√d_k; causal is aligned bottom-right (query i sees keys
``j <= i + n_k - n_q``), a row that sees no key gets a zero output and
``lse = -inf``, never NaN.  Lengths and widths need not be multiples of the
blocks: loads outside the tensors are masked and read as zeros.

Compiled or interpreted.  On CUDA, Triton compiles the kernels.  CPU tensors
need Triton's interpreter (numpy executing each program in turn), which is what
lets this module be tested without a GPU.  The switch, ``TRITON_INTERPRET=1``,
is read once, when ``triton`` is imported (Triton's own helpers such as
``tl.zeros`` are kernels too), and then holds for every kernel of the process,
CUDA tensors included (the interpreter copies them to the host and back).
So this module decides at its import:

- ``TRITON_INTERPRET`` already set, or ``triton`` already imported: it is
  left alone;
- otherwise, on a machine without CUDA (where nothing could run compiled), it
  sets ``TRITON_INTERPRET=1`` before importing ``triton``.

A CPU tensor in a process whose Triton compiles (a CUDA machine, or triton
imported earlier without the switch) raises a ``RuntimeError`` saying to set
``TRITON_INTERPRET=1`` before triton is imported.  :data:`INTERPRETED` tells
which of the two this process has.

Triton is a separate install (``pip install triton==3.9.0``, in
requirements.txt), imported here and nowhere else in attnlib: ``import
attnlib.torch`` never needs it, and this module is not exported there (it has
no NumPy twin).  The interpreter is slow: small sizes only on a CPU.
"""

from __future__ import annotations

import math
import os
import sys

import torch
from torch.autograd.function import once_differentiable

from .. import _checks
from ._tensors import as_float_tensors

TRITON_VERSION = "3.9.0"  # the version requirements.txt pins

if "triton" not in sys.modules and "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    # Nothing could run compiled here, so interpreting every kernel loses nothing.  Triton reads the switch
    # when it is imported (its own helpers such as tl.zeros are kernels too), so it is set before that.
    os.environ["TRITON_INTERPRET"] = "1"

try:
    import triton
    import triton.language as tl
except ImportError as error:  # pragma: no cover - exercised in a process without triton
    raise ImportError(f"attnlib.torch.triton_flash 需要 Triton (Triton is not installed)：请先运行 "
                      f"pip install triton=={TRITON_VERSION}（make test 的环境已经包含它）。") from error

#: Whether this process's Triton interprets its kernels (TRITON_INTERPRET=1 when triton was imported).
INTERPRETED = not isinstance(tl.zeros, triton.JITFunction)

#: Rows and keys per block on a GPU, by the inputs' bytes per number.  Each kernel's shared memory then
#: (Triton 3.9, compiled for sm_90 without a GPU): at most 64 KiB in float16 and 100 KiB in float32 with
#: d = 128, 105 KiB in float64 with d = 64; an A100 allows 163 KiB per block, an H100 227 KiB.
GPU_BLOCK = {2: 64, 4: 32, 8: 32}
#: On the CPU interpreter, small blocks: small tests then still cross several blocks and a partial last one.
CPU_BLOCK = 16
#: Launch options.  Fused multiply-adds, Triton's default, said explicitly: Triton 3.9 warns when it is left unset.
OPTIONS = {"enable_fp_fusion": True}


def triton_flash_attention(q, k, v, *, causal=False, return_lse=False):
    """Exact attention by the FlashAttention-2 Triton kernels; gradients by the Triton backward kernels.

    Parameters
    ----------
    q : torch.Tensor, shape (..., n_q, d_k)
    k : torch.Tensor, shape (..., n_k, d_k)
    v : torch.Tensor, shape (..., n_k, d_v)
        One float dtype (float16, bfloat16, float32 or float64) and one device; the batch
        dimensions ``...`` broadcast.  CUDA tensors run compiled, CPU tensors under
        Triton's interpreter (``TRITON_INTERPRET=1``; see the module docstring).
    causal : bool
        Apply the causal mask aligned bottom-right (the last query sees every key).
    return_lse : bool
        Also return each row's log-sum-exp of the scaled scores.

    Returns
    -------
    out : torch.Tensor, shape (..., n_q, d_v)
        ``softmax(q kᵀ / √d_k) v``; a row that sees no key is 0.
    lse : torch.Tensor, shape (..., n_q), only with ``return_lse=True``
        ``log Σ_j exp(s_ij)`` over the visible keys, ``-inf`` on a row that sees none; float64 for
        float64 inputs, float32 otherwise (the kernels' accumulators).
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    check_dtype(q.dtype)
    out, lse = TritonFlashFunction.apply(q, k, v, bool(causal), batch)
    return (out, lse) if return_lse else out


def check_dtype(dtype) -> None:
    """The kernels' ``tl.dot`` takes float16, bfloat16, float32 and float64; the interpreter (numpy) no bfloat16."""
    if dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"triton_flash_attention 只支持 float16、bfloat16、float32 与 float64 "
                        f"(unsupported dtype)；收到 dtype={dtype}。")
    if dtype == torch.bfloat16 and INTERPRETED:
        raise TypeError("Triton 的解释器（TRITON_INTERPRET=1）算不对 bfloat16 (no bfloat16 in the interpreter)："
                        "请改用 float16、float32 或 float64，或在 CUDA 上编译运行。")


class TritonFlashFunction(torch.autograd.Function):
    """The kernels as an autograd Function: saves q, k, v, out and lse (never the weights)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, batch):
        shapes = (q.shape, k.shape, v.shape)
        q3, k3, v3 = (flat(t, batch) for t in (q, k, v))  # (B, n, d) contiguous, B = prod(batch)
        out, lse = forward(q3, k3, v3, causal)
        ctx.save_for_backward(q3, k3, v3, out, lse)
        ctx.causal, ctx.batch, ctx.shapes = causal, batch, shapes
        ctx.set_materialize_grads(False)  # None, not zeros, for an unused output (lse, most of the time)
        return out.reshape(batch + out.shape[-2:]), lse.reshape(batch + lse.shape[-1:])

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_lse):
        q3, k3, v3, out, lse = ctx.saved_tensors
        d_out = torch.zeros_like(out) if d_out is None else flat(d_out, ctx.batch)  # None: only lse was used
        d_lse = None if d_lse is None else d_lse.reshape(lse.shape)
        dq, dk, dv = backward(q3, k3, v3, out, lse, d_out, d_lse, ctx.causal)
        # Broadcast inputs get the sum of their batch copies' gradients.
        grads = [g.reshape(ctx.batch + g.shape[-2:]).sum_to_size(shape)
                 for g, shape in zip((dq, dk, dv), ctx.shapes, strict=True)]
        return (*grads, None, None)


def flat(t: torch.Tensor, batch: tuple) -> torch.Tensor:
    """``(..., n, d)`` broadcast to ``batch`` and flattened to a contiguous ``(B, n, d)``: the kernels' layout."""
    return t.expand(batch + t.shape[-2:]).reshape(math.prod(batch), *t.shape[-2:]).contiguous()


def forward(q, k, v, causal: bool):
    """Launch the forward kernel on ``(B, n, d)`` tensors: ``(out (B, n_q, d_v), lse (B, n_q))``."""
    (b, n_q, d_k), (n_k, d_v) = q.shape, v.shape[-2:]
    out = torch.zeros(b, n_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.full((b, n_q), -math.inf, dtype=accumulator_dtype(q.dtype), device=q.device)
    if out.numel() == 0 or n_k == 0:  # nothing to launch: no rows, or rows that see no key (zeros, -inf)
        return out, lse
    meta = launch_constants(q.device, q.dtype, d_k, d_v)
    grid = (b, triton.cdiv(n_q, meta["BLOCK_M"]))  # one program per (batch·head, query block)
    _flash_forward[grid](q, k, v, out, lse, n_q, n_k, d_k, d_v, 1.0 / math.sqrt(d_k), CAUSAL=causal,
                         ACC=tl.float64 if lse.dtype == torch.float64 else tl.float32, **meta, **OPTIONS)
    return out, lse


def backward(q, k, v, out, lse, d_out, d_lse, causal: bool):
    """Launch the backward kernels on ``(B, n, d)`` tensors: ``(dq, dk, dv)``, shaped like q, k, v.

    ``d_lse`` (B, n_q) or None: a gradient arriving at lse; since ``d lse_i / d s_ij = P_ij`` it
    only changes each row's ``D`` to ``D - d_lse``.
    """
    (b, n_q, d_k), (n_k, d_v) = q.shape, v.shape[-2:]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if dq.numel() == 0 or n_k == 0:  # no rows, or no key: nothing flows back
        return dq, dk, dv
    meta = launch_constants(q.device, q.dtype, d_k, d_v)
    d_out = d_out.contiguous()
    delta = torch.empty_like(lse)  # D = rowsum(dO ∘ O): (B, n_q)
    query_blocks, key_blocks = (b, triton.cdiv(n_q, meta["BLOCK_M"])), (b, triton.cdiv(n_k, meta["BLOCK_N"]))
    _flash_backward_preprocess[query_blocks](out, d_out, delta, n_q, d_v, BLOCK_M=meta["BLOCK_M"],
                                             BLOCK_DV=meta["BLOCK_DV"], **OPTIONS)
    if d_lse is not None:
        delta -= d_lse
    args = (q, k, v, d_out, lse, delta)
    sizes = (n_q, n_k, d_k, d_v, 1.0 / math.sqrt(d_k))
    _flash_backward_dkdv[key_blocks](*args, dk, dv, *sizes, CAUSAL=causal, **meta, **OPTIONS)
    _flash_backward_dq[query_blocks](*args, dq, *sizes, CAUSAL=causal, **meta, **OPTIONS)
    return dq, dk, dv


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """The kernels sum in float64 for float64 inputs and in float32 otherwise (lse has this dtype)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def launch_constants(device: torch.device, dtype: torch.dtype, d_k: int, d_v: int) -> dict:
    """The kernels' compile-time constants: block sizes, block widths and the products' precision.

    Widths: the head dimensions rounded up to a power of two (``tl.arange``), at least 16
    (``tl.dot``); the extra columns are masked.  ``PRECISION``: float32 products in full precision
    ("ieee", as torch's matmul, not TF32), so the kernels agree with attnlib to float32's rounding;
    half precision keeps Triton's default, the tensor cores.
    """
    block = block_size(device, dtype)
    return dict(BLOCK_M=block, BLOCK_N=block, BLOCK_DK=max(16, triton.next_power_of_2(d_k)),
                BLOCK_DV=max(16, triton.next_power_of_2(d_v)),
                PRECISION="ieee" if dtype in (torch.float32, torch.float64) else "tf32")


def block_size(device: torch.device, dtype: torch.dtype) -> int:
    """The block size for tensors on ``device``, after checking that this process's Triton can run them there."""
    if INTERPRETED:
        return CPU_BLOCK  # every kernel runs in the interpreter, which copies CUDA tensors to the host and back
    if device.type == "cpu":
        raise RuntimeError("CPU 张量需要 Triton 的解释器 (CPU tensors need the Triton interpreter)：请在导入 triton "
                           "之前设置环境变量 TRITON_INTERPRET=1（例如 TRITON_INTERPRET=1 python ...），"
                           "或把张量移到 CUDA 设备上。")
    return GPU_BLOCK[dtype.itemsize]


@triton.jit
def _load_rows(X, rows, n, d, BLOCK_D: tl.constexpr):
    """Rows ``rows`` (R,) of a row-major (n, d) matrix as an (R, BLOCK_D) tile; zeros outside the matrix."""
    cols = tl.arange(0, BLOCK_D)
    return tl.load(X + rows[:, None] * d + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < d), other=0.0)


@triton.jit
def _store_rows(X, rows, n, d, tile, BLOCK_D: tl.constexpr):
    """Write an (R, BLOCK_D) tile into rows ``rows`` of a row-major (n, d) matrix, nothing outside it."""
    cols = tl.arange(0, BLOCK_D)
    tl.store(X + rows[:, None] * d + cols[None, :], tile.to(X.dtype.element_ty),
             mask=(rows[:, None] < n) & (cols[None, :] < d))


@triton.jit
def _visible(rows, cols, n_q, n_k, CAUSAL: tl.constexpr):
    """(M, N) booleans: which (query, key) pairs of a block are real and not hidden by causality."""
    visible = (rows[:, None] < n_q) & (cols[None, :] < n_k)
    if CAUSAL:  # bottom-right aligned: query i sees keys j <= i + n_k - n_q
        visible = visible & (cols[None, :] <= rows[:, None] + (n_k - n_q))
    return visible


@triton.jit
def _causal_stop(block, n_k, n_q, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """The end of the keys a query block may see: keys right of its last row's last visible key are hidden."""
    stop = n_k
    if CAUSAL:  # bottom-right: the last row of the block sees keys up to (block + 1) * BLOCK_M - 1 + n_k - n_q
        stop = tl.minimum(n_k, (block + 1) * BLOCK_M + n_k - n_q)
    return stop


@triton.jit
def _flash_forward(Q, K, V, OUT, LSE, n_q, n_k, d_k, d_v, scale, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr, ACC: tl.constexpr,
                   PRECISION: tl.constexpr):
    """One query block of one batch·head against every key block it may see (FlashAttention-2, Algorithm 1)."""
    bh, block = tl.program_id(0).to(tl.int64), tl.program_id(1)  # grid (B, blocks); int64: B·n·d may pass 2³¹
    Q, K, V = Q + bh * n_q * d_k, K + bh * n_k * d_k, V + bh * n_k * d_v  # this batch·head's matrices
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (M,) query positions
    q = _load_rows(Q, rows, n_q, d_k, BLOCK_DK)  # (M, DK): stays loaded while the keys stream past
    m = tl.full([BLOCK_M], float("-inf"), ACC)  # running maximum of each row's scores
    denom = tl.zeros([BLOCK_M], ACC)  # running sum of exp(s - m)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], ACC)  # running sum of exp(s - m) v
    for start in range(0, _causal_stop(block, n_k, n_q, BLOCK_M, CAUSAL), BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)  # (N,) key positions
        k = _load_rows(K, cols, n_k, d_k, BLOCK_DK)  # (N, DK)
        v = _load_rows(V, cols, n_k, d_v, BLOCK_DV)  # (N, DV)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION).to(ACC) * scale  # (M, N) scaled scores
        s = tl.where(_visible(rows, cols, n_q, n_k, CAUSAL), s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))  # (M,)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen no key yet: exp(-inf) = 0
        p = tl.exp(s - shift[:, None])  # (M, N) unnormalised weights
        alpha = tl.exp(m - shift)  # (M,) rescales what was summed against the old maximum
        denom = denom * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION).to(ACC)
        m = m_new
    # A row that saw no key has acc = 0, denom = 0 and m = -inf: output 0 and lse = -inf (log 0 never taken).
    seen = denom > 0
    denom = tl.where(seen, denom, 1.0)
    _store_rows(OUT + bh * n_q * d_v, rows, n_q, d_v, acc / denom[:, None], BLOCK_DV)
    tl.store(LSE + bh * n_q + rows, tl.where(seen, m + tl.log(denom), float("-inf")), mask=rows < n_q)


@triton.jit
def _flash_backward_preprocess(OUT, DO, DELTA, n_q, d_v, BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr):
    """D = rowsum(dO ∘ O) for one block of rows: the row statistic that dS = P ∘ (dP − D) needs."""
    bh, block = tl.program_id(0).to(tl.int64), tl.program_id(1)  # grid (B, blocks); int64: B·n·d may pass 2³¹
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    o = _load_rows(OUT + bh * n_q * d_v, rows, n_q, d_v, BLOCK_DV).to(DELTA.dtype.element_ty)  # (M, DV)
    do = _load_rows(DO + bh * n_q * d_v, rows, n_q, d_v, BLOCK_DV).to(DELTA.dtype.element_ty)  # (M, DV)
    tl.store(DELTA + bh * n_q + rows, tl.sum(o * do, 1), mask=rows < n_q)


@triton.jit
def _recompute_weights(q, k, lse_rows, rows, cols, n_q, n_k, scale, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """A block's weights P = exp(S − lse) (M, N), recomputed from lse; 0 where the pair is hidden or padding."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION).to(lse_rows.dtype) * scale  # (M, N)
    s = tl.where(_visible(rows, cols, n_q, n_k, CAUSAL), s, float("-inf"))  # hidden first: no exp can overflow
    shift = tl.where(lse_rows == float("-inf"), 0.0, lse_rows)  # a row that sees no key has no weights
    return tl.exp(s - shift[:, None])


@triton.jit
def _flash_backward_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, n_q, n_k, d_k, d_v, scale, CAUSAL: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DK: tl.constexpr,
                         BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    """dK and dV of one key block: key blocks outside (one per program), query blocks inside (FA-2, Algorithm 2)."""
    bh, block = tl.program_id(0).to(tl.int64), tl.program_id(1)  # grid (B, blocks); int64: B·n·d may pass 2³¹
    Q, DO, LSE, DELTA = Q + bh * n_q * d_k, DO + bh * n_q * d_v, LSE + bh * n_q, DELTA + bh * n_q
    cols = block * BLOCK_N + tl.arange(0, BLOCK_N)  # (N,) key positions
    k = _load_rows(K + bh * n_k * d_k, cols, n_k, d_k, BLOCK_DK)  # (N, DK): stays loaded
    v = _load_rows(V + bh * n_k * d_v, cols, n_k, d_v, BLOCK_DV)  # (N, DV): stays loaded
    dk = tl.zeros([BLOCK_N, BLOCK_DK], LSE.dtype.element_ty)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], LSE.dtype.element_ty)
    first = 0
    if CAUSAL:  # the first query row that sees this block's first key, down to its block's start
        first = tl.maximum(0, block * BLOCK_N - (n_k - n_q)) // BLOCK_M * BLOCK_M
    for r0 in range(first, n_q, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)  # (M,) query positions
        q = _load_rows(Q, rows, n_q, d_k, BLOCK_DK)  # (M, DK)
        do = _load_rows(DO, rows, n_q, d_v, BLOCK_DV)  # (M, DV)
        lse_rows = tl.load(LSE + rows, mask=rows < n_q, other=0.0)  # (M,)
        delta = tl.load(DELTA + rows, mask=rows < n_q, other=0.0)  # (M,)
        p = _recompute_weights(q, k, lse_rows, rows, cols, n_q, n_k, scale, CAUSAL, PRECISION)  # (M, N)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION).to(dv.dtype)  # dV = Pᵀ dO
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION).to(p.dtype)  # dP = dO Vᵀ: (M, N)
        ds = p * (dp - delta[:, None])  # dS = P ∘ (dP − D)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION).to(dk.dtype)  # dK = dSᵀ Q / √d_k
    _store_rows(DK + bh * n_k * d_k, cols, n_k, d_k, dk * scale, BLOCK_DK)  # the 1/√d_k once, at the end
    _store_rows(DV + bh * n_k * d_v, cols, n_k, d_v, dv, BLOCK_DV)


@triton.jit
def _flash_backward_dq(Q, K, V, DO, LSE, DELTA, DQ, n_q, n_k, d_k, d_v, scale, CAUSAL: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DK: tl.constexpr,
                       BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    """dQ of one query block, looping over the key blocks it sees as the forward does."""
    bh, block = tl.program_id(0).to(tl.int64), tl.program_id(1)  # grid (B, blocks); int64: B·n·d may pass 2³¹
    K, V = K + bh * n_k * d_k, V + bh * n_k * d_v
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (M,) query positions
    q = _load_rows(Q + bh * n_q * d_k, rows, n_q, d_k, BLOCK_DK)  # (M, DK)
    do = _load_rows(DO + bh * n_q * d_v, rows, n_q, d_v, BLOCK_DV)  # (M, DV)
    lse_rows = tl.load(LSE + bh * n_q + rows, mask=rows < n_q, other=0.0)  # (M,)
    delta = tl.load(DELTA + bh * n_q + rows, mask=rows < n_q, other=0.0)  # (M,)
    dq = tl.zeros([BLOCK_M, BLOCK_DK], LSE.dtype.element_ty)
    for start in range(0, _causal_stop(block, n_k, n_q, BLOCK_M, CAUSAL), BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)  # (N,) key positions
        k = _load_rows(K, cols, n_k, d_k, BLOCK_DK)  # (N, DK)
        v = _load_rows(V, cols, n_k, d_v, BLOCK_DV)  # (N, DV)
        p = _recompute_weights(q, k, lse_rows, rows, cols, n_q, n_k, scale, CAUSAL, PRECISION)  # (M, N)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION).to(p.dtype)  # dP = dO Vᵀ
        ds = p * (dp - delta[:, None])  # dS = P ∘ (dP − D)
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION).to(dq.dtype)  # dQ = dS K / √d_k
    _store_rows(DQ + bh * n_q * d_k, rows, n_q, d_k, dq * scale, BLOCK_DK)
