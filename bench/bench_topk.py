"""Chapter 20's top-k sparse attention: attention scores counted against dense attention, and its peak memory.

Targets (one head, d = 64, float32, causal, index scores given):

* ``topk_sparse_attention`` with top_k = 256 at n = 8,192 computes at most 1/16 of the attention scores
  that dense attention computes, in both backends.  Counted, not derived: every score top-k attention
  computes comes out of ``gathered_scores``, which is wrapped here to add up the sizes of what it
  returns; dense attention's scores are its n x n weights (``need_weights=True``).
* its peak memory grows like n k, not n^2: from n = 4,096 to 8,192 (k fixed) NumPy's peak, as
  ``tracemalloc`` sees it, grows at most 2.5x (dense attention's, which holds the n x n weights,
  grows about 4x; both printed).  The n x n index scores are an input, allocated before the
  measurement: the indexer that makes them is the part whose cost still grows like n^2
  (chapter 20).  ``tracemalloc`` does not see torch's allocator, so memory is measured in NumPy only.

The outputs must equal dense attention with a mask that is True on the selected keys, checked at
n = 1,024 (the dense reference at 8,192 would hold 8,192^2 weights more).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from bench_efficiency import peak_bytes

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import sparse as nsparse
from attnlib.torch import sparse as tsparse

N, TOP_K, D = 8192, 256, 64
SCORE_TARGET = 1 / 16
GROWTH_TARGET = 2.5


def inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, D)).astype(np.float32) for _ in range(3))
    return q, k, v, rng.normal(size=(n, n)).astype(np.float32)


@contextlib.contextmanager
def counted(module):
    """Count the attention scores ``module.gathered_scores`` returns inside the block: yields a one-item list."""
    total, original = [0], module.gathered_scores

    def counting(*args):
        scores = original(*args)
        total[0] += int(np.prod(tuple(scores.shape)))
        return scores

    module.gathered_scores = counting
    try:
        yield total
    finally:
        module.gathered_scores = original


def score_counts(name: str) -> dict:
    module, lib, conv = (nsparse, anp, lambda a: a) if name == "numpy" else (tsparse, att, torch.from_numpy)
    q, k, v, index = (conv(a) for a in inputs(N))
    with counted(module) as total, torch.no_grad():
        module.topk_sparse_attention(q, k, v, index, TOP_K)
    del index
    dense = lib.scaled_dot_product_attention(q, k, v, causal=True)[1]  # (N, N): every score dense attention takes
    return {"top-k": total[0], "dense": int(np.prod(tuple(dense.shape)))}


def peaks() -> dict:
    """NumPy's peak bytes of top-k and of dense attention at N / 2 and N."""
    out = {}
    for n in (N // 2, N):
        q, k, v, index = inputs(n)
        out[n] = {"top-k": peak_bytes(lambda: nsparse.topk_sparse_attention(q, k, v, index, TOP_K)),  # noqa: B023
                  "dense": peak_bytes(lambda: anp.scaled_dot_product_attention(q, k, v, causal=True))}  # noqa: B023
    return out


def agrees(n: int = 1024) -> bool:
    """Top-k output == dense attention masked to the keys the index scores select (the reference selection)."""
    q, k, v, index = inputs(n, seed=1)
    visible = anp.causal_mask(n, n)
    order = np.argsort(-np.where(visible, index, -np.inf), axis=-1, kind="stable")[:, :TOP_K]  # ties: lower index
    mask = np.zeros((n, n), dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    expected = anp.scaled_dot_product_attention(q, k, v, mask=mask & visible)[0]
    ok = np.allclose(nsparse.topk_sparse_attention(q, k, v, index, TOP_K), expected, rtol=1e-4, atol=1e-5)
    got = tsparse.topk_sparse_attention(*(torch.from_numpy(a) for a in (q, k, v, index)), TOP_K)
    return ok and np.allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5)


def main() -> None:
    print(f"topk_sparse_attention, top_k = {TOP_K}, one head of width {D}, float32, causal:")
    missed = []
    same = agrees()
    print(f"  equals dense attention masked to the selected keys (n = 1,024, both backends): {same}  "
          f"{'ok' if same else 'MISSED'}")
    if not same:
        missed.append("output")
    for name in ("numpy", "torch"):
        c = score_counts(name)
        ratio = c["top-k"] / c["dense"]
        ok = ratio <= SCORE_TARGET
        print(f"  {name:5s} attention scores computed at n = {N:,} (counted): top-k {c['top-k']:,}, dense "
              f"{c['dense']:,}, ratio 1/{1 / ratio:.0f} (target <= 1/{1 / SCORE_TARGET:.0f})  "
              f"{'ok' if ok else 'MISSED'}")
        if not ok:
            missed.append(f"{name} score ratio {ratio:.4f}")
    p = peaks()
    small, large = p[N // 2], p[N]
    for kind in ("top-k", "dense"):
        print(f"  numpy {kind:5s} peak memory: {small[kind] / 2**20:7.1f} MiB at n = {N // 2:,}, "
              f"{large[kind] / 2**20:7.1f} MiB at n = {N:,}: x{large[kind] / small[kind]:.2f} "
              f"({large[kind] / (N * TOP_K * 4):.1f} x n k float32 numbers at n = {N:,})")
    growth = large["top-k"] / small["top-k"]
    ok = growth <= GROWTH_TARGET < large["dense"] / small["dense"]
    print(f"  top-k's peak grows x{growth:.2f} when n doubles (target <= {GROWTH_TARGET}, dense: "
          f"x{large['dense'] / small['dense']:.2f})  {'ok' if ok else 'MISSED'}")
    if not ok:
        missed.append(f"peak growth {growth:.2f}")
    assert not missed, "; ".join(missed)


if __name__ == "__main__":
    main()
