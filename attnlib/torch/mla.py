"""Multi-head latent attention, MLA (chapter 17), torch backend: any device, the dtype of the inputs.

The formulas, the absorption of ``W_uk`` and ``W_uv`` and the departures from
DeepSeek's models are those of ``attnlib.numpy.mla``; so are the input checks,
so both backends raise the same errors.  Autograd flows through
``multi_head_latent_attention``; the cache stores detached tensors.
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from ..numpy.mla import (
    WEIGHT_NAMES,
    _check_cache_type,
    _check_cache_widths,
    _check_dims,
    _check_filled,
    _check_latent_step,
    _check_weight_names,
    _positions_per_head,
)
from ..numpy.positions import _check_positions_kind, _check_positions_shape
from ._tensors import as_float_tensors, kind
from .attention import scaled_dot_product_attention
from .masks import causal_mask
from .multihead import merge_heads, split_heads
from .positions import apply_rope


def multi_head_latent_attention(x, weights, n_heads, *, causal=True, absorb=False, positions=None):
    """Multi-head latent attention; same contract as ``attnlib.numpy.mla.multi_head_latent_attention``.

    x : (..., n, d_model); ``weights`` maps ``w_dq`` (d_model, d_latent_q), ``w_uq`` (d_latent_q, h·d_head),
    ``w_qr`` (d_latent_q, h·d_rope), ``w_dkv`` (d_model, d_latent), ``w_uk``, ``w_uv`` (d_latent, h·d_head),
    ``w_kr`` (d_model, d_rope), ``w_o`` (h·d_head, d_model) to tensors of x's dtype and device.

    Returns
    -------
    tensor, shape (..., n, d_model)
    """
    x, w = _as_inputs(x, weights)
    dims = _check_dims(tuple(x.shape), {n: tuple(t.shape) for n, t in w.items()}, n_heads)
    positions = _as_positions(positions, tuple(x.shape))
    q_c, q_r = _queries(x, w, dims.n_heads, positions)
    c_kv, k_r = _latents(x, w, positions)
    attend = _absorbed_attention if absorb else _naive_attention
    return merge_heads(attend(q_c, q_r, c_kv, k_r, w, causal)) @ w["w_o"]  # (..., n, d_model)


def _as_inputs(x, weights) -> tuple[torch.Tensor, dict]:
    _check_weight_names(weights)
    x, *tensors = as_float_tensors(x=x, **{name: weights[name] for name in WEIGHT_NAMES})
    return x, dict(zip(WEIGHT_NAMES, tensors, strict=True))


def _as_positions(positions, x_shape: tuple):
    if positions is None:
        return None
    pos = positions if isinstance(positions, torch.Tensor) else torch.as_tensor(positions)
    _check_positions_kind(kind(pos), pos.dtype)
    _check_positions_shape(tuple(pos.shape), x_shape)
    return pos


def _queries(x, w, n_heads, positions):
    """Every head's content query (..., h, n, d_head) and rotated query (..., h, n, d_rope)."""
    c_q = x @ w["w_dq"]  # (..., n, d_latent_q)
    q_c = split_heads(c_q @ w["w_uq"], n_heads)
    q_r = apply_rope(split_heads(c_q @ w["w_qr"], n_heads), _positions_per_head(positions))
    return q_c, q_r


def _latents(x, w, positions):
    """The latent (..., n, d_latent) and the shared rotated key (..., n, d_rope) of each token."""
    return x @ w["w_dkv"], apply_rope(x @ w["w_kr"], positions)


def _naive_attention(q_c, q_r, c_kv, k_r, w, causal):
    """Each head's keys and values reconstructed for every token, then attention: (..., h, n_q, d_head)."""
    h = q_c.shape[-3]
    k_c = split_heads(c_kv @ w["w_uk"], h)  # (..., h, n_k, d_head)
    v_c = split_heads(c_kv @ w["w_uv"], h)
    k_r = k_r.unsqueeze(-3).expand(*k_c.shape[:-1], k_r.shape[-1])  # the one rotated key, every head
    q = torch.cat([q_c, q_r], dim=-1)  # (..., h, n_q, d_head + d_rope)
    k = torch.cat([k_c, k_r], dim=-1)  # (..., h, n_k, d_head + d_rope)
    return scaled_dot_product_attention(q, k, v_c, causal=causal, need_weights=False)[0]


def _absorbed_attention(q_c, q_r, c_kv, k_r, w, causal):
    """The same attention in the latent space, no head's key or value formed: (..., h, n_q, d_head)."""
    h, n_q, n_k = q_c.shape[-3], q_c.shape[-2], c_kv.shape[-2]
    w_uk, w_uv = split_heads(w["w_uk"], h), split_heads(w["w_uv"], h)  # (h, d_latent, d_head) each
    q_latent = q_c @ w_uk.mT  # (..., h, n_q, d_latent): q_c,i W_uk,i^T
    # the heads share c_kv and k_r: their queries are rows of one matrix, one pass over the cache
    scores = _rows(q_latent) @ c_kv.mT + _rows(q_r) @ k_r.mT  # (..., h·n_q, n_k)
    scores = scores.reshape(*q_c.shape[:-1], n_k) * (1.0 / math.sqrt(q_c.shape[-1] + q_r.shape[-1]))
    if causal:
        scores = scores.masked_fill(~causal_mask(n_q, n_k).to(scores.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., h, n_q, n_k); bottom-right causal leaves no row empty
    latent_out = (_rows(weights) @ c_kv).reshape(*q_c.shape[:-2], n_q, c_kv.shape[-1])  # (..., h, n_q, d_latent)
    return latent_out @ w_uv  # (..., h, n_q, d_head)


def _rows(a):
    """``(..., h, n, d) -> (..., h·n, d)``."""
    return a.reshape(*a.shape[:-3], a.shape[-3] * a.shape[-2], a.shape[-1])


class LatentKVCache:
    """Per layer, each token's latent ``c_kv`` and rotated key ``k_r``; same contract as the NumPy twin.

    ``append(layer, c_kv, k_rope)`` takes (..., t_new, d_latent) and (..., t_new, d_rope) tensors and
    returns every cached latent and rotated key of the layer (views); ``read(layer)`` returns them;
    ``length`` counts cached tokens; ``nbytes`` is ``Σ_layers tokens × (d_latent + d_rope) × element size
    (× batch)``.  The buffer lives on the device of the first tensors appended and doubles when full.
    """

    def __init__(self, n_layers, d_latent, d_rope, *, capacity=64):
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.d_latent = _checks.check_count("d_latent", d_latent)
        self.d_rope = _checks.check_count("d_rope", d_rope)
        self._capacity = _checks.check_count("capacity", capacity)
        self._buffers = [None] * self.n_layers  # per layer: (..., capacity, d_latent + d_rope)
        self._lengths = [0] * self.n_layers

    @property
    def length(self) -> int:
        return min(self._lengths)

    @property
    def nbytes(self) -> int:
        return sum(n * math.prod(buf.shape[:-2]) * buf.shape[-1] * buf.element_size()
                   for buf, n in zip(self._buffers, self._lengths, strict=True) if buf is not None)

    def append(self, layer, c_kv, k_rope):
        """Add (..., t_new, d_latent) latents and (..., t_new, d_rope) rotated keys; return the layer's cache."""
        layer = _checks.check_layer(layer, self.n_layers)
        c_kv, k_rope = as_float_tensors(c_kv=c_kv, k_rope=k_rope)
        buf = self._buffers[layer]
        _check_latent_step(tuple(c_kv.shape), tuple(k_rope.shape), self.d_latent, self.d_rope,
                           None if buf is None else tuple(buf.shape[:-2]))
        if buf is not None and (c_kv.dtype != buf.dtype or c_kv.device != buf.device):
            raise TypeError(f"新的潜在向量是 {c_kv.dtype}（{c_kv.device}），缓存中的是 {buf.dtype}（{buf.device}）："
                            f"请先统一 (dtype/device mismatch with the cache)。")
        start, stop = self._lengths[layer], self._lengths[layer] + c_kv.shape[-2]
        if buf is None or stop > buf.shape[-2]:
            self._grow(layer, c_kv, stop)
        self._buffers[layer][..., start:stop, : self.d_latent] = c_kv.detach()
        self._buffers[layer][..., start:stop, self.d_latent:] = k_rope.detach()
        self._lengths[layer] = stop
        return self.read(layer)

    def read(self, layer):
        """The cached ``c_kv`` (..., length, d_latent) and ``k_rope`` (..., length, d_rope) of ``layer`` (views)."""
        layer = _checks.check_layer(layer, self.n_layers)
        _check_filled(layer, self._buffers[layer])
        rows = self._buffers[layer][..., : self._lengths[layer], :]
        return rows[..., : self.d_latent], rows[..., self.d_latent:]

    def _grow(self, layer, like, needed: int) -> None:
        old, n = self._buffers[layer], self._lengths[layer]
        capacity = max(self._capacity, needed, 2 * (old.shape[-2] if old is not None else 0))
        self._buffers[layer] = like.new_zeros((*like.shape[:-2], capacity, self.d_latent + self.d_rope))
        if old is not None:
            self._buffers[layer][..., :n, :] = old[..., :n, :]


def latent_attention_step(x_new, weights, n_heads, cache, layer):
    """One decoding step of one MLA layer; same contract as ``attnlib.numpy.mla.latent_attention_step``.

    x_new : (..., t_new, d_model); the new tokens are rotated at positions ``length ... length + t_new - 1``
    of ``layer``, their latents appended to ``cache`` (a ``LatentKVCache``), and the queries attend,
    absorbed and bottom-right causal, over the whole cache.  Returns (..., t_new, d_model).
    """
    return _step(x_new, weights, n_heads, cache, layer, absorb=True)


def _step(x_new, weights, n_heads, cache, layer, *, absorb):
    """``latent_attention_step``; ``absorb=False`` reconstructs every cached token's keys and values instead."""
    x_new, w = _as_inputs(x_new, weights)
    dims = _check_dims(tuple(x_new.shape), {n: tuple(t.shape) for n, t in w.items()}, n_heads)
    _check_cache_type(cache, LatentKVCache)
    _check_cache_widths(cache, dims)
    start, t_new = cache._lengths[_checks.check_layer(layer, cache.n_layers)], x_new.shape[-2]
    positions = torch.arange(start, start + t_new, device=x_new.device)  # (t_new,): the true positions
    q_c, q_r = _queries(x_new, w, dims.n_heads, positions)
    c_kv, k_r = cache.append(layer, *_latents(x_new, w, positions))
    attend = _absorbed_attention if absorb else _naive_attention
    return merge_heads(attend(q_c, q_r, c_kv, k_r, w, t_new > 1)) @ w["w_o"]  # (..., t_new, d_model)
