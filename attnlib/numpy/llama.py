"""A LLaMA-style decoder that runs real pretrained weights (chapter 21), NumPy backend.

SmolLM2-135M-Instruct (``attnlib.pretrained.load_smollm2``) is this model with
30 layers of width 576.  Every block is pre-norm, with two residual paths::

    x = x + W_O · Attention(RoPE(W_Q h), RoPE(W_K h), W_V h),  h = RMSNorm(x)
    x = x + W_down (SiLU(W_gate h) ⊙ W_up h),                  h = RMSNorm(x)

and the logits are ``RMSNorm(x) Eᵀ``, ``E`` the token embedding (the read-out
is tied to it).  The attention is chapter 16's grouped-query attention
(``n_heads`` query heads share ``n_kv_heads`` key/value heads), causal,
its queries and keys rotated by chapter 15's ``apply_rope``; SwiGLU and
RMSNorm are the two new pieces.  Only the course's parts are used:
``apply_rope``, ``grouped_query_attention``, ``KVCache`` and
``cached_attention``; the torch twin (``attnlib.torch.llama``) has the same
names and signatures.

Shapes: ``tokens`` is one sequence ``(n,)`` of ids; a hidden state ``x`` is
``(n, d_model)``; queries are ``(n_heads, n, d_head)``, keys and values
``(n_kv_heads, n, d_head)``; logits are ``(n, vocab_size)``.  A weight matrix
is stored as ``(out_features, in_features)`` (the file's order), so a layer
computes ``x @ W.T``.  Everything is computed in the dtype of the weights
(float32 for the model file).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..pretrained import check_config, weight_shapes
from ._arrays import as_float
from .gqa import grouped_query_attention
from .kv_cache import KVCache, cached_attention
from .positions import apply_rope


def rms_norm(x, weight, eps):
    """RMSNorm: divide each row by its root mean square, then scale each feature by ``weight``::

        rms_norm(x)[..., j] = x[..., j] / sqrt(mean_j(x[..., j]²) + eps) · weight[j]

    Unlike layer normalization nothing is subtracted (no mean, no bias).

    Parameters
    ----------
    x : array of float, shape (..., d)
    weight : array of float, shape (d,)
    eps : float > 0
        Keeps the division finite for a row of zeros.

    Returns
    -------
    ndarray, shape (..., d), the dtype of ``x``
    """
    x = as_float(x, "x")
    weight = as_float(weight, "weight")
    _check_norm_weight(x.shape, weight.shape)
    eps = _checks.check_positive("eps", eps)
    mean_square = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1)
    return x / np.sqrt(mean_square + eps) * weight  # (..., d)


def _check_norm_weight(x_shape: tuple, w_shape: tuple) -> None:
    if len(x_shape) < 1 or w_shape != x_shape[-1:]:
        raise ValueError(f"weight 的形状应为 (d,)，d 是 x 的最后一维：收到 x.shape={x_shape}，"
                         f"weight.shape={w_shape} (norm weight shape mismatch)。")


def silu(z):
    """SiLU (swish): ``z · sigmoid(z)``, written ``z (1 + tanh(z/2)) / 2`` so that no exp overflows."""
    return 0.5 * z * (1.0 + np.tanh(0.5 * z))


class LlamaModel:
    """A LLaMA-style decoder: token embedding, ``n_layers`` pre-norm blocks, a tied read-out.

    The methods below are the model's pieces, in the order a token meets them
    (``embed``, then per layer ``qkv``, attention, ``attention_output``, ``mlp``,
    then ``readout``); ``forward`` and ``step`` chain them, and a chapter that
    needs another arrangement (another cache, other positions) can chain them too.

    Parameters
    ----------
    config : mapping
        At least ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``d_head``,
        ``d_ff``, ``vocab_size``, ``rope_base``, ``norm_eps`` (as
        ``attnlib.pretrained.load_smollm2`` reads them from the file).
    weights : mapping of str -> array
        The tensors of ``attnlib.pretrained.weight_shapes(config)``, by GGUF name,
        matrices ``(out_features, in_features)``; one float dtype for all; an
        ``output.weight`` of shape (vocab_size, d_model) replaces the tied read-out.
        The arrays are used as they are (not copied, not scanned).

    """

    def __init__(self, config, weights):
        self.config = check_config(config)
        c = self.config
        self.n_layers, self.d_model, self.vocab_size = c["n_layers"], c["d_model"], c["vocab_size"]
        self.n_heads, self.n_kv_heads, self.d_head = c["n_heads"], c["n_kv_heads"], c["d_head"]
        self.rope_base, self.eps = c["rope_base"], c["norm_eps"]
        w = _checked_weights(self.config, weights)
        self.embedding = w["token_embd.weight"]  # (vocab, d_model)
        self.output_norm = w["output_norm.weight"]  # (d_model,)
        self.output = w.get("output.weight", self.embedding)  # (vocab, d_model): tied unless the file has its own
        names = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
        self.layers = [{name: w[f"blk.{i}.{name}.weight"] for name in names} for i in range(self.n_layers)]

    @property
    def dtype(self):
        return self.embedding.dtype

    def __repr__(self):
        c = self.config
        return (f"LlamaModel(n_layers={c['n_layers']}, d_model={c['d_model']}, n_heads={c['n_heads']}, "
                f"n_kv_heads={c['n_kv_heads']}, d_head={c['d_head']}, d_ff={c['d_ff']}, "
                f"vocab_size={c['vocab_size']}, dtype={self.dtype})")

    def n_parameters(self):
        """Numbers in the weights: the embedding, every layer's nine tensors, the final norm (a tied read-out once)."""
        tensors = [self.embedding, self.output_norm] + [w for layer in self.layers for w in layer.values()]
        if self.output is not self.embedding:
            tensors.append(self.output)
        return int(sum(t.size for t in tensors))

    # -- the pieces

    def embed(self, tokens):
        """The embeddings of ``tokens`` (n,): rows of the embedding table, (n, d_model)."""
        return self.embedding[self._check_tokens(tokens)]

    def qkv(self, layer, x, positions):
        """Layer ``layer``'s queries, keys and values of the hidden states ``x`` (n, d_model).

        ``h = RMSNorm(x)``; ``q = h W_Qᵀ`` split into ``n_heads`` heads, ``k`` and ``v``
        into ``n_kv_heads``; ``q`` and ``k`` rotated by ``apply_rope`` at ``positions`` (n,).

        Returns
        -------
        q : ndarray (n_heads, n, d_head)
        k, v : ndarray (n_kv_heads, n, d_head)
        """
        w = self.layers[layer]
        h = rms_norm(x, w["attn_norm"], self.eps)  # (n, d_model)
        q = self._heads(h @ w["attn_q"].T, self.n_heads)  # (n_heads, n, d_head)
        k = self._heads(h @ w["attn_k"].T, self.n_kv_heads)  # (n_kv_heads, n, d_head)
        v = self._heads(h @ w["attn_v"].T, self.n_kv_heads)  # (n_kv_heads, n, d_head)
        return apply_rope(q, positions, base=self.rope_base), apply_rope(k, positions, base=self.rope_base), v

    def attention_output(self, layer, out):
        """The heads' outputs ``out`` (n_heads, n, d_head) side by side, times ``W_Oᵀ``: (n, d_model)."""
        n = out.shape[-2]
        merged = out.transpose(1, 0, 2).reshape(n, self.n_heads * self.d_head)  # (n, n_heads·d_head)
        return merged @ self.layers[layer]["attn_output"].T  # (n, d_model)

    def mlp(self, layer, x):
        """Layer ``layer``'s SwiGLU of ``h = RMSNorm(x)``: ``(SiLU(h W_gateᵀ) ⊙ h W_upᵀ) W_downᵀ``, (n, d_model)."""
        w = self.layers[layer]
        h = rms_norm(x, w["ffn_norm"], self.eps)  # (n, d_model)
        gate, up = h @ w["ffn_gate"].T, h @ w["ffn_up"].T  # (n, d_ff) each
        return (silu(gate) * up) @ w["ffn_down"].T  # (n, d_model)

    def readout(self, x, logits_at=None):
        """The logits ``RMSNorm(x) Eᵀ`` of the rows ``x[logits_at]`` (all rows when None).

        ``logits_at`` is any index of the rows: ``-1`` (the last position, logits
        (vocab_size,)), ``slice(256, None)`` (a suffix), a list of positions.  The
        read-out is the widest product of the model (d_model x vocab_size per
        position): leave out the rows whose logits are not needed.
        """
        if logits_at is not None:
            x = x[logits_at]
        return rms_norm(x, self.output_norm, self.eps) @ self.output.T  # (..., vocab_size)

    # -- running the model

    def forward(self, tokens, *, mask=None, positions=None, return_weights=False, logits_at=None):
        """The logits of every position of ``tokens`` (n,), from the whole sequence at once.

        Parameters
        ----------
        tokens : sequence of int, shape (n,)
        mask : array of bool, shape (n, n), optional
            Replaces the causal mask: ``mask[i, j]`` True = position i may attend to j
            (the same for every layer and head).  Default: causal.
        positions : array of numbers, shape (n,), optional
            The positions RoPE rotates by (default ``0 .. n - 1``).
        return_weights : bool
            Also return every layer's attention weights.
        logits_at : index, optional
            Only these rows of the logits (see :meth:`readout`); default all.

        Returns
        -------
        logits : ndarray, shape (n, vocab_size) (or as ``logits_at`` selects)
        weights : list of ndarray (n_heads, n, n), one per layer; only with ``return_weights``
        """
        x = self.embed(tokens)  # (n, d_model)
        n = x.shape[0]
        positions = np.arange(n) if positions is None else positions
        mask = None if mask is None else self._check_mask(mask, n, n)
        per_layer = []
        for layer in range(self.n_layers):
            q, k, v = self.qkv(layer, x, positions)  # (n_heads, n, d_head), (n_kv_heads, n, d_head) x 2
            out, w = grouped_query_attention(q, k, v, mask=mask, causal=mask is None, need_weights=return_weights)
            per_layer.append(w)
            x = x + self.attention_output(layer, out)  # residual
            x = x + self.mlp(layer, x)  # residual
        logits = self.readout(x, logits_at)
        return (logits, per_layer) if return_weights else logits

    def new_cache(self, capacity=256):
        """An empty ``KVCache`` for this model: n_layers layers of n_kv_heads key/value heads of width d_head."""
        return KVCache(self.n_layers, self.n_heads, self.d_head, n_kv_heads=self.n_kv_heads, capacity=capacity)

    def step(self, tokens, cache, *, mask=None, positions=None, return_weights=False, logits_at=None):
        """Run ``tokens`` (t,) that follow what ``cache`` holds; their keys and values join the cache.

        The new tokens take positions ``cache.length .. cache.length + t - 1`` (or
        ``positions``), their keys (rotated) and values are appended to the cache
        layer by layer, and their queries attend to everything cached, causally:
        new token i sees the cache and new tokens 0..i.  Call it once with the
        prompt (the prefill), then once per generated token.  The logits are those
        of ``forward`` over the whole sequence at these positions, up to rounding.

        Parameters
        ----------
        tokens : sequence of int, shape (t,)
        cache : KVCache
            From :meth:`new_cache` (or any object with ``append(layer, k, v)``
            returning all the layer's keys and values, and ``length``).
        mask : array of bool, shape (t, cached + t), optional
            Replaces the causal rule: which of the cached and new positions each new
            token may attend to.
        positions, return_weights, logits_at
            As in :meth:`forward`; the weights are (n_heads, t, cached + t) per layer.

        Returns
        -------
        logits : ndarray, shape (t, vocab_size) (or as ``logits_at`` selects)
        weights : list of ndarray, only with ``return_weights``
        """
        x = self.embed(tokens)  # (t, d_model)
        t, start = x.shape[0], cache.length
        positions = np.arange(start, start + t) if positions is None else positions
        mask = None if mask is None else self._check_mask(mask, t, start + t)
        per_layer = []
        for layer in range(self.n_layers):
            q, k, v = self.qkv(layer, x, positions)
            if mask is None and not return_weights:
                out = cached_attention(q, k, v, cache, layer)  # append k, v; attend to the whole cache
            else:
                keys, values = cache.append(layer, k, v)  # (n_kv_heads, start + t, d_head) each
                out, w = grouped_query_attention(q, keys, values, mask=mask, causal=mask is None,
                                                 need_weights=return_weights)
                per_layer.append(w)
            x = x + self.attention_output(layer, out)
            x = x + self.mlp(layer, x)
        logits = self.readout(x, logits_at)
        return (logits, per_layer) if return_weights else logits

    def generate(self, tokens, max_new_tokens, *, stop=None, use_cache=True):
        """Greedy decoding: up to ``max_new_tokens`` tokens after ``tokens``, each the argmax of the logits.

        With ``use_cache`` the prompt is run once (``step``) and each new token costs
        one ``step``; without it every token runs ``forward`` over the whole sequence
        again.  ``stop`` (an id or a collection of ids, e.g. the tokenizer's
        ``eos_id``) ends the generation after that token.

        Returns
        -------
        list of int
            The new tokens only (the prompt is not repeated); a stop token, when
            produced, is the last one.
        """
        prompt = [int(i) for i in self._check_tokens(tokens)]
        max_new_tokens = _checks.check_count("max_new_tokens", max_new_tokens, minimum=0)
        stops = _stop_set(stop)
        new = []
        if use_cache and max_new_tokens:
            cache = self.new_cache(capacity=len(prompt) + max_new_tokens)
            logits = self.step(prompt, cache, logits_at=-1)  # (vocab_size,)
        while len(new) < max_new_tokens:
            if not use_cache:
                logits = self.forward(prompt + new, logits_at=-1)  # the whole sequence, every time
            token = int(np.argmax(logits))
            new.append(token)
            if token in stops:
                break
            if use_cache and len(new) < max_new_tokens:
                logits = self.step([token], cache, logits_at=-1)
        return new

    # -- checks and small helpers

    def _heads(self, x, n_heads: int):
        """(n, n_heads·d_head) -> (n_heads, n, d_head): head i owns columns i·d_head .. (i+1)·d_head - 1."""
        return x.reshape(x.shape[0], n_heads, self.d_head).transpose(1, 0, 2)

    def _check_tokens(self, tokens) -> np.ndarray:
        ids = np.asarray(tokens)
        _check_token_ids(ids.shape, ids.dtype.kind, ids.dtype, self.vocab_size,
                         (int(ids.min()), int(ids.max())) if ids.size and ids.dtype.kind in "iu" else None)
        return ids.astype(np.intp)

    def _check_mask(self, mask, n_q: int, n_k: int) -> np.ndarray:
        mask = np.asarray(mask)
        _check_mask_shape(mask.shape, mask.dtype.kind, mask.dtype, n_q, n_k)
        return mask


# --------------------------------------------------------------------------- checks shared with the torch twin


def _checked_weights(config: dict, weights) -> dict:
    """The weights ``config`` needs, checked (names, shapes, one float dtype); ``output.weight`` kept if given."""
    if not isinstance(weights, dict) and not hasattr(weights, "keys"):
        raise TypeError(f"weights 必须是以张量名为键的映射（dict），收到 {type(weights).__name__} "
                        f"(weights must be a mapping)。")
    shapes = weight_shapes(config)
    if "output.weight" in weights:
        shapes["output.weight"] = (config["vocab_size"], config["d_model"])
    missing = [name for name in shapes if name not in weights]
    if missing:
        raise ValueError(f"weights 缺少 {len(missing)} 个张量，例如 {missing[:3]} (missing weights)。")
    out = {name: weights[name] for name in shapes}
    for name, want in shapes.items():
        got = tuple(out[name].shape)
        if got != want:
            raise ValueError(f"张量 {name} 的形状应为 {want}，收到 {got} (weight shape mismatch)。")
    dtypes = {str(w.dtype) for w in out.values()}
    if len(dtypes) > 1:
        raise TypeError(f"所有权重必须是同一种浮点类型，收到 {sorted(dtypes)} (weights must share one dtype)。")
    return out


def _check_token_ids(shape: tuple, kind: str, dtype, vocab_size: int, low_high) -> None:
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"tokens 必须是一个非空的一维词元序列，形状 (n,)，收到 shape={shape} "
                         f"(tokens must be 1-D, n >= 1)。")
    if kind not in "iu":
        raise TypeError(f"tokens 必须是整数词元编号 (integer token ids)，收到 dtype={dtype}。")
    low, high = low_high
    if low < 0 or high >= vocab_size:
        raise ValueError(f"词元编号必须在 0 到 {vocab_size - 1} 之间 (token id out of range)，"
                         f"收到最小 {low}、最大 {high}。")


def _check_mask_shape(shape: tuple, kind: str, dtype, n_q: int, n_k: int) -> None:
    if kind != "b":
        raise TypeError(f"mask 必须是布尔数组（True = 可以关注），收到 dtype={dtype} (mask must be boolean)。")
    if tuple(shape) != (n_q, n_k):
        raise ValueError(f"mask 的形状应为 ({n_q}, {n_k})（查询 x 键），收到 {tuple(shape)} (mask shape mismatch)。")


def _stop_set(stop) -> set:
    if stop is None:
        return set()
    if isinstance(stop, (int, np.integer)) and not isinstance(stop, bool):
        return {int(stop)}
    try:
        return {int(s) for s in stop}
    except (TypeError, ValueError):
        raise TypeError(f"stop 必须是一个词元编号或一组编号 (a token id or ids)，收到 {stop!r}。") from None
