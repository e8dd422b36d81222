"""A LLaMA-style decoder that runs real pretrained weights (chapter 21), torch backend.

The same model, names and signatures as ``attnlib.numpy.llama`` (read that
module for the formulas): pre-norm blocks of grouped-query attention with RoPE
and a SwiGLU MLP, RMSNorm, the read-out tied to the token embedding.  Here the
pieces are torch's: ``F.rms_norm``, ``F.silu``, ``F.linear`` and the fused
attention kernel that ``grouped_query_attention`` and ``cached_attention``
hand their work to when no weights are asked for.

Device and dtype come from the weights: NumPy arrays (as
``attnlib.pretrained.load_smollm2`` returns them) become CPU tensors sharing
their memory; tensors are used as they are, so weights moved to a GPU, or
converted to another float dtype, run there and in that dtype.  Token ids may
be lists, NumPy arrays or tensors; they go to the weights' device.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .. import _checks
from ..numpy.llama import (
    _check_mask_shape,
    _check_norm_weight,
    _check_token_ids,
    _checked_weights,
    _stop_set,
)
from ..pretrained import check_config
from ._tensors import as_float, kind
from .gqa import grouped_query_attention
from .kv_cache import KVCache, cached_attention
from .positions import apply_rope


def rms_norm(x, weight, eps):
    """RMSNorm over the last axis: ``x / sqrt(mean(x²) + eps) · weight``; see ``attnlib.numpy.llama.rms_norm``.

    Parameters
    ----------
    x : tensor of float, shape (..., d)
    weight : tensor of float, shape (d,)
    eps : float > 0

    Returns
    -------
    tensor, shape (..., d), the dtype and device of ``x``
    """
    x = as_float(x, "x")
    weight = as_float(weight, "weight").to(device=x.device, dtype=x.dtype)
    _check_norm_weight(tuple(x.shape), tuple(weight.shape))
    eps = _checks.check_positive("eps", eps)
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


class LlamaModel:
    """A LLaMA-style decoder: token embedding, ``n_layers`` pre-norm blocks, a tied read-out.

    Same contract as ``attnlib.numpy.llama.LlamaModel``: ``config`` a mapping with
    at least ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``d_head``,
    ``d_ff``, ``vocab_size``, ``rope_base``, ``norm_eps``; ``weights`` the tensors
    of ``attnlib.pretrained.weight_shapes(config)`` by GGUF name, matrices
    ``(out_features, in_features)``, all of one dtype on one device (NumPy arrays
    become CPU tensors sharing their memory).  The pieces ``embed``, ``qkv``,
    ``attention_output``, ``mlp`` and ``readout`` are chained by ``forward`` and
    ``step``; logits and attention weights are tensors.
    """

    def __init__(self, config, weights):
        self.config = check_config(config)
        c = self.config
        self.n_layers, self.d_model, self.vocab_size = c["n_layers"], c["d_model"], c["vocab_size"]
        self.n_heads, self.n_kv_heads, self.d_head = c["n_heads"], c["n_kv_heads"], c["d_head"]
        self.rope_base, self.eps = c["rope_base"], c["norm_eps"]
        w = {name: _as_tensor(name, t) for name, t in _checked_weights(self.config, weights).items()}
        places = {(t.dtype, t.device) for t in w.values()}
        if len(places) > 1:
            raise TypeError(f"所有权重必须在同一设备上、是同一种 dtype，收到 {sorted(map(str, places))} "
                            f"(weights must share one dtype and device)。")
        self.embedding = w["token_embd.weight"]  # (vocab, d_model)
        self.output_norm = w["output_norm.weight"]  # (d_model,)
        self.output = w.get("output.weight", self.embedding)  # tied unless the file has its own read-out
        names = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
        self.layers = [{name: w[f"blk.{i}.{name}.weight"] for name in names} for i in range(self.n_layers)]

    @property
    def dtype(self) -> torch.dtype:
        return self.embedding.dtype

    @property
    def device(self) -> torch.device:
        return self.embedding.device

    def __repr__(self):
        c = self.config
        return (f"LlamaModel(n_layers={c['n_layers']}, d_model={c['d_model']}, n_heads={c['n_heads']}, "
                f"n_kv_heads={c['n_kv_heads']}, d_head={c['d_head']}, d_ff={c['d_ff']}, "
                f"vocab_size={c['vocab_size']}, dtype={self.dtype}, device={self.device})")

    def n_parameters(self):
        """Numbers in the weights: the embedding, every layer's nine tensors, the final norm (a tied read-out once)."""
        tensors = [self.embedding, self.output_norm] + [w for layer in self.layers for w in layer.values()]
        if self.output is not self.embedding:
            tensors.append(self.output)
        return int(sum(t.numel() for t in tensors))

    # -- the pieces

    def embed(self, tokens):
        """The embeddings of ``tokens`` (n,): (n, d_model)."""
        return self.embedding[self._check_tokens(tokens)]

    def qkv(self, layer, x, positions):
        """Layer ``layer``'s rotated queries (n_heads, n, d_head), rotated keys and values (n_kv_heads, n, d_head)."""
        w = self.layers[layer]
        h = F.rms_norm(x, (self.d_model,), w["attn_norm"], self.eps)
        q = self._heads(F.linear(h, w["attn_q"]), self.n_heads)
        k = self._heads(F.linear(h, w["attn_k"]), self.n_kv_heads)
        v = self._heads(F.linear(h, w["attn_v"]), self.n_kv_heads)
        return apply_rope(q, positions, base=self.rope_base), apply_rope(k, positions, base=self.rope_base), v

    def attention_output(self, layer, out):
        """The heads' outputs (n_heads, n, d_head) side by side, times ``W_Oᵀ``: (n, d_model)."""
        merged = out.transpose(0, 1).reshape(out.shape[-2], self.n_heads * self.d_head)
        return F.linear(merged, self.layers[layer]["attn_output"])

    def mlp(self, layer, x):
        """Layer ``layer``'s SwiGLU of ``RMSNorm(x)``: (n, d_model)."""
        w = self.layers[layer]
        h = F.rms_norm(x, (self.d_model,), w["ffn_norm"], self.eps)
        return F.linear(F.silu(F.linear(h, w["ffn_gate"])) * F.linear(h, w["ffn_up"]), w["ffn_down"])

    def readout(self, x, logits_at=None):
        """The logits ``RMSNorm(x) Eᵀ`` of the rows ``x[logits_at]`` (all rows when None)."""
        if logits_at is not None:
            x = x[logits_at]
        return F.linear(F.rms_norm(x, (self.d_model,), self.output_norm, self.eps), self.output)

    # -- running the model

    def forward(self, tokens, *, mask=None, positions=None, return_weights=False, logits_at=None):
        """The logits of every position of ``tokens`` (n,); see ``attnlib.numpy.llama.LlamaModel.forward``.

        Returns
        -------
        logits : tensor, shape (n, vocab_size) (or as ``logits_at`` selects)
        weights : list of tensors (n_heads, n, n), one per layer; only with ``return_weights``
        """
        x = self.embed(tokens)
        n = x.shape[0]
        positions = torch.arange(n, device=self.device) if positions is None else positions
        mask = None if mask is None else self._check_mask(mask, n, n)
        per_layer = []
        for layer in range(self.n_layers):
            q, k, v = self.qkv(layer, x, positions)
            out, w = grouped_query_attention(q, k, v, mask=mask, causal=mask is None, need_weights=return_weights)
            per_layer.append(w)
            x = x + self.attention_output(layer, out)
            x = x + self.mlp(layer, x)
        logits = self.readout(x, logits_at)
        return (logits, per_layer) if return_weights else logits

    def new_cache(self, capacity=256):
        """An empty ``KVCache`` for this model (n_kv_heads key/value heads per layer)."""
        return KVCache(self.n_layers, self.n_heads, self.d_head, n_kv_heads=self.n_kv_heads, capacity=capacity)

    def step(self, tokens, cache, *, mask=None, positions=None, return_weights=False, logits_at=None):
        """Run ``tokens`` (t,) after what ``cache`` holds; see ``attnlib.numpy.llama.LlamaModel.step``."""
        x = self.embed(tokens)
        t, start = x.shape[0], cache.length
        positions = torch.arange(start, start + t, device=self.device) if positions is None else positions
        mask = None if mask is None else self._check_mask(mask, t, start + t)
        per_layer = []
        for layer in range(self.n_layers):
            q, k, v = self.qkv(layer, x, positions)
            if mask is None and not return_weights:
                out = cached_attention(q, k, v, cache, layer)
            else:
                keys, values = cache.append(layer, k, v)
                out, w = grouped_query_attention(q, keys, values, mask=mask, causal=mask is None,
                                                 need_weights=return_weights)
                per_layer.append(w)
            x = x + self.attention_output(layer, out)
            x = x + self.mlp(layer, x)
        logits = self.readout(x, logits_at)
        return (logits, per_layer) if return_weights else logits

    def generate(self, tokens, max_new_tokens, *, stop=None, use_cache=True):
        """Greedy decoding; see ``attnlib.numpy.llama.LlamaModel.generate``.

        Returns
        -------
        list of int
            The new tokens only; a stop token, when produced, is the last one.
        """
        prompt = self._check_tokens(tokens)
        max_new_tokens = _checks.check_count("max_new_tokens", max_new_tokens, minimum=0)
        stops = _stop_set(stop)
        new = []
        with torch.no_grad():
            if use_cache and max_new_tokens:
                cache = self.new_cache(capacity=prompt.shape[0] + max_new_tokens)
                logits = self.step(prompt, cache, logits_at=-1)
            while len(new) < max_new_tokens:
                if not use_cache:
                    seq = torch.cat([prompt, torch.tensor(new, dtype=torch.int64, device=self.device)])
                    logits = self.forward(seq, logits_at=-1)
                token = int(logits.argmax())
                new.append(token)
                if token in stops:
                    break
                if use_cache and len(new) < max_new_tokens:
                    logits = self.step([token], cache, logits_at=-1)
        return new

    # -- checks and small helpers

    def _heads(self, x, n_heads: int):
        """(n, n_heads·d_head) -> (n_heads, n, d_head)."""
        return x.reshape(x.shape[0], n_heads, self.d_head).transpose(0, 1)

    def _check_tokens(self, tokens) -> torch.Tensor:
        t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(np.asarray(tokens))
        k = kind(t)
        low_high = tuple(int(v) for v in torch.aminmax(t)) if t.numel() and k == "i" and t.dim() == 1 else None
        _check_token_ids(tuple(t.shape), "i" if k == "i" else k, t.dtype, self.vocab_size, low_high)
        return t.to(device=self.device, dtype=torch.int64)

    def _check_mask(self, mask, n_q: int, n_k: int):
        m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
        _check_mask_shape(tuple(m.shape), kind(m), m.dtype, n_q, n_k)
        return m.to(self.device)


def _as_tensor(name: str, w) -> torch.Tensor:
    """A weight as a float tensor: tensors as they are, NumPy arrays shared (copied only if read-only)."""
    if isinstance(w, torch.Tensor):
        t = w
    else:
        arr = np.asarray(w)
        t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    if not t.is_floating_point():
        raise TypeError(f"权重 {name} 必须是浮点数，收到 dtype={t.dtype} (weights must be floating point)。")
    return t
