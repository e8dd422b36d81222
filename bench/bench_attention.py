"""Attention speed and memory, as ratios measured side by side in one run.

Baseline: "the two matrix products alone" (q @ k^T, then scores @ v), the
work no attention implementation can skip.  Every variant is timed in the
same loop, interleaved, and the best of several repeats is kept, so machine
noise hits all of them alike.  Targets (issue 2):

* NumPy, with weights:          <= 2.0 x the two products
* NumPy, need_weights=False:    <= 1.6 x the two products
* torch CPU, need_weights=False <= 1.1 x torch's fused F.scaled_dot_product_attention
* torch CPU, with weights:      <= 2.0 x the two products (torch)
* NumPy peak memory:            <= one n x n buffer plus inputs and output
"""

from __future__ import annotations

import math
import time
import tracemalloc

import numpy as np
import torch
import torch.nn.functional as F

from attnlib import numpy as anp
from attnlib import torch as att

SIZES = (1024, 2048, 4096)
D = 64
REPEATS = 7


def textbook(q, k, v):
    """The blog-post version: every step allocates a new n x n array."""
    scores = q @ k.T / np.sqrt(k.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def best_times(fns: dict, repeats: int = REPEATS) -> dict:
    """Best wall time of each function, the functions interleaved in every round."""
    best = dict.fromkeys(fns, math.inf)
    for fn in fns.values():
        fn()  # warm-up: page faults, thread pools, caches
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def numpy_case(n: int) -> dict:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, D), dtype=np.float32) for _ in range(3))
    return best_times({
        "two products": lambda: (q @ k.T) @ v,
        "textbook": lambda: textbook(q, k, v),
        "anp weights": lambda: anp.scaled_dot_product_attention(q, k, v),
        "anp no weights": lambda: anp.scaled_dot_product_attention(q, k, v, need_weights=False),
        "anp causal": lambda: anp.scaled_dot_product_attention(q, k, v, causal=True),
    })


def torch_case(n: int) -> dict:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, D, generator=g) for _ in range(3))
    with torch.inference_mode():
        return best_times({
            "two products": lambda: (q @ k.mT) @ v,
            "F.sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "att no weights": lambda: att.scaled_dot_product_attention(q, k, v, need_weights=False),
            "att weights": lambda: att.scaled_dot_product_attention(q, k, v),
        })


def peak_ratio(n: int, need_weights: bool) -> float:
    """Peak bytes allocated by one NumPy call, in units of one n x n float32 buffer."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, D), dtype=np.float32) for _ in range(3))
    tracemalloc.start()
    anp.scaled_dot_product_attention(q, k, v, need_weights=need_weights)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / (n * n * 4)


def verdict(ratio: float, target: float) -> str:
    return f"{ratio:5.2f}x  (target <= {target}x) {'ok' if ratio <= target else 'MISSED'}"


def main() -> None:
    print(f"d={D}, float32, best of {REPEATS}; torch threads={torch.get_num_threads()}")
    for n in SIZES:
        t = numpy_case(n)
        base = t["two products"]
        print(f"\nNumPy n={n}: two products {base * 1e3:.1f} ms")
        print(f"  textbook            {t['textbook'] / base:5.2f}x  (for comparison)")
        print(f"  anp weights         {verdict(t['anp weights'] / base, 2.0)}")
        print(f"  anp need_weights=F  {verdict(t['anp no weights'] / base, 1.6)}")
        print(f"  anp causal          {t['anp causal'] / base:5.2f}x  (no target)")
        print(f"  peak memory         with weights {peak_ratio(n, True):.2f}, "
              f"without {peak_ratio(n, False):.2f} n x n buffers (target <= 1 + inputs/output)")
    for n in SIZES:
        t = torch_case(n)
        print(f"\ntorch CPU n={n}: two products {t['two products'] * 1e3:.1f} ms, F.sdpa {t['F.sdpa'] * 1e3:.1f} ms")
        print(f"  att need_weights=F / F.sdpa   {verdict(t['att no weights'] / t['F.sdpa'], 1.1)}")
        print(f"  att weights / two products    {verdict(t['att weights'] / t['two products'], 2.0)}")
        print(f"  F.sdpa / two products         {t['F.sdpa'] / t['two products']:5.2f}x  (for comparison)")


if __name__ == "__main__":
    main()
