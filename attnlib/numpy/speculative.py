"""Speculative decoding and tree attention (chapter 24), NumPy backend.

A cheap draft model proposes ``k`` tokens; the target model scores all of them
in one cached forward (causal attention over the ``k + 1`` new positions,
chapter 11) and keeps the longest prefix it accepts, then adds one token of its
own.  The pieces:

* :func:`accept_drafts`: the acceptance rule of Leviathan et al. (2023) and
  Chen et al. (2023).  Draft token ``d_i`` (drawn from ``q_i``) is accepted when
  ``u_i < min(1, p_i(d_i) / q_i(d_i))``; at the first rejection the next token is
  drawn from the residual :func:`residual_distribution`
  ``norm(max(0, p_i - q_i))``; when all ``k`` are accepted it is drawn from
  ``p_k``.  The uniform numbers ``u`` are inputs and the next token's
  distribution is returned, so the distribution of the output can be computed
  exactly: it is the target's ``p``.
* :func:`tree_mask` and :func:`tree_positions`: several candidate
  continuations verified in one forward (SpecInfer, Miao et al. 2023; Medusa,
  Cai et al. 2024).  The tree is flattened into a list of nodes, each with the
  index of its parent (``-1``: it follows the cached prefix directly); node
  ``i`` may attend to itself and its ancestors (and the whole cache), and its
  RoPE position is ``start + depth(i)`` with ``depth = 0`` for a root.
* :func:`gather_path`: after acceptance along a tree path the accepted nodes
  are not contiguous in the flattened order; the cache keeps the prefix and
  exactly the path's keys and values, in order.
* :func:`early_exit`: a draft from the same weights, the first ``n_layers``
  layers then the final norm and the shared read-out.
* :func:`speculative_generate`: draft, verify, accept, roll both caches back
  (``KVCache.truncate``); greedy (the output is the target's greedy text) or
  sampled.  :func:`verify_tree` runs a flattened tree through the target.

The torch twin (``attnlib.torch.speculative``) has the same names and signatures.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ._arrays import as_float
from .softmax import softmax


def residual_distribution(p, q):
    """``norm(max(0, p - q))`` over the last axis: where the target wants more than the draft offered.

    Parameters
    ----------
    p, q : array_like of float, shape (..., V)
        Probability distributions (non-negative, each row summing to 1).

    Returns
    -------
    ndarray, shape (..., V)
        A row where ``p <= q`` everywhere (``p == q``: the draft is never rejected
        there) returns ``p`` itself.
    """
    p, q = _check_distributions(p=p, q=q)
    rest = np.maximum(p - q, 0.0)
    total = rest.sum(axis=-1, keepdims=True)
    return np.where(total > 0, rest / np.where(total > 0, total, 1.0), p)


def accept_drafts(p, q, draft, u):
    """The acceptance step of speculative sampling: how many drafts are kept and what the next token is drawn from.

    Parameters
    ----------
    p : array_like of float, shape (k + 1, V)
        The target's distributions at the k + 1 verified positions (row i: the
        next token after the prefix and drafts ``0 .. i - 1``).
    q : array_like of float, shape (k, V)
        The draft's distributions that drafts ``0 .. k - 1`` were drawn from.
    draft : sequence of int, shape (k,)
    u : array_like of float in [0, 1), shape (k,)
        Draft ``i`` is accepted when ``u[i] * q[i, d_i] < p[i, d_i]`` (that is
        ``u[i] < min(1, p/q)``); the first rejection ends the run.

    Returns
    -------
    n : int
        Drafts accepted, ``0 .. k``.
    next_distribution : ndarray, shape (V,)
        ``residual_distribution(p[n], q[n])`` after a rejection, ``p[k]`` when all were accepted.
    """
    p, q, draft, u = _check_accept(p, q, draft, u)
    k = len(draft)
    for i, d in enumerate(draft):
        if not u[i] * q[i, d] < p[i, d]:
            return i, residual_distribution(p[i], q[i])
    return k, p[k]


def tree_mask(parents):
    """The attention mask of a flattened tree: ``mask[i, j]`` True iff node j is node i or one of its ancestors.

    Parameters
    ----------
    parents : sequence of int, shape (n,)
        ``parents[i]`` is the index of node i's parent, smaller than i, or -1
        for a node that follows the cached prefix directly.

    Returns
    -------
    ndarray of bool, shape (n, n)
        Lower triangular; a chain ``[-1, 0, 1, …]`` gives the causal mask.
        Together with the cache, the mask a tree verification uses is
        ``[ones((n, cached)), tree_mask(parents)]``.
    """
    parents = check_parents(parents)
    n = len(parents)
    mask = np.eye(n, dtype=bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]  # the parent's ancestors, computed already (parent < i)
    return mask


def tree_positions(parents, start=0):
    """The RoPE positions of a flattened tree's nodes: ``start + depth``, a root at depth 0.

    Parameters
    ----------
    parents : sequence of int, shape (n,)
        As in :func:`tree_mask`.
    start : int >= 0
        The position of a root: the cache's length when the tree follows it.

    Returns
    -------
    ndarray of int64, shape (n,)
        Every node sits where it would sit if its branch were verified alone.
    """
    parents = check_parents(parents)
    start = _checks.check_count("start", start, minimum=0)
    depth = np.zeros(len(parents), dtype=np.int64)
    for i, parent in enumerate(parents):
        if parent >= 0:
            depth[i] = depth[parent] + 1
    return start + depth


def gather_path(cache, start, nodes):
    """Keep the cache's first ``start`` positions, then the tree nodes ``nodes`` (in that order), in every layer.

    A tree of n nodes was appended at positions ``start .. start + n - 1``; the
    accepted path is generally not contiguous there.  Its keys and values are
    copied out, the cache truncated to ``start`` and the path appended again:
    afterwards the cache holds exactly what running the prefix and then the
    path token by token would have left (the keys were rotated at the nodes'
    depths, which are the path's positions).

    Parameters
    ----------
    cache : KVCache
    start : int, 0 <= start <= cache.length
    nodes : sequence of int
        Indices into the flattened tree (0-based, each ``< cache.length - start``),
        a root first, each node the parent of the next.
    """
    start = _check_start(start, cache.length)
    nodes = _check_nodes(nodes, cache.length - start)
    kept = []
    for layer in range(cache.n_layers):
        keys, values = cache.read(layer)
        kept.append((keys[..., start + nodes, :].copy(), values[..., start + nodes, :].copy()))
    cache.truncate(start)
    if len(nodes):
        for layer, (keys, values) in enumerate(kept):
            cache.append(layer, keys, values)


def early_exit(model, n_layers):
    """A draft from the same weights: the first ``n_layers`` layers of ``model``, its final norm and read-out.

    Parameters
    ----------
    model : LlamaModel
    n_layers : int, 1 <= n_layers <= model.n_layers

    Returns
    -------
    LlamaModel
        Shares ``model``'s weights (nothing is copied) and has its own caches
        (``new_cache`` has ``n_layers`` layers).
    """
    from .llama import LlamaModel

    return _early_exit(model, n_layers, LlamaModel)


def verify_tree(model, cache, tokens, parents):
    """Run a flattened tree of candidates after ``cache`` in one step: each node sees the cache and its ancestors.

    Parameters
    ----------
    model : LlamaModel
    cache : KVCache
        The target's cache; the tree's keys and values are appended to it
        (keep the accepted path with :func:`gather_path`).
    tokens : sequence of int, shape (n,)
    parents : sequence of int, shape (n,)
        As in :func:`tree_mask`.

    Returns
    -------
    ndarray, shape (n, vocab_size)
        Row i: the target's logits for the token after node i, equal (up to
        rounding) to those of running node i's branch alone after the cache.
    """
    parents = check_parents(parents)
    tokens = np.asarray(tokens)
    if tokens.shape != (len(parents),):
        raise ValueError(f"tokens 与 parents 的长度必须相同：tokens 的形状 {tokens.shape}，"
                         f"parents 有 {len(parents)} 个 (shape mismatch)。")
    n, start = len(parents), cache.length
    mask = np.concatenate([np.ones((n, start), dtype=bool), tree_mask(parents)], axis=1)
    return model.step(tokens, cache, mask=mask, positions=tree_positions(parents, start))


def speculative_generate(target, draft, tokens, max_new_tokens, k, *, rng=None, temperature=1.0):
    """Generate after ``tokens``: ``draft`` proposes ``k`` tokens, ``target`` verifies them in one step.

    Parameters
    ----------
    target, draft : LlamaModel
        The same vocabulary (e.g. ``draft = early_exit(target, n)``).
    tokens : sequence of int, shape (n,), n >= 1
        The prompt.
    max_new_tokens : int >= 0
    k : int >= 1
        Drafts per verification.
    rng : numpy.random.Generator, optional
        ``None``: greedy (a draft is accepted iff it is the target's argmax; the
        output is exactly the target's greedy text, up to ties).  Otherwise
        sampling at ``temperature`` with :func:`accept_drafts`: the output has
        the target's distribution.
    temperature : float > 0
        Sampling only.

    Returns
    -------
    new : list of int
        The new tokens only.
    accepted : list of int
        Drafts accepted at each verification (one target step each).
    """
    return _draft_and_verify(target, draft, tokens, max_new_tokens, k, rng, temperature,
                             as_float64=lambda logits: np.asarray(logits, dtype=np.float64))


# -- checks and small helpers (shared with the torch backend)

def check_parents(parents) -> list[int]:
    """A flattened tree's parent list as Python ints: each ``-1`` or an earlier node's index."""
    try:
        arr = np.asarray(parents)
    except (TypeError, ValueError):
        arr = np.asarray([], dtype=float)
    if arr.ndim != 1 or len(arr) < 1 or arr.dtype.kind not in "iu":
        raise ValueError(f"parents 必须是非空的一维整数序列（每个节点的父节点下标，-1 表示直接接在缓存之后），"
                         f"收到 {parents!r} (parents must be a 1-D list of ints)。")
    out = [int(v) for v in arr]
    for i, parent in enumerate(out):
        if not -1 <= parent < i:
            raise ValueError(f"节点 {i} 的父节点必须是 -1 或一个更早的节点（0 到 {i - 1}），收到 {parent} "
                             f"(a parent must come before its child)。")
    return out


def _check_distributions(**named):
    arrays = {name: as_float(x, name).astype(np.float64) for name, x in named.items()}
    shapes = {name: a.shape for name, a in arrays.items()}
    for name, a in arrays.items():
        if a.ndim < 1 or a.shape[-1] < 1:
            raise ValueError(f"{name} 必须是概率分布（最后一维是词表），收到形状 {a.shape} (need a distribution)。")
        if not np.all(np.isfinite(a)) or np.any(a < 0) or not np.allclose(a.sum(axis=-1), 1.0, atol=1e-6):
            raise ValueError(f"{name} 的每一行必须是概率分布：非负、有限、加起来等于 1 "
                             f"(rows must be probability distributions)。")
    if len(set(shapes.values())) > 1:
        raise ValueError(f"p 与 q 的形状必须相同，收到 {shapes} (shape mismatch)。")
    return list(arrays.values())


def _check_accept(p, q, draft, u):
    p, = _check_distributions(p=p)
    q, = _check_distributions(q=q)
    if p.ndim != 2 or q.ndim != 2 or p.shape[0] != q.shape[0] + 1 or p.shape[1] != q.shape[1] or q.shape[0] < 1:
        raise ValueError(f"p 的形状应为 (k + 1, V)、q 的形状应为 (k, V)，k >= 1，收到 p {p.shape}、q {q.shape} "
                         f"(shape mismatch)。")
    k, vocab = q.shape
    draft = np.asarray(draft)
    if draft.shape != (k,) or draft.dtype.kind not in "iu" or draft.min() < 0 or draft.max() >= vocab:
        raise ValueError(f"draft 必须是 {k} 个 0 到 {vocab - 1} 之间的词元编号，收到 {draft.tolist()!r} "
                         f"(draft tokens out of range)。")
    u = as_float(u, "u").astype(np.float64)
    if u.shape != (k,) or np.any(u < 0) or np.any(u >= 1) or not np.all(np.isfinite(u)):
        raise ValueError(f"u 必须是 {k} 个 [0, 1) 之间的均匀随机数，收到形状 {u.shape} (u must be k uniforms)。")
    for i, d in enumerate(draft):
        if q[i, d] <= 0:
            raise ValueError(f"第 {i} 个草稿词元 {int(d)} 在 q 中的概率为 0：它不可能从 q 抽出 "
                             f"(a draft must have probability > 0 under q)。")
    return p, q, [int(d) for d in draft], u


def _check_start(start, length: int) -> int:
    if not isinstance(start, (int, np.integer)) or isinstance(start, bool) or not 0 <= start <= length:
        raise ValueError(f"start 必须是 0 到 {length} 之间的整数（缓存的长度），收到 {start!r} (start out of range)。")
    return int(start)


def _check_nodes(nodes, n_tree: int) -> np.ndarray:
    arr = np.asarray(nodes, dtype=np.int64) if len(nodes) else np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or (len(arr) and (arr.min() < 0 or arr.max() >= n_tree)) or len(set(arr.tolist())) != len(arr):
        raise ValueError(f"nodes 必须是树中不重复的节点下标（0 到 {n_tree - 1}），收到 {nodes!r} "
                         f"(nodes out of range)。")
    return arr


def _early_exit(model, n_layers, cls):
    n_layers = _checks.check_count("n_layers", n_layers)
    if n_layers > model.n_layers:
        raise ValueError(f"草稿的层数必须在 1 到 {model.n_layers} 之间，收到 {n_layers} (too many layers)。")
    weights = {"token_embd.weight": model.embedding, "output_norm.weight": model.output_norm}
    if model.output is not model.embedding:
        weights["output.weight"] = model.output
    for i in range(n_layers):
        weights.update({f"blk.{i}.{name}.weight": w for name, w in model.layers[i].items()})
    return cls({**model.config, "n_layers": n_layers}, weights)


def _check_generate(target, draft, tokens, max_new_tokens, k, rng, temperature):
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"目标模型与草稿模型的词表必须相同，收到 {target.vocab_size} 与 {draft.vocab_size} "
                         f"(vocabularies differ)。")
    prompt = [int(i) for i in target._check_tokens(tokens)]
    max_new_tokens = _checks.check_count("max_new_tokens", max_new_tokens, minimum=0)
    k = _checks.check_count("k", k)
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng 必须是 numpy.random.Generator 或 None（贪心），收到 {type(rng).__name__} "
                        f"(rng must be a numpy Generator)。")
    temperature = _checks.check_temperature(temperature)
    return prompt, max_new_tokens, k, temperature


def _probabilities(logits, temperature: float) -> np.ndarray:
    """softmax(logits / temperature) of float64 logits, what ``Generator.choice`` draws from."""
    return softmax(np.asarray(logits, dtype=np.float64), temperature=temperature)


def _draft_and_verify(target, draft, tokens, max_new_tokens, k, rng, temperature, *, as_float64):
    """The loop of :func:`speculative_generate` for both backends.

    ``as_float64(logits)`` gives a model's logits as a float64 NumPy array (the
    torch twin copies them off the device); greedy choices and sampling both read
    that array, so the two backends pick and draw the same tokens.
    """
    prompt, max_new_tokens, k, temperature = _check_generate(target, draft, tokens, max_new_tokens, k, rng,
                                                             temperature)
    seq = list(prompt)
    room = len(seq) + max_new_tokens + k + 1
    t_cache, d_cache = target.new_cache(room), draft.new_cache(room)
    if len(seq) > 1:
        target.step(seq[:-1], t_cache, logits_at=-1)  # the cache holds all but the last token
    accepted = []
    while len(seq) - len(prompt) < max_new_tokens:
        drafts, q = [], []
        feed = seq[d_cache.length:]  # what the draft has not seen yet
        for _ in range(k):
            logits = as_float64(draft.step(feed, d_cache, logits_at=-1))
            if rng is None:
                d = int(np.argmax(logits))
            else:
                q.append(_probabilities(logits, temperature))
                d = int(rng.choice(len(q[-1]), p=q[-1]))
            drafts.append(d)
            feed = [d]
        logits = as_float64(target.step([seq[-1]] + drafts, t_cache))  # (k + 1, V)
        if rng is None:
            best = np.argmax(logits, axis=-1)
            n = next((i for i in range(k) if drafts[i] != best[i]), k)
            token = int(best[n])
        else:
            p = _probabilities(logits, temperature)
            n, dist = accept_drafts(p, np.stack(q), drafts, rng.random(k))
            token = int(rng.choice(len(dist), p=dist))
        base = len(seq)
        seq += drafts[:n] + [token]
        accepted.append(n)
        t_cache.truncate(base + n)  # the prompt, the accepted drafts; not the new token
        d_cache.truncate(min(d_cache.length, base + n))
    return seq[len(prompt):len(prompt) + max_new_tokens], accepted
