"""Attention sinks and streaming generation (chapter 22), torch backend.

The same names, signatures and results as ``attnlib.numpy.sinks`` (read that
module for the formulas): attention with a sink logit per head, the
StreamingLLM mask and a rolling key/value cache with sinks.  Dtype and device
come from the inputs; masks are built on the CPU and moved to the inputs'
device by the attention functions.  ``sink_attention`` computes the sink the
way the gpt-oss reference code does: one more column of logits, a softmax
over the row, the column dropped.
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from ..numpy.sinks import (
    _check_queries_fit,
    _check_sink_shape,
    _check_sink_values,
    _check_sink_window,
)
from ._tensors import as_float_tensors, kind
from .attention import combined_mask


def sink_attention(q, k, v, sink_logits, *, mask=None, causal=False):
    """Attention with a sink logit per head in the softmax denominator; see ``attnlib.numpy.sink_attention``.

    Parameters
    ----------
    q : tensor of float, shape (..., n_q, d_k)
    k : tensor of float, shape (..., n_k, d_k)
    v : tensor of float, shape (..., n_k, d_v)
    sink_logits : number or tensor of float, broadcasting to the leading dimensions
        Not scaled by ``1/√d_k``; ``0`` is "softmax plus one", ``-inf`` ordinary attention.
    mask : tensor of bool, optional
        Broadcasts to ``(..., n_q, n_k)``; ``True`` = may attend.
    causal : bool
        Also apply the bottom-right aligned causal mask.

    Returns
    -------
    output : tensor, shape (..., n_q, d_v)
    weights : tensor, shape (..., n_q, n_k)
        ``1 - weights.sum(-1)`` is the sink's share; a fully masked row is all zeros.
    """
    q, k, v = as_float_tensors(q=q, k=k, v=v)
    batch = _checks.check_qkv(tuple(q.shape), tuple(k.shape), tuple(v.shape))
    n_q, n_k = q.shape[-2], k.shape[-2]
    sink = _sink_logits(sink_logits, batch, q.dtype, q.device)  # (..., 1, 1)
    allowed = combined_mask(mask, causal, batch + (n_q, n_k), q.device)
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.mT  # (..., n_q, n_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    column = sink.expand(*scores.shape[:-1], 1)  # (..., n_q, 1): the sink's logit in every row
    logits = torch.cat([scores, column], dim=-1)  # (..., n_q, n_k + 1)
    top = logits.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a row with nothing at all: all -inf
    e = torch.exp(logits - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total, torch.zeros_like(e))[..., :n_k]  # the sink's column dropped
    return weights @ v, weights


def streaming_mask(n_q, n_k=None, *, n_sink, window):
    """The StreamingLLM mask (n_q, n_k): causal, the first ``n_sink`` keys and the ``window`` most recent ones.

    ``mask[i, j]`` is True iff ``j <= t`` and (``j < n_sink`` or ``t - j < window``), ``t = i + n_k - n_q``;
    see ``attnlib.numpy.streaming_mask``.
    """
    n_k = n_q if n_k is None else n_k
    _checks.check_sizes(n_q=n_q, n_k=n_k)
    n_sink, window = _check_sink_window(n_sink, window)
    _check_queries_fit(n_q, n_k)
    t = torch.arange(n_q)[:, None] + (n_k - n_q)
    j = torch.arange(n_k)[None, :]
    return (j <= t) & ((j < n_sink) | (t - j < window))


class SinkKVCache:
    """A rolling key/value cache with attention sinks; same contract as ``attnlib.numpy.SinkKVCache``.

    ``append(layer, k, v)`` takes (..., n_kv_heads, t, d_head) tensors, first evicts every held
    token the new ones may not attend to (token ``t`` evicts token ``t - window`` unless it is a
    sink), and returns every key and value the layer then holds; ``tokens(layer)`` are their
    original indices and ``positions(layer)`` the slots ``0 .. length - 1`` StreamingLLM hands
    to RoPE (int64 tensors on the keys' device).  ``capacity = n_sink + window``.
    """

    def __init__(self, n_layers, n_heads, d_head, *, n_sink, window, n_kv_heads=None):
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.n_kv_heads = _checks.check_kv_heads(self.n_heads, n_kv_heads)
        self.d_head = _checks.check_count("d_head", d_head)
        self.n_sink, self.window = _check_sink_window(n_sink, window)
        self._keys = [None] * self.n_layers
        self._values = [None] * self.n_layers
        self._tokens = [torch.zeros(0, dtype=torch.int64) for _ in range(self.n_layers)]
        self._seen = [0] * self.n_layers

    @property
    def capacity(self) -> int:
        return self.n_sink + self.window

    @property
    def length(self) -> int:
        return min(len(t) for t in self._tokens)

    @property
    def seen(self) -> int:
        return min(self._seen)

    @property
    def nbytes(self) -> int:
        return sum(0 if k is None else 2 * k.numel() * k.element_size() for k in self._keys)

    def append(self, layer, k, v):
        """Evict what the new tokens may not see, add ``k``, ``v`` (..., n_kv_heads, t, d_head), return all held."""
        layer = _checks.check_layer(layer, self.n_layers)
        k, v = as_float_tensors(k=k, v=v)
        self._check_step(k, v, layer)
        k, v = k.detach(), v.detach()
        first = self._seen[layer]
        held = self._tokens[layer].to(k.device)
        stay = (held < self.n_sink) | (held > first - self.window)
        new = torch.arange(first, first + k.shape[-2], device=k.device)
        if self._keys[layer] is None:
            self._keys[layer], self._values[layer] = k.clone(), v.clone()
        else:
            self._keys[layer] = torch.cat([self._keys[layer][..., stay, :], k], dim=-2)
            self._values[layer] = torch.cat([self._values[layer][..., stay, :], v], dim=-2)
        self._tokens[layer] = torch.cat([held[stay], new])
        self._seen[layer] = first + k.shape[-2]
        return self.read(layer)

    def read(self, layer):
        """The keys and values ``layer`` holds: (..., n_kv_heads, length, d_head) each."""
        layer = _checks.check_layer(layer, self.n_layers)
        if self._keys[layer] is None:
            raise ValueError(f"第 {layer} 层还没有缓存任何键和值 (layer {layer} is empty)。")
        return self._keys[layer], self._values[layer]

    def tokens(self, layer=0):
        """The original index of each token ``layer`` holds, oldest first: int64 tensor (length,)."""
        layer = _checks.check_layer(layer, self.n_layers)
        return self._tokens[layer].clone()

    def positions(self, layer=0):
        """The slots ``0 .. length - 1`` StreamingLLM gives RoPE for the held tokens: int64 tensor (length,)."""
        layer = _checks.check_layer(layer, self.n_layers)
        return torch.arange(len(self._tokens[layer]), device=self._tokens[layer].device)

    def _check_step(self, k, v, layer: int) -> None:
        want = f"(..., {self.n_kv_heads}, t, {self.d_head})"
        for name, shape in (("k", tuple(k.shape)), ("v", tuple(v.shape))):
            if len(shape) < 3 or shape[-3] != self.n_kv_heads or shape[-1] != self.d_head or shape[-2] < 1:
                raise ValueError(f"{name} 的形状应为 {want}（t ≥ 1），收到 {name}.shape={shape} "
                                 f"(cache shape mismatch)。")
        if k.shape != v.shape:
            raise ValueError(f"k 与 v 的形状必须相同：k.shape={tuple(k.shape)}，v.shape={tuple(v.shape)} "
                             f"(shape mismatch)。")
        held = self._keys[layer]
        if held is not None and held.shape[:-2] != k.shape[:-2]:
            raise ValueError(f"新的键的批量形状 {tuple(k.shape[:-2])} 与缓存中的 {tuple(held.shape[:-2])} 不同 "
                             f"(batch mismatch)。")
        if held is not None and (held.dtype != k.dtype or held.device != k.device):
            raise TypeError(f"新的键是 {k.dtype}（{k.device}），缓存中的是 {held.dtype}（{held.device}）：请先统一 "
                            f"(dtype or device mismatch with the cache)。")


def _sink_logits(b, batch: tuple, dtype, device) -> torch.Tensor:
    """The sink logits as a tensor (..., 1, 1) of ``dtype`` on ``device``."""
    t = b if isinstance(b, torch.Tensor) else torch.as_tensor(b)
    _check_sink_shape(tuple(t.shape), kind(t), t.dtype, batch)
    t = t.to(device=device, dtype=dtype)
    _check_sink_values(bool(torch.isnan(t).any()), bool(torch.isposinf(t).any()))
    return t[..., None, None]
