"""Chapter 11's KV cache: cached generation against recomputing the whole prefix, as a ratio measured in one run.

Target:

* greedy generation of 512 tokens after a 16-token prompt with
  ``attnlib.torch.decoder.TinyDecoder`` (2 layers, d_model 128, 4 heads,
  MLP width 512, vocabulary 256, float32, CPU): with the cache (prefill, then
  one step per token) at least 10x faster than running ``forward`` over the
  whole prefix at every step.

Both runs use one CPU thread (``torch.set_num_threads(1)``), as the chapter's
own measurement does, so the ratio compares the work of the two methods rather
than how well each one spreads over cores.  Times are the minimum over a few
rounds, the two runs interleaved (see bench_attention).  Both runs must
generate the same tokens.
"""

from __future__ import annotations

import torch
from bench_attention import min_times

from attnlib.torch.decoder import TinyDecoder

PROMPT, NEW = 16, 512
TARGET = 10.0


def generation_case(rounds: int = 5) -> dict:
    model = TinyDecoder(vocab_size=256, d_model=128, n_heads=4, n_layers=2, seed=0)
    prompt = torch.randint(0, model.vocab_size, (PROMPT,), generator=torch.Generator().manual_seed(0))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            same = torch.equal(model.generate(prompt, NEW), model.generate(prompt, NEW, use_cache=False))
            t = min_times({"cached": lambda: model.generate(prompt, NEW),
                           "recompute": lambda: model.generate(prompt, NEW, use_cache=False)}, rounds=rounds)
    finally:
        torch.set_num_threads(threads)
    return {"same tokens": same, "cached s": t["cached"], "recompute s": t["recompute"],
            "speed-up": t["recompute"] / t["cached"], "parameters": model.n_parameters()}


def main() -> None:
    g = generation_case()
    print(f"greedy generation of {NEW} tokens after a {PROMPT}-token prompt, TinyDecoder "
          f"(2 layers, d_model 128, 4 heads, {g['parameters']:,} parameters), float32, one CPU thread:")
    print(f"  with the KV cache      {g['cached s']:6.2f} s")
    print(f"  recomputing the prefix {g['recompute s']:6.2f} s")
    verdict = "ok" if g["speed-up"] >= TARGET and g["same tokens"] else "MISSED"
    print(f"  speed-up {g['speed-up']:5.1f}x (target >= {TARGET:.0f}x), same tokens: {g['same tokens']}  {verdict}")


if __name__ == "__main__":
    main()
