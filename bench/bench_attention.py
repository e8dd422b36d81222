"""Attention speed and memory, as ratios measured side by side in one run.

Each ratio compares two timings taken in the same run: the variant's and its
baseline's, each the minimum over repeated rounds (noise on a shared machine
only ever adds time, so the minimum is the best estimate of the real cost).
A variant and its baseline are interleaved round by round in a small group of
their own, so that a slow spell of the machine hits both.

Baselines:

* the **exp floor** (NumPy): one product ``q k^T`` into an n x n array, one
  in-place ``np.exp`` over it, one product with ``v``.  No softmax can do less:
  it must form the scores, exponentiate each one and weight the values;
* torch's fused kernel: ``F.scaled_dot_product_attention`` on 4-d inputs;
* the same three steps as the exp floor, done in torch.

Targets:

* NumPy, with weights:             <= 2.0 x the exp floor
* NumPy, need_weights=False:       <= 1.3 x the exp floor
* torch CPU, need_weights=False:   <= 1.1 x torch's fused F.scaled_dot_product_attention
* torch CPU, with weights:         <= 1.5 x the three steps in torch
* NumPy peak memory:               <= one n x n buffer plus inputs and output (with weights), far less without
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
from attnlib.numpy import flash

SIZES = (1024, 2048, 4096)
D = 64
ROUNDS = 11
MIN_CLOCK = 0.05  # seconds of calls per timing: one call of a few ms mostly measures cache state

TARGETS = {"anp weights": 2.0, "anp no weights": 1.3, "att no weights": 1.1, "att weights": 1.5}


def textbook(q, k, v):
    """The blog-post version: every step allocates a new n x n array."""
    scores = q @ k.T / np.sqrt(k.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def min_times(fns: dict, rounds: int = ROUNDS) -> dict:
    """The minimum over ``rounds`` of each function's time per call, in seconds; functions interleaved."""
    def clock(fn, number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number

    numbers = {}
    for name, fn in fns.items():
        fn()  # warm-up: page faults, thread pools, caches
        numbers[name] = max(1, math.ceil(MIN_CLOCK / clock(fn, 1)))
    best = dict.fromkeys(fns, math.inf)
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], clock(fn, numbers[name]))
    return best


def without_bound_shortcut(q, k, v):
    """The output-only path with every block taking the running maximum (flash.BOUND_SHORTCUT off)."""
    flash.BOUND_SHORTCUT = False
    try:
        return anp.scaled_dot_product_attention(q, k, v, need_weights=False)
    finally:
        flash.BOUND_SHORTCUT = True


def numpy_case(n: int) -> dict:
    """Each variant's time divided by the exp floor's, both timed in the same small interleaved group.

    The variants that are compared with each other (a trick on and off) share their group.
    """
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, D), dtype=np.float32) for _ in range(3))
    q_scaled = q * np.float32(1 / math.sqrt(D))

    def exp_floor():
        s = q_scaled @ k.T
        np.exp(s, out=s)
        return s @ v

    groups = [
        {"anp weights": lambda: anp.scaled_dot_product_attention(q, k, v)},
        {"anp no weights": lambda: anp.scaled_dot_product_attention(q, k, v, need_weights=False),
         "no weights, no shortcut": lambda: without_bound_shortcut(q, k, v)},
        {"anp causal": lambda: anp.scaled_dot_product_attention(q, k, v, causal=True)},
        {"anp causal no weights": lambda: anp.scaled_dot_product_attention(q, k, v, causal=True, need_weights=False),
         # the same without the CAUSAL_BLOCKS rule: blocks sized as for non-causal attention
         "causal, plain blocks": lambda: flash.tiled_attention(q, k, v, causal=True,
                                                               block_size=flash.block_sizes(None, n, n, 1))},
        {"textbook": lambda: textbook(q, k, v)},
    ]
    ratios = {}
    for group in groups:
        t = min_times({"exp floor": exp_floor, **group})
        ratios |= {name: t[name] / t["exp floor"] for name in group} | {"floor ms": t["exp floor"] * 1e3}
    return ratios


def torch_case(n: int) -> dict:
    """attnlib gets 2-d inputs (n, d); F.sdpa gets them as 4-d (1, 1, n, d), the shape its fused kernel takes."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, D, generator=g) for _ in range(3))
    q4, k4, v4 = q[None, None], k[None, None], v[None, None]
    q_scaled = q / math.sqrt(D)

    def three_steps():
        s = q_scaled @ k.mT
        s.exp_()
        return s @ v

    with torch.inference_mode():
        return min_times({
            "three steps": three_steps,
            "F.sdpa": lambda: F.scaled_dot_product_attention(q4, k4, v4),
            "att weights": lambda: att.scaled_dot_product_attention(q, k, v),
            "att no weights": lambda: att.scaled_dot_product_attention(q, k, v, need_weights=False),
            "F.sdpa 2-d": lambda: F.scaled_dot_product_attention(q, k, v),
        })


def peak_ratio(n: int, **kwargs) -> float:
    """Peak bytes allocated by one NumPy call, in units of one n x n float32 buffer."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, D), dtype=np.float32) for _ in range(3))
    tracemalloc.start()
    anp.scaled_dot_product_attention(q, k, v, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / (n * n * 4)


def verdict(name: str, ratio: float) -> str:
    target = TARGETS[name]
    return f"{ratio:5.2f}x  (target <= {target}x) {'ok' if ratio <= target else 'MISSED'}"


def main() -> None:
    print(f"d={D}, float32; each time the minimum of {ROUNDS} rounds; torch threads={torch.get_num_threads()}")
    for n in SIZES:
        r = numpy_case(n)
        print(f"\nNumPy n={n}: exp floor (q k^T, exp in place, @ v) {r['floor ms']:.1f} ms = 1.00x")
        print(f"  anp with weights         {verdict('anp weights', r['anp weights'])}")
        fast, slow = r["anp no weights"], r["no weights, no shortcut"]
        print(f"  anp need_weights=False   {verdict('anp no weights', fast)}  ({slow:.2f}x without the"
              f" bound shortcut: it saves {1 - fast / slow:.0%})")
        print(f"  anp causal               {r['anp causal']:5.2f}x  (no target)")
        causal, plain = r["anp causal no weights"], r["causal, plain blocks"]
        print(f"  anp causal, no weights   {causal:5.2f}x  (no target; {plain:.2f}x with the blocks of"
              f" non-causal attention: at least {flash.CAUSAL_BLOCKS} query blocks save {1 - causal / plain:.0%})")
        print(f"  textbook NumPy           {r['textbook']:5.2f}x  (for comparison)")
        peaks = peak_ratio(n), peak_ratio(n, causal=True), peak_ratio(n, need_weights=False)
        print("  peak memory, n x n buffers: with weights {:.2f}, causal {:.2f}, without weights {:.2f}"
              " (target: <= 1 + inputs/output)".format(*peaks))
    for n in SIZES:
        t = torch_case(n)
        print(f"\ntorch CPU n={n}: F.sdpa (fused) {t['F.sdpa'] * 1e3:.1f} ms, "
              f"three steps {t['three steps'] * 1e3:.1f} ms")
        print(f"  att need_weights=False / F.sdpa   {verdict('att no weights', t['att no weights'] / t['F.sdpa'])}")
        print(f"  att with weights / three steps    {verdict('att weights', t['att weights'] / t['three steps'])}")
        print(f"  F.sdpa on 2-d inputs / F.sdpa     {t['F.sdpa 2-d'] / t['F.sdpa']:5.2f}x  "
              "(torch's unfused math path, for comparison)")


if __name__ == "__main__":
    main()
