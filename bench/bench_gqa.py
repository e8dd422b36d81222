"""Chapter 16's grouped-query attention: speed ratios measured side by side in one run.

Targets:

* NumPy ``grouped_query_attention`` with weights (32 query heads, 8 key/value heads, n = 512, d = 64, float32)
  within 1.2x of ``scaled_dot_product_attention`` on the same q and k, v repeated to 32 heads: sharing the
  key/value heads by broadcasting costs no more than attention on copies;
* torch ``grouped_query_attention(need_weights=False)`` within 1.1x of the fused
  ``F.scaled_dot_product_attention(..., enable_gqa=True)`` it hands the work to;
* a cached decoding step (one layer, 32 query heads, d_head 128, float32, about 4,096 cached tokens, one
  CPU thread) with 8 key/value heads no slower than with 32 (multi-head attention), in both backends: the
  grouped cache is a quarter of the bytes to read, so the step should be clearly faster, never slower.

Times are the minimum over rounds, the functions interleaved (see bench_attention).  The decoding steps
append a token per call, so the cache grows by a few hundred tokens past 4,096 during a run, the same for
both variants.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from bench_attention import min_times

from attnlib import numpy as anp
from attnlib import torch as att

HEADS, KV_HEADS = 32, 8
TARGET_NUMPY, TARGET_TORCH, TARGET_STEP = 1.2, 1.1, 1.0


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


def decode_case(tokens: int = 4096, d_head: int = 128) -> dict:
    """Seconds per cached decoding step, per backend and number of key/value heads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {}
        for name, lib, conv in (("torch", att, torch.from_numpy), ("numpy", anp, lambda x: x)):
            steps = {}
            for kv in (HEADS, KV_HEADS):
                rng = np.random.default_rng(kv)
                cache = lib.KVCache(1, HEADS, d_head, n_kv_heads=kv, capacity=2 * tokens)
                past = conv(rng.normal(size=(kv, tokens - 1, d_head)).astype(np.float32))
                cache.append(0, past, past)
                q1 = conv(rng.normal(size=(HEADS, 1, d_head)).astype(np.float32))
                k1 = conv(rng.normal(size=(kv, 1, d_head)).astype(np.float32))
                steps[kv] = lambda q1=q1, k1=k1, cache=cache, lib=lib: lib.cached_attention(q1, k1, k1, cache, 0)
            t = min_times({f"h_kv={kv}": fn for kv, fn in steps.items()}, rounds=5)
            out[name] = (t[f"h_kv={HEADS}"], t[f"h_kv={KV_HEADS}"])
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
    print(f"cached decoding step at about 4,096 tokens, {HEADS} query heads, d_head 128, float32, one CPU thread:")
    for name, (mha, gqa) in decode_case().items():
        verdict = "ok" if gqa / mha <= TARGET_STEP else "MISSED"
        print(f"  {name:5s} h_kv={HEADS}: {mha * 1e3:6.2f} ms, h_kv={KV_HEADS}: {gqa * 1e3:6.2f} ms, "
              f"ratio {gqa / mha:4.2f} (target <= {TARGET_STEP})  {verdict}")


if __name__ == "__main__":
    main()
