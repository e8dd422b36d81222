"""Chapter 23's compressed KV cache on SmolLM2-135M-Instruct: bytes, perplexity and the cost of H2O's choice, one run.

Targets:

* bytes.  The issue asked for "a 4-bit KV cache (keys per channel, values per token, group 32): bytes <= 0.30x the
  float16 cache, scales included".  With a float16 scale and a float16 minimum per group of 32 numbers the groups
  add 32 bits per 32 numbers, one bit per number: 5 bits against 16, 0.3125x, so that target cannot hold at
  group 32 (GGUF's Q4_1 stores 5 bits per weight for the same reason, chapter 21).  This benchmark measures the
  bytes of the real quantized structure (``QuantizedKV.nbytes``: codes packed ``bits`` to a number, every scale and
  minimum) on the cache of a real prompt, reports group 32 against the formula ``quantized_nbytes`` (0.3125x), and
  asserts the 0.30 target at group 64 (4.5 bits per number: 0.28125x), where it holds.  A 4-bit integer zero
  point instead of the float16 minimum (4.625 bits at group 32: 0.289x) is reported from the formula;
* the perplexity of the next 128 tokens after a 256-token prompt whose cache is quantized to 4 bits (keys per
  channel, values per token, group 32) against the float32 cache: reported;
* H2O's keep set for every layer and key/value head, computed from the accumulated attention of 2,048 cached
  tokens (``heavy_hitters``: budget 512, 256 recent), within 0.05x the time of the decode step it serves: the
  real model's one-token ``step`` over a cache holding 2,048 tokens.  The cache holds random keys and values of
  the model's shapes (a step's time does not depend on them; a 2,048-token prefill would dominate the run).

One CPU thread (torch and NumPy's BLAS), as the other benchmarks; times are minima over interleaved rounds.
"""

from __future__ import annotations

import pydoc_data.topics

import torch
import torch.nn.functional as F
from bench_attention import min_times
from threadpoolctl import threadpool_limits

from attnlib import pretrained
from attnlib import torch as att
from attnlib.torch.llama import LlamaModel

TARGET_BYTES, TARGET_KEEP = 0.30, 0.05
PROMPT, SCORED, CACHED, BUDGET, RECENT = 256, 128, 2048, 512, 256


def prompt_cache(model, ids):
    """The float32 cache of the first PROMPT tokens, stacked: keys and values (L, h_kv, PROMPT, d)."""
    cache = model.new_cache()
    with torch.no_grad():
        model.step(ids[:PROMPT], cache, logits_at=-1)
    keys = torch.stack([cache.read(layer)[0] for layer in range(model.n_layers)])
    values = torch.stack([cache.read(layer)[1] for layer in range(model.n_layers)])
    return keys, values


def perplexity(model, ids, keys, values) -> float:
    cache = model.new_cache()
    for layer in range(model.n_layers):
        cache.append(layer, keys[layer], values[layer])
    with torch.no_grad():
        logits = model.step(ids[PROMPT:PROMPT + SCORED], cache, logits_at=slice(0, SCORED - 1),
                            positions=torch.arange(PROMPT, PROMPT + SCORED))
    return float(torch.exp(F.cross_entropy(logits, torch.tensor(ids[PROMPT + 1:PROMPT + SCORED]))))


def roundtrip(x, bits, axis, group):
    return att.dequantize_kv(att.quantize_kv(x.half(), bits, axis=axis, group_size=group)).float()


def bytes_case(keys, values) -> dict:
    k16, v16 = keys.half(), values.half()
    full = k16.nbytes + v16.nbytes
    out = {}
    for group in (32, 64):
        stored = (att.quantize_kv(k16, 4, axis=-2, group_size=group).nbytes
                  + att.quantize_kv(v16, 4, axis=-1, group_size=group).nbytes)
        formula = 2 * att.quantized_nbytes(k16.numel(), 4, group_size=group)
        out[group] = {"ratio": stored / full, "formula": formula / full, "same": stored == formula}
    out["zero point"] = att.quantized_nbytes(k16.numel(), 4, group_size=32, minimum_bits=4) / k16.nbytes
    return out


def keep_case(model) -> dict:
    torch.manual_seed(0)
    cache = model.new_cache(capacity=CACHED + 1)
    shape = (model.n_kv_heads, CACHED, model.d_head)
    for layer in range(model.n_layers):
        cache.append(layer, torch.randn(shape), torch.randn(shape))
    totals = torch.rand(model.n_layers, model.n_kv_heads, CACHED)  # each key's accumulated attention

    def step():
        with torch.no_grad():
            model.step([42], cache, positions=torch.tensor([CACHED]), logits_at=-1)
        cache.truncate(CACHED)  # the same cache for the next round

    def keep():
        return att.heavy_hitters(totals, BUDGET, recent=RECENT)

    assert keep().shape == (model.n_layers, model.n_kv_heads, BUDGET)
    t = min_times({"step": step, "keep": keep})
    return {"s": t, "ratio": t["keep"] / t["step"]}


def main() -> None:
    config, weights = pretrained.load_smollm2()
    model = LlamaModel(config, weights)
    ids = pretrained.Tokenizer().encode(pydoc_data.topics.topics["execmodel"])[:PROMPT + SCORED]
    with threadpool_limits(1):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            keys, values = prompt_cache(model, ids)
            b = bytes_case(keys, values)
            full = perplexity(model, ids, keys, values)
            four = perplexity(model, ids, roundtrip(keys, 4, -2, 32), roundtrip(values, 4, -1, 32))
            k = keep_case(model)
        finally:
            torch.set_num_threads(threads)
    print(f"4-bit KV cache of a {PROMPT}-token prompt (keys per channel, values per token), float16 scale and "
          f"minimum per group, against the float16 cache:")
    for group in (32, 64):
        r = b[group]
        verdict = "" if group == 32 else ("ok" if r["ratio"] <= TARGET_BYTES else "MISSED")
        target = "(the 0.30 target cannot hold here: 5 bits per number)" if group == 32 else \
            f"(target <= {TARGET_BYTES})"
        print(f"  group {group}: {r['ratio']:.5f}x measured, formula {r['formula']:.5f}x, equal: {r['same']} "
              f"{target}  {verdict}")
    print(f"  group 32 with a 4-bit integer zero point instead of the float16 minimum: {b['zero point']:.5f}x "
          f"(formula, reported)")
    print(f"perplexity of the next {SCORED} tokens: float32 cache {full:.3f}, 4-bit cache (group 32) {four:.3f} "
          f"({four / full - 1:+.2%}, reported)")
    verdict = "ok" if k["ratio"] <= TARGET_KEEP else "MISSED"
    print(f"H2O keep set (budget {BUDGET}, {RECENT} recent) for {model.n_layers} layers x {model.n_kv_heads} heads "
          f"over {CACHED} cached tokens: {k['s']['keep'] * 1e3:.3f} ms; one-token step over the cache "
          f"{k['s']['step'] * 1e3:.1f} ms: {k['ratio']:.4f}x (target <= {TARGET_KEEP})  {verdict}")
    assert b[64]["same"] and b[32]["same"] and b[64]["ratio"] <= TARGET_BYTES < b[32]["ratio"]
    assert k["ratio"] <= TARGET_KEEP


if __name__ == "__main__":
    main()
