"""Chapter 16's grouped-query attention: speed ratios measured side by side in one run.

Targets:

* NumPy ``grouped_query_attention`` with weights (32 query heads, 8 key/value heads, n = 512, d = 64, float32)
  within 1.2x of ``scaled_dot_product_attention`` on the same q and k, v repeated to 32 heads: sharing the
  key/value heads costs no more than attention on copies;
* torch ``grouped_query_attention(need_weights=False)`` within 1.1x of the fused
  ``F.scaled_dot_product_attention(..., enable_gqa=True)``;
* a cached decoding step (one layer, 32 query heads, d_head 128, float32, about 4,096 cached tokens, one
  CPU thread), in both backends: with 8 key/value heads at most 0.30 of the time with 32 (multi-head
  attention), with 1 at most 0.10.  The step is matrix-vector work over the cache, whose bytes fall to
  0.25 and 0.03 of multi-head attention's.

Each step is also reported against the floor measured in the same run: the time to read the cached keys
and values once (a sum over each), and, in torch, the fused kernel with ``enable_gqa=True`` on the same
cache (what ``cached_attention`` used before it folded each group of query heads into the rows of one
product).  Times are the minimum over rounds, the functions interleaved (see bench_attention).  The decoding
steps append a token per call, so the cache grows by a few hundred tokens past 4,096 during a run, the same
for every variant.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from bench_attention import min_times
from threadpoolctl import threadpool_limits

from attnlib import numpy as anp
from attnlib import torch as att

HEADS, KV_HEADS, D_HEAD, TOKENS = 32, 8, 128, 4096
TARGET_NUMPY, TARGET_TORCH = 1.2, 1.1
TARGET_STEP = {KV_HEADS: 0.30, 1: 0.10}  # step time / multi-head attention's step time


def attention_case(n: int = 512, d: int = 64) -> dict:
    rng = np.random.default_rng(0)
    q = rng.normal(size=(1, HEADS, n, d)).astype(np.float32)
    k, v = rng.normal(size=(2, 1, KV_HEADS, n, d)).astype(np.float32)
    g = HEADS // KV_HEADS
    k_rep, v_rep = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    t = min_times({"gqa": lambda: anp.grouped_query_attention(q, k, v),
                   "repeated": lambda: anp.scaled_dot_product_attention(q, k_rep, v_rep)})
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    f = min_times({"gqa": lambda: att.grouped_query_attention(tq, tk, tv, need_weights=False),
                   "fused": lambda: F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)})
    return {"numpy": t["gqa"] / t["repeated"], "torch": f["gqa"] / f["fused"], "numpy s": t, "torch s": f}


def _filled_cache(lib, conv, kv: int):
    """One layer cached with ``TOKENS - 1`` tokens; the next token's query and key (also its value)."""
    rng = np.random.default_rng(kv)
    cache = lib.KVCache(1, HEADS, D_HEAD, n_kv_heads=kv, capacity=2 * TOKENS)
    past = conv(rng.normal(size=(kv, TOKENS - 1, D_HEAD)).astype(np.float32))
    cache.append(0, past, past)
    q1 = conv(rng.normal(size=(HEADS, 1, D_HEAD)).astype(np.float32))
    k1 = conv(rng.normal(size=(kv, 1, D_HEAD)).astype(np.float32))
    return cache, q1, k1


def _read_once(cache):
    """Read every cached key and value once (a sum over each): the floor of a step that must read them."""
    keys, values = cache.read(0)
    return keys.sum(), values.sum()


def decode_case() -> dict:
    """Seconds per cached decoding step and per read of the cache, per backend and number of key/value heads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):  # NumPy's BLAS on one thread too
            out = {}
            for name, lib, conv in (("torch", att, torch.from_numpy), ("numpy", anp, lambda x: x)):
                fns = {}
                for kv in (HEADS, KV_HEADS, 1):
                    cache, q1, k1 = _filled_cache(lib, conv, kv)
                    fns[("step", kv)] = lambda q1=q1, k1=k1, c=cache, lib=lib: lib.cached_attention(q1, k1, k1, c, 0)
                    fns[("read", kv)] = lambda c=cache: _read_once(c)
                    if name == "torch":
                        fns[("enable_gqa", kv)] = lambda q1=q1, c=cache: F.scaled_dot_product_attention(
                            q1[None], *(t[None] for t in c.read(0)), enable_gqa=True)
                out[name] = min_times(fns, rounds=5)
    finally:
        torch.set_num_threads(threads)
    return out


def main() -> None:
    a = attention_case()
    print(f"grouped-query attention, {HEADS} query heads, {KV_HEADS} key/value heads, n = 512, d = 64, float32:")
    verdict = "ok" if a["numpy"] <= TARGET_NUMPY else "MISSED"
    print(f"  NumPy with weights / SDPA on repeated k, v   {a['numpy']:5.2f}x (target <= {TARGET_NUMPY})  {verdict}")
    verdict = "ok" if a["torch"] <= TARGET_TORCH else "MISSED"
    print(f"  torch need_weights=False / F.sdpa(enable_gqa) {a['torch']:5.2f}x (target <= {TARGET_TORCH})  {verdict}")
    print(f"cached decoding step at about {TOKENS:,} tokens, {HEADS} query heads, d_head {D_HEAD}, float32, "
          f"one CPU thread (floor: reading the cached K and V once):")
    missed = []
    for name, t in decode_case().items():
        mha = t[("step", HEADS)]
        for kv in (HEADS, KV_HEADS, 1):
            step, floor = t[("step", kv)], t[("read", kv)]
            line = (f"  {name:5s} h_kv={kv:2d}: step {step * 1e3:6.2f} ms = {step / floor:5.1f}x the floor "
                    f"({floor * 1e3:6.2f} ms)")
            if ("enable_gqa", kv) in t:
                fused = t[("enable_gqa", kv)]
                line += f"; F.sdpa(enable_gqa) {fused * 1e3:6.2f} ms = {fused / floor:5.1f}x"
            if kv in TARGET_STEP:
                ok = step / mha <= TARGET_STEP[kv]
                line += f"; / MHA {step / mha:4.2f} (target <= {TARGET_STEP[kv]:.2f})  {'ok' if ok else 'MISSED'}"
                if not ok:
                    missed.append(f"{name} h_kv={kv}: {step / mha:.2f} > {TARGET_STEP[kv]}")
            print(line)
    assert not missed, f"decoding-step targets missed: {missed}"


if __name__ == "__main__":
    main()
