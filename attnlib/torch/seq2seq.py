"""A small encoder-decoder transformer (chapter 12, 应用场景), torch only, trained in the lesson.

The encoder is a stack of pre-norm blocks with bidirectional self-attention;
the decoder's blocks add cross-attention, whose queries come from the target
prefix and whose keys and values come from the encoder's output (the memory).
Every attention is ``multi_head_attention`` when the whole target is known
(training, and reading the attention weights), and ``cached_attention`` with a
``KVCache`` when it generates one token at a time.  The cross-attention's keys
and values of the memory never change while decoding: they are computed once,
kept in a second ``KVCache``, and read at every step.  The two paths share
every weight, so greedy generation with the cache equals generation without it.

The weights are random (seeded) until the lesson trains them with autograd:
they are leaf tensors that require gradients, listed by ``parameters()``.

Torch only: this module is not exported from ``attnlib.torch.__all__``.  The
two backends export the same names with the same signatures, and the NumPy
backend has no twin of it.  Import it as::

    from attnlib.torch.seq2seq import TinySeq2Seq

Shapes: token ids are integer tensors ``(..., n)``; the memory is
``(..., n_src, d_model)``; logits are ``(..., n_tgt, tgt_vocab)``; attention
weights are ``(..., n_heads, n_q, n_k)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import _checks
from .attention import scaled_dot_product_attention
from .decoder import check_token_ids, feed_forward, random_matrix
from .kv_cache import KVCache, cached_attention
from .multihead import merge_heads, multi_head_attention, split_heads
from .positions import sinusoidal_positions

_ATTENTION = ("w_q", "w_k", "w_v", "w_o")
_CROSS = ("c_q", "c_k", "c_v", "c_o")


class TinySeq2Seq:
    """An encoder-decoder transformer with seeded random weights that autograd can train.

    Encoder block (``n_layers`` of them), pre-norm::

        x = x + MultiHead(LN(x), LN(x))                  (every source position sees every other)

    Decoder block (``n_layers``)::

        y = y + MultiHead(LN(y), LN(y), causal)          (masked self-attention)
        y = y + MultiHead(LN(y), LN(memory))             (cross-attention: queries from y)
        y = y + GELU(LN(y) W_1) W_2                      (both stacks have this MLP)

    ``memory = LN(x)`` after the last encoder block; the logits are
    ``LN(y) W_out``.  Tokens enter as an embedding plus a sinusoidal position code.

    Parameters
    ----------
    src_vocab, tgt_vocab, d_model, n_heads, n_layers : int >= 1
        ``n_heads`` divides ``d_model``.
    d_mlp : int, optional
        Width of the MLPs (default ``2 * d_model``).
    seed : int
        The same seed, the same initial weights.
    dtype, device
        Of every weight (default float32 on the CPU).

    Attributes
    ----------
    src_embedding : tensor (src_vocab, d_model)
    tgt_embedding : tensor (tgt_vocab, d_model)
    encoder : list of dict
        Per block ``w_q, w_k, w_v, w_o`` (d_model, d_model), ``w_1`` (d_model, d_mlp), ``w_2`` (d_mlp, d_model).
    decoder : list of dict
        As ``encoder``, plus the cross-attention's ``c_q, c_k, c_v, c_o`` (d_model, d_model).
    w_out : tensor (d_model, tgt_vocab)
    """

    def __init__(self, src_vocab, tgt_vocab, d_model=32, n_heads=4, n_layers=1, *, d_mlp=None, seed=0,
                 dtype=torch.float32, device="cpu"):
        self.src_vocab = _checks.check_count("src_vocab", src_vocab)
        self.tgt_vocab = _checks.check_count("tgt_vocab", tgt_vocab)
        self.d_model = _checks.check_count("d_model", d_model)
        self.n_heads = _checks.check_count("n_heads", n_heads)
        self.n_layers = _checks.check_count("n_layers", n_layers)
        self.d_head = _checks.check_heads(self.d_model, self.n_heads)
        self.d_mlp = 2 * self.d_model if d_mlp is None else _checks.check_count("d_mlp", d_mlp)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype 必须是浮点的 torch.dtype (floating dtype required)，收到 {dtype!r}。")
        gen = torch.Generator().manual_seed(_checks.check_seed(seed))

        def draw(rows, cols, std=None):
            return random_matrix(gen, rows, cols, std=std, dtype=dtype, device=device).requires_grad_(True)

        d, m = self.d_model, self.d_mlp

        def block(names):
            return {name: draw(d, d) for name in names} | {"w_1": draw(d, m), "w_2": draw(m, d)}

        self.src_embedding = draw(self.src_vocab, d, std=1.0)
        self.tgt_embedding = draw(self.tgt_vocab, d, std=1.0)
        self.encoder = [block(_ATTENTION) for _ in range(self.n_layers)]
        self.decoder = [block(_ATTENTION + _CROSS) for _ in range(self.n_layers)]
        self.w_out = draw(d, self.tgt_vocab)

    def parameters(self) -> list:
        """Every weight tensor (leaves that require gradients), for an optimiser."""
        blocks = [w for layer in self.encoder + self.decoder for w in layer.values()]
        return [self.src_embedding, self.tgt_embedding, *blocks, self.w_out]

    def n_parameters(self) -> int:
        """Numbers in the weights."""
        return sum(w.numel() for w in self.parameters())

    # -- the whole sequence at once (training, and reading the attention weights)

    def encode(self, src, *, need_weights=False):
        """The memory of ``src`` (..., n_src): ``LN`` of the last encoder block's output.

        Returns
        -------
        memory : tensor, shape (..., n_src, d_model)
        weights : list of tensor (..., n_heads, n_src, n_src), one per block (only with ``need_weights``)
        """
        src = check_token_ids(src, self.src_vocab, self.w_out.device)
        x = self._embed(self.src_embedding, src, 0)
        weights = []
        for w in self.encoder:
            h = F.layer_norm(x, (self.d_model,))
            out, a = multi_head_attention(h, h, w["w_q"], w["w_k"], w["w_v"], w["w_o"], self.n_heads,
                                          need_weights=need_weights)
            x = x + out
            x = x + feed_forward(x, w["w_1"], w["w_2"])
            weights.append(a)
        memory = F.layer_norm(x, (self.d_model,))
        return (memory, weights) if need_weights else memory

    def decode(self, tgt_in, memory, *, need_weights=False):
        """Logits of every position of the decoder's input ``tgt_in`` (..., n_tgt), given ``memory``.

        Position ``t`` sees ``tgt_in[..., :t + 1]`` (causal) and the whole memory.

        Returns
        -------
        logits : tensor, shape (..., n_tgt, tgt_vocab)
        weights : dict, only with ``need_weights``
            ``"self"`` and ``"cross"``: lists (one per block) of (..., n_heads, n_tgt, n_tgt)
            and (..., n_heads, n_tgt, n_src) tensors.
        """
        tgt_in = check_token_ids(tgt_in, self.tgt_vocab, self.w_out.device)
        y = self._embed(self.tgt_embedding, tgt_in, 0)
        weights = {"self": [], "cross": []}
        for w in self.decoder:
            h = F.layer_norm(y, (self.d_model,))
            out, a = multi_head_attention(h, h, w["w_q"], w["w_k"], w["w_v"], w["w_o"], self.n_heads,
                                          causal=True, need_weights=need_weights)
            y = y + out
            h = F.layer_norm(y, (self.d_model,))
            out, c = multi_head_attention(h, memory, w["c_q"], w["c_k"], w["c_v"], w["c_o"], self.n_heads,
                                          need_weights=need_weights)
            y = y + out
            y = y + feed_forward(y, w["w_1"], w["w_2"])
            weights["self"].append(a)
            weights["cross"].append(c)
        logits = F.layer_norm(y, (self.d_model,)) @ self.w_out
        return (logits, weights) if need_weights else logits

    def forward(self, src, tgt_in):
        """Logits (..., n_tgt, tgt_vocab) of ``tgt_in`` given ``src``: teacher forcing, as in training."""
        return self.decode(tgt_in, self.encode(src))

    # -- one token at a time, with caches

    def new_caches(self, memory):
        """The two caches of a generation: self-attention (empty) and cross-attention (filled from ``memory``).

        The memory's keys and values are computed here once per block; every later step reads them.

        Returns
        -------
        (KVCache, KVCache)
        """
        self_cache = KVCache(self.n_layers, self.n_heads, self.d_head, capacity=16)
        cross_cache = KVCache(self.n_layers, self.n_heads, self.d_head, capacity=memory.shape[-2])
        for i, w in enumerate(self.decoder):
            cross_cache.append(i, split_heads(memory @ w["c_k"], self.n_heads),
                               split_heads(memory @ w["c_v"], self.n_heads))
        return self_cache, cross_cache

    def step(self, tokens, caches):
        """Decode ``tokens`` (..., t_new) that follow what the self-attention cache holds; return their logits.

        Their keys and values are appended to the self-attention cache; the
        cross-attention reads the memory's keys and values from the second cache.

        Returns
        -------
        tensor, shape (..., t_new, tgt_vocab)
            Equal, up to rounding, to ``decode`` over the whole prefix at these positions.
        """
        self_cache, cross_cache = self._check_caches(caches)
        tokens = check_token_ids(tokens, self.tgt_vocab, self.w_out.device)
        y = self._embed(self.tgt_embedding, tokens, self_cache.length)
        for i, w in enumerate(self.decoder):
            h = F.layer_norm(y, (self.d_model,))
            q, k, v = (split_heads(h @ w[name], self.n_heads) for name in ("w_q", "w_k", "w_v"))
            y = y + merge_heads(cached_attention(q, k, v, self_cache, i)) @ w["w_o"]
            h = F.layer_norm(y, (self.d_model,))
            keys, values = cross_cache.read(i)  # computed once, before the first step
            out, _ = scaled_dot_product_attention(split_heads(h @ w["c_q"], self.n_heads), keys, values,
                                                  need_weights=False)
            y = y + merge_heads(out) @ w["c_o"]
            y = y + feed_forward(y, w["w_1"], w["w_2"])
        return F.layer_norm(y, (self.d_model,)) @ self.w_out

    @torch.no_grad()
    def generate(self, src, n_new, *, bos=0, use_cache=True):
        """Greedy decoding: ``n_new`` target tokens for ``src`` (..., n_src), starting from ``bos``.

        With ``use_cache`` each step feeds one token to ``step``; without it each
        step runs ``decode`` over the whole prefix again.  ``bos`` is not returned.

        Returns
        -------
        tensor of int64, shape (..., n_new)
        """
        memory = self.encode(src)
        n_new = _checks.check_count("n_new", n_new, minimum=0)
        tokens = torch.full((*memory.shape[:-2], 1), bos, dtype=torch.int64, device=memory.device)
        check_token_ids(tokens, self.tgt_vocab, memory.device)
        caches = self.new_caches(memory) if use_cache else None
        for _ in range(n_new):
            if use_cache:
                logits = self.step(tokens[..., -1:], caches)
            else:
                logits = self.decode(tokens, memory)  # the whole prefix, every step
            tokens = torch.cat([tokens, logits[..., -1, :].argmax(dim=-1, keepdim=True)], dim=-1)
        return tokens[..., 1:]

    # -- internals

    def _check_caches(self, caches):
        """``caches`` is the pair ``new_caches`` returns: two KVCaches of this model's shape, the second filled."""
        if not (isinstance(caches, (tuple, list)) and len(caches) == 2
                and all(isinstance(c, KVCache) for c in caches)):
            raise TypeError("caches 必须是 new_caches(memory) 返回的两个 KVCache (a pair of KVCache)，"
                            f"收到 {type(caches).__name__}。")
        want = (self.n_layers, self.n_heads, self.d_head)
        for c in caches:
            if (c.n_layers, c.n_heads, c.d_head) != want:
                raise ValueError(f"缓存的形状 (layers, heads, d_head) = {(c.n_layers, c.n_heads, c.d_head)} "
                                 f"与模型的 {want} 不同 (cache shape mismatch)。")
        if caches[1].length == 0:
            raise ValueError("交叉注意力的缓存是空的：请用 new_caches(memory) 建立 (empty cross-attention cache)。")
        return caches

    def _embed(self, table, tokens, start: int) -> torch.Tensor:
        n = tokens.shape[-1]
        positions = sinusoidal_positions(n, self.d_model, start=start).to(dtype=table.dtype, device=table.device)
        return table[tokens] + positions
