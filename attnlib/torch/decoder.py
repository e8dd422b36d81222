"""A small decoder-only transformer (chapter 11, KV 缓存与自回归生成), torch only.

It is built from the library's own pieces: ``split_heads`` and
``merge_heads`` around causal ``scaled_dot_product_attention`` over the whole
sequence, or around ``cached_attention`` with a ``KVCache`` when it decodes
one step at a time.  Both paths share every weight and every other operation,
so they must give the same logits; the chapter checks that, and measures what
the cache saves.  The weights are random (seeded) and nothing is trained: the
point is equality and cost, not the quality of the tokens it picks.

Torch only: this module is not exported from ``attnlib.torch.__all__``.  The
two backends export the same names with the same signatures, and the NumPy
backend has no twin of it.  Import it as::

    from attnlib.torch.decoder import TinyDecoder

Shapes: tokens are integer tensors ``(..., n)`` with any leading batch
dimensions; logits are ``(..., n, vocab_size)``; the keys and values of one
layer are ``(..., n_heads, n, d_head)``, as ``KVCache`` stores them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import _checks
from .attention import scaled_dot_product_attention
from .kv_cache import KVCache, cached_attention
from .multihead import merge_heads, split_heads
from .positions import sinusoidal_positions


class TinyDecoder:
    """A decoder-only transformer with random seeded weights: embeddings, causal blocks, a read-out.

    Each of the ``n_layers`` blocks is pre-norm with two residual paths::

        x = x + MultiHead(LN(x)) W_O        (causal self-attention, n_heads heads)
        x = x + GELU(LN(x) W_1) W_2         (the MLP, width d_mlp)

    Tokens enter as an embedding plus a sinusoidal position code; the logits
    are ``LN(x) W_out``.  Layer norms have no parameters, no matrix has a bias;
    GELU is its tanh approximation (as in GPT-2).

    Parameters
    ----------
    vocab_size, d_model, n_heads, n_layers : int >= 1
        ``n_heads`` divides ``d_model``; ``d_head = d_model // n_heads``.
    d_mlp : int, optional
        Width of the MLP (default ``4 * d_model``).
    seed : int
        Seeds ``torch.Generator`` for the weights: the same seed, the same model.
    dtype : torch.dtype
        Floating dtype of every weight (default float32).
    device : str or torch.device

    Attributes
    ----------
    embedding : tensor (vocab_size, d_model)
    layers : list of dict
        Per block: ``w_qkv`` (d_model, 3 d_model), the projections W_Q, W_K, W_V side
        by side (one product computes all three); ``w_o`` (d_model, d_model); ``w_1``
        (d_model, d_mlp) and ``w_2`` (d_mlp, d_model).
    w_out : tensor (d_model, vocab_size)
    score_count : int
        Query-key scores the attention layers have computed (every layer, head and
        batch row; a masked score counts, it is computed before it is masked).
        Set it to 0 to start counting afresh.
    """

    def __init__(self, vocab_size=256, d_model=128, n_heads=4, n_layers=2, *, d_mlp=None, seed=0,
                 dtype=torch.float32, device="cpu"):
        self.vocab_size = _checks.check_count("vocab_size", vocab_size)
        self.d_model = _checks.check_count("d_model", d_model)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.d_head = _checks.check_heads(self.d_model, self.n_heads)
        self.d_mlp = 4 * self.d_model if d_mlp is None else _checks.check_count("d_mlp", d_mlp)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype 必须是浮点的 torch.dtype (floating dtype required)，收到 {dtype!r}。")
        gen = torch.Generator().manual_seed(_checks.check_seed(seed))

        def draw(rows, cols, std=None):
            return random_matrix(gen, rows, cols, std=std, dtype=dtype, device=device)

        d, m = self.d_model, self.d_mlp
        self.embedding = draw(self.vocab_size, d, std=1.0)  # one row of scale 1 per token
        self.layers = [{"w_qkv": draw(d, 3 * d), "w_o": draw(d, d), "w_1": draw(d, m), "w_2": draw(m, d)}
                       for _ in range(self.n_layers)]
        self.w_out = draw(d, self.vocab_size)
        self.score_count = 0
        self._table = sinusoidal_positions(64, d).to(dtype=dtype, device=device)

    @property
    def dtype(self) -> torch.dtype:
        return self.w_out.dtype

    @property
    def device(self) -> torch.device:
        return self.w_out.device

    def n_parameters(self) -> int:
        """Numbers in the weights: embedding, every block's six matrices, the read-out."""
        blocks = sum(w.numel() for layer in self.layers for w in layer.values())
        return self.embedding.numel() + blocks + self.w_out.numel()

    def new_cache(self, capacity=64) -> KVCache:
        """An empty ``KVCache`` shaped for this model: (n_layers, n_heads, d_head)."""
        return KVCache(self.n_layers, self.n_heads, self.d_head, capacity=capacity)

    # -- the two ways of running the model

    def forward(self, tokens, *, causal=True):
        """Logits of every position of ``tokens`` (..., n), from the whole sequence at once.

        ``causal=False`` lets every position see the later ones too (an encoder's
        attention: then a position's keys and values change when tokens are appended).

        Returns
        -------
        tensor, shape (..., n, vocab_size)
        """
        return self._run(tokens, 0, self._full_attention(causal))[0]

    def keys_values(self, tokens, *, causal=True) -> list:
        """The keys and values every layer computes for ``tokens`` (..., n) in one forward pass.

        Returns
        -------
        list of (keys, values)
            One pair per layer, each tensor of shape (..., n_heads, n, d_head).
        """
        return self._run(tokens, 0, self._full_attention(causal))[1]

    def step(self, tokens, cache):
        """Decode ``tokens`` (..., t_new) that follow what ``cache`` holds; return their logits.

        The new tokens take positions ``cache.length .. cache.length + t_new - 1``;
        their keys and values are appended to ``cache`` layer by layer, and their
        queries attend causally (bottom-right aligned) to everything cached.  Call
        it once with the whole prompt (the prefill), then once per generated token.

        Returns
        -------
        tensor, shape (..., t_new, vocab_size)
            Equal, up to rounding, to ``forward`` over the whole sequence at these positions.
        """
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache 必须是 attnlib.torch.KVCache (a KVCache)，收到 {type(cache).__name__}。")
        if (cache.n_layers, cache.n_heads, cache.d_head) != (self.n_layers, self.n_heads, self.d_head):
            raise ValueError(f"缓存的形状 (layers, heads, d_head) = "
                             f"{(cache.n_layers, cache.n_heads, cache.d_head)} 与模型的 "
                             f"{(self.n_layers, self.n_heads, self.d_head)} 不同 (cache shape mismatch)。")

        start = cache.length

        def attend(layer, q, k, v):
            self.score_count += q.shape[:-1].numel() * (start + q.shape[-2])  # every cached key
            return cached_attention(q, k, v, cache, layer)  # appends k, v, then attends

        return self._run(tokens, start, attend)[0]

    def generate(self, prompt, n_new, *, use_cache=True):
        """Greedy decoding: append ``n_new`` tokens to ``prompt`` (..., n), each the argmax of the logits.

        With ``use_cache`` the prompt is prefilled once and each new token costs one
        ``step``; without it every step runs ``forward`` over the whole prefix again.

        Returns
        -------
        tensor of int64, shape (..., n + n_new)
        """
        tokens = self._check_tokens(prompt)
        n_new = _checks.check_count("n_new", n_new, minimum=0)
        if use_cache and n_new:
            cache = self.new_cache(capacity=tokens.shape[-1] + n_new)
            logits = self.step(tokens, cache)
        for i in range(n_new):
            if not use_cache:
                logits = self.forward(tokens)  # the whole prefix, every step
            nxt = logits[..., -1:, :].argmax(dim=-1)  # (..., 1)
            tokens = torch.cat([tokens, nxt], dim=-1)
            if use_cache and i + 1 < n_new:
                logits = self.step(nxt, cache)
        return tokens

    # -- internals

    def _full_attention(self, causal: bool):
        def attend(layer, q, k, v):
            out, _ = scaled_dot_product_attention(q, k, v, causal=causal, need_weights=False)
            self.score_count += q.shape[:-1].numel() * k.shape[-2]
            return out

        return attend

    def _run(self, tokens, start: int, attend):
        """Embed ``tokens`` at positions start.., run every block with ``attend``; return (logits, per-layer k, v)."""
        tokens = self._check_tokens(tokens)
        n = tokens.shape[-1]
        x = self.embedding[tokens] + self._positions(start + n)[start:]
        kvs = []
        for i, w in enumerate(self.layers):
            h = F.layer_norm(x, (self.d_model,))
            qkv = (h @ w["w_qkv"]).split(self.d_model, dim=-1)  # one product for W_Q, W_K, W_V
            q, k, v = (split_heads(t, self.n_heads) for t in qkv)  # (..., n_heads, n, d_head)
            kvs.append((k, v))  # (..., n_heads, n, d_head)
            x = x + merge_heads(attend(i, q, k, v)) @ w["w_o"]
            x = x + feed_forward(x, w["w_1"], w["w_2"])
        return F.layer_norm(x, (self.d_model,)) @ self.w_out, kvs

    def _positions(self, n: int) -> torch.Tensor:
        """Position codes of positions 0 .. n - 1 (at least), computed once and kept: a table that doubles."""
        if self._table.shape[0] < n:
            self._table = sinusoidal_positions(max(n, 2 * self._table.shape[0]), self.d_model).to(
                dtype=self.dtype, device=self.device)
        return self._table[:n]

    def _check_tokens(self, tokens) -> torch.Tensor:
        return check_token_ids(tokens, self.vocab_size, self.device)


# -- pieces shared with the encoder-decoder of chapter 12 (attnlib.torch.seq2seq)

def random_matrix(gen, rows, cols, *, std=None, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """A (rows, cols) matrix of N(0, std^2) entries drawn from ``gen`` (default std ``1 / sqrt(rows)``).

    The default keeps the scale of ``x @ W`` near the scale of ``x``.  Drawn in
    float64 and then converted, so a seed gives the same numbers in every dtype.

    Returns
    -------
    tensor, shape (rows, cols)
    """
    w = torch.randn(rows, cols, generator=gen, dtype=torch.float64)
    return (w * (std or 1 / math.sqrt(rows))).to(dtype=dtype, device=device)


def feed_forward(x, w_1, w_2) -> torch.Tensor:
    """The MLP of a pre-norm block, without its residual: ``GELU(LN(x) W_1) W_2``.

    x : (..., n, d_model); w_1 : (d_model, d_mlp); w_2 : (d_mlp, d_model).

    Returns
    -------
    tensor, shape (..., n, d_model)
    """
    h = F.layer_norm(x, (x.shape[-1],))  # no parameters: the blocks' matrices do the scaling
    return F.gelu(h @ w_1, approximate="tanh") @ w_2


def check_token_ids(tokens, vocab_size: int, device) -> torch.Tensor:
    """``tokens`` (..., n), n >= 1, as int64 on ``device``; every id in ``0 .. vocab_size - 1``.

    Raises
    ------
    TypeError
        Not integers.
    ValueError
        No position, or an id out of range (the message names the range and what came).
    """
    t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(tokens)
    if t.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"tokens 必须是整数张量 (integer token ids)，收到 dtype={t.dtype}。")
    if t.dim() < 1 or t.shape[-1] < 1:
        raise ValueError(f"tokens 的形状应为 (..., n)，n >= 1，收到 {tuple(t.shape)}。")
    low, high = (int(x) for x in torch.aminmax(t))
    if low < 0 or high >= vocab_size:
        raise ValueError(f"词元编号必须在 0 到 {vocab_size - 1} 之间 (token id out of range)，"
                         f"收到最小 {low}、最大 {high}。")
    return t.to(device=device, dtype=torch.int64)
