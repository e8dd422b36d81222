"""Speculative decoding and tree attention (chapter 24), torch backend.

The same names, signatures and results as ``attnlib.numpy.speculative`` (read
that module for the rules): the acceptance step, the mask and positions of a
flattened tree, keeping an accepted tree path in the cache, an early-exit draft
and the draft-verify loop.  Distributions keep their dtype and device; masks
and positions are built on the CPU and moved by ``LlamaModel.step``.  Sampling
draws with a NumPy generator from float64 copies of the probabilities, so both
backends draw the same tokens from the same generator state.
"""

from __future__ import annotations

import numpy as np
import torch

from ..numpy.speculative import _check_accept as _check_accept_np
from ..numpy.speculative import _check_distributions as _check_distributions_np
from ..numpy.speculative import (
    _check_nodes,
    _check_start,
    _draft_and_verify,
    _early_exit,
    check_parents,
)
from ..numpy.speculative import tree_mask as _tree_mask_np
from ..numpy.speculative import tree_positions as _tree_positions_np
from ._tensors import as_float


def residual_distribution(p, q):
    """``norm(max(0, p - q))`` over the last axis (``p`` where nothing is left); see the NumPy twin."""
    p, q = as_float(p, "p"), as_float(q, "q")
    _check_distributions_np(p=p.detach().cpu().double().numpy(), q=q.detach().cpu().double().numpy())
    rest = torch.clamp(p - q, min=0.0)
    total = rest.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, rest / torch.where(total > 0, total, torch.ones_like(total)), p)


def accept_drafts(p, q, draft, u):
    """Drafts accepted (``u[i] * q[i, d_i] < p[i, d_i]``) and the next token's distribution; see the NumPy twin.

    Returns
    -------
    n : int
    next_distribution : tensor, shape (V,)
    """
    p, q = as_float(p, "p"), as_float(q, "q")
    u_np = u.detach().cpu().double().numpy() if isinstance(u, torch.Tensor) else u
    draft_np = draft.detach().cpu().numpy() if isinstance(draft, torch.Tensor) else draft
    _, _, drafts, u_np = _check_accept_np(p.detach().cpu().double().numpy(), q.detach().cpu().double().numpy(),
                                          draft_np, u_np)
    for i, d in enumerate(drafts):
        if not float(u_np[i]) * q[i, d] < p[i, d]:
            return i, residual_distribution(p[i], q[i])
    return len(drafts), p[len(drafts)]


def tree_mask(parents):
    """``mask[i, j]`` True iff node j is node i or an ancestor; see ``attnlib.numpy.tree_mask``."""
    return torch.from_numpy(_tree_mask_np(parents))


def tree_positions(parents, start=0):
    """``start + depth`` of every node (a root at depth 0), int64; see ``attnlib.numpy.tree_positions``."""
    return torch.from_numpy(_tree_positions_np(parents, start))


def gather_path(cache, start, nodes):
    """Keep the cache's first ``start`` positions then the tree nodes ``nodes``; see ``attnlib.numpy.gather_path``."""
    start = _check_start(start, cache.length)
    nodes = _check_nodes(nodes, cache.length - start)
    kept = []
    for layer in range(cache.n_layers):
        keys, values = cache.read(layer)
        index = torch.as_tensor(start + nodes, device=keys.device)
        kept.append((keys.index_select(-2, index), values.index_select(-2, index)))  # copies
    cache.truncate(start)
    if len(nodes):
        for layer, (keys, values) in enumerate(kept):
            cache.append(layer, keys, values)


def early_exit(model, n_layers):
    """The first ``n_layers`` layers of ``model`` with its final norm and read-out, sharing the weights."""
    from .llama import LlamaModel

    return _early_exit(model, n_layers, LlamaModel)


def verify_tree(model, cache, tokens, parents):
    """A flattened tree run after ``cache`` in one step, each node seeing the cache and its ancestors: logits (n, V)."""
    parents = check_parents(parents)
    tokens = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(np.asarray(tokens))
    if tuple(tokens.shape) != (len(parents),):
        raise ValueError(f"tokens 与 parents 的长度必须相同：tokens 的形状 {tuple(tokens.shape)}，"
                         f"parents 有 {len(parents)} 个 (shape mismatch)。")
    n, start = len(parents), cache.length
    mask = torch.cat([torch.ones((n, start), dtype=torch.bool), tree_mask(parents)], dim=1)
    return model.step(tokens, cache, mask=mask, positions=tree_positions(parents, start).to(model.device))


@torch.no_grad()
def speculative_generate(target, draft, tokens, max_new_tokens, k, *, rng=None, temperature=1.0):
    """Draft ``k`` tokens, verify them in one target step, keep the accepted ones; see the NumPy twin.

    Returns
    -------
    new : list of int
    accepted : list of int
        Drafts accepted at each verification.
    """
    return _draft_and_verify(target, draft, tokens, max_new_tokens, k, rng, temperature,
                             as_float64=lambda logits: logits.detach().cpu().double().numpy())

