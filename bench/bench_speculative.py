"""Chapter 24's speculative decoding on the real model, SmolLM2-135M-Instruct, measured in one run.

Target:

* verifying k = 4 draft tokens after the last token in one cached ``step`` (5 new positions) within 2x the time
  of a one-token decoding step at the same cache length: the point of verifying together.  Both run on the real
  model after the same 40-token chat prompt.

Reported beside it (no target): greedy speculative decoding of 32 tokens with the chapter's draft (the first 28
layers, its final norm and read-out, ``attnlib.torch.early_exit``) and k = 4 against plain greedy decoding
(``LlamaModel.generate``), time per token and the ratio, with the same tokens checked; and the time of a draft
step against a target step, which is what decides the ratio on a CPU, with a one-layer draft's step beside it
(what a draft cannot shed however few layers it keeps: the embedding, the final norm, the read-out, the call).

One CPU thread, as in the chapter and the other benchmarks; times are minima over interleaved rounds
(``bench_attention.min_times``).
"""

from __future__ import annotations

import time

import torch
from bench_attention import min_times
from threadpoolctl import threadpool_limits

from attnlib import pretrained
from attnlib import torch as att
from attnlib.torch.llama import LlamaModel

TARGET_VERIFY = 2.0
K, L_DRAFT, NEW = 4, 28, 32
QUESTION = "Explain in two sentences what a hash table is."


def step_case(model, prompt, tokens) -> dict:
    """Seconds of a one-token step and of a (K + 1)-token step after the prompt's cache (rolled back each time)."""
    cache = model.new_cache()
    with torch.no_grad():
        model.step(prompt, cache)

    def run(t):
        def fn():
            with torch.no_grad():
                model.step(t, cache)
            cache.truncate(len(prompt))
        return fn

    return min_times({"one": run(tokens[:1]), "verify": run(tokens[:K + 1])})


def generation_case(model, draft, prompt) -> dict:
    """Seconds for NEW tokens: plain greedy and greedy speculative decoding (best of 3, interleaved)."""
    best = {"plain": float("inf"), "speculative": float("inf")}
    for _ in range(3):
        t0 = time.perf_counter()
        plain = model.generate(prompt, NEW)
        t1 = time.perf_counter()
        spec, accepted = att.speculative_generate(model, draft, prompt, NEW, K)
        t2 = time.perf_counter()
        best = {"plain": min(best["plain"], t1 - t0), "speculative": min(best["speculative"], t2 - t1)}
    return {**best, "same tokens": plain == spec, "rounds": len(accepted)}


def main() -> None:
    config, weights = pretrained.load_smollm2()
    model = LlamaModel(config, weights)
    draft = att.early_exit(model, L_DRAFT)
    prompt = pretrained.Tokenizer().chat([{"role": "user", "content": QUESTION}])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            ref = model.generate(prompt, NEW)
            s = step_case(model, prompt, ref)
            d = step_case(draft, prompt, ref)
            one = step_case(att.early_exit(model, 1), prompt, ref)
            g = generation_case(model, draft, prompt)
    finally:
        torch.set_num_threads(threads)
    ratio = s["verify"] / s["one"]
    verdict = "ok" if ratio <= TARGET_VERIFY else "MISSED"
    print(f"SmolLM2-135M-Instruct after a {len(prompt)}-token prompt, one CPU thread:")
    print(f"  one-token decoding step                        {1000 * s['one']:7.1f} ms")
    print(f"  verifying k = {K} drafts in one step ({K + 1} tokens)  {1000 * s['verify']:7.1f} ms  "
          f"{ratio:5.2f}x (target <= {TARGET_VERIFY:.0f}x)  {verdict}")
    print(f"  a draft step (first {L_DRAFT} layers)                {1000 * d['one']:7.1f} ms  "
          f"{d['one'] / s['one']:5.2f}x a target step (reported)")
    print(f"  a one-layer draft step                        {1000 * one['one']:7.1f} ms  "
          f"{one['one'] / s['one']:5.2f}x a target step (reported)")
    per = {name: 1000 * g[name] / NEW for name in ("plain", "speculative")}
    print(f"greedy generation of {NEW} tokens ({g['rounds']} verifications, same tokens: {g['same tokens']}):")
    print(f"  plain greedy {per['plain']:6.1f} ms/token, speculative (k = {K}) {per['speculative']:6.1f} ms/token: "
          f"{per['speculative'] / per['plain']:5.2f}x (reported)")
    assert ratio <= TARGET_VERIFY and g["same tokens"], "speculative verification target missed"


if __name__ == "__main__":
    main()
