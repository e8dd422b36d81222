"""Chapter 21's real model, SmolLM2-135M-Instruct: loading, a forward pass and generation, measured in one run.

Targets:

* loading the cached model in a fresh process (``load_smollm2()``, ``Tokenizer()``, both backends'
  ``LlamaModel``, and one pass over every weight so that each page of the cache is really read) within
  2 s: an absolute target, since a lesson has 30 s in all.  The first load, which reads the GGUF file and
  dequantizes it into an empty cache, is reported beside it;
* ``attnlib.torch.llama.LlamaModel.forward`` on 512 tokens within 1.5x the same model written directly
  with ``torch.nn.functional`` (``F.rms_norm``, ``F.linear``, ``F.silu``,
  ``F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)``, RoPE from one table of angles
  per pass) in the same run; the NumPy model's forward is reported against the same baseline;
* greedy generation of 64 tokens after a 256-token prompt, in each backend: with the KV cache (one
  prefill, then one ``step`` per token) at least 5x faster than ``use_cache=False`` (a forward pass over
  the whole sequence for every token), the same tokens from both.

Forward passes and generation run on one CPU thread (torch and NumPy's BLAS), as the other benchmarks
do, so the ratios compare the work of the two methods rather than how each spreads over cores.  Times
are minima over rounds, interleaved (see bench_attention); generation without the cache takes a minute
or more per backend, so it is timed once, between two timings of the cached generation (whose minimum
counts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from bench_attention import min_times
from threadpoolctl import threadpool_limits

from attnlib import pretrained
from attnlib.numpy.llama import LlamaModel as NumpyLlama
from attnlib.torch.llama import LlamaModel as TorchLlama

TARGET_LOAD_S, TARGET_FORWARD, TARGET_CACHE = 2.0, 1.5, 5.0
N_FORWARD, PROMPT, NEW = 512, 256, 64

LOAD = """
import time
t0 = time.perf_counter()
from attnlib import pretrained
from attnlib.numpy.llama import LlamaModel as NumpyLlama
from attnlib.torch.llama import LlamaModel as TorchLlama
t1 = time.perf_counter()
config, weights = pretrained.load_smollm2()
tokenizer = pretrained.Tokenizer()
models = NumpyLlama(config, weights), TorchLlama(config, weights)
t2 = time.perf_counter()
total = sum(float(w.sum(dtype="float64")) for w in weights.values())  # every page of every weight read once
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t1)
"""


def load_case() -> dict:
    """Seconds to load in a fresh process: from an empty cache (the first load), then from the cache."""
    def fresh(env) -> list[float]:
        out = subprocess.run([sys.executable, "-c", LOAD], env=env, capture_output=True, text=True, check=True)
        return [float(x) for x in out.stdout.split()]

    with tempfile.TemporaryDirectory(prefix="attnlib-bench-cache-") as empty:
        first = fresh(dict(os.environ, ATTNLIB_CACHE=empty))
    pretrained.load_smollm2()  # the default cache exists (built here if it did not)
    cached = min((fresh(dict(os.environ)) for _ in range(3)), key=lambda t: t[2])
    return {"imports s": cached[0], "first s": first[1], "mapped s": cached[1], "cached s": cached[2]}


def functional_llama(config, weights):
    """The same model written directly with torch.nn.functional: the baseline of the forward ratio."""
    w = {name: torch.from_numpy(a) for name, a in weights.items()}
    n_layers, d, eps = config["n_layers"], config["d_model"], config["norm_eps"]
    h, h_kv, d_head = config["n_heads"], config["n_kv_heads"], config["d_head"]
    rates = config["rope_base"] ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)

    def rotate(x, cos, sin):  # pairs (2i, 2i + 1), as apply_rope
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)

    def forward(tokens):
        n = tokens.shape[0]
        angles = torch.arange(n, dtype=torch.float64)[:, None] * rates
        cos, sin = angles.cos().float(), angles.sin().float()
        x = F.embedding(tokens, w["token_embd.weight"])
        for i in range(n_layers):
            p = f"blk.{i}."
            a = F.rms_norm(x, (d,), w[p + "attn_norm.weight"], eps)
            q = F.linear(a, w[p + "attn_q.weight"]).view(n, h, d_head).transpose(0, 1)
            k = F.linear(a, w[p + "attn_k.weight"]).view(n, h_kv, d_head).transpose(0, 1)
            v = F.linear(a, w[p + "attn_v.weight"]).view(n, h_kv, d_head).transpose(0, 1)
            o = F.scaled_dot_product_attention(rotate(q, cos, sin)[None], rotate(k, cos, sin)[None], v[None],
                                               is_causal=True, enable_gqa=True)[0]
            x = x + F.linear(o.transpose(0, 1).reshape(n, h * d_head), w[p + "attn_output.weight"])
            m = F.rms_norm(x, (d,), w[p + "ffn_norm.weight"], eps)
            x = x + F.linear(F.silu(F.linear(m, w[p + "ffn_gate.weight"])) * F.linear(m, w[p + "ffn_up.weight"]),
                             w[p + "ffn_down.weight"])
        return F.linear(F.rms_norm(x, (d,), w["output_norm.weight"], eps), w["token_embd.weight"])

    return forward


def one_thread(fn):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1), torch.no_grad():
            return fn()
    finally:
        torch.set_num_threads(threads)


def forward_case(config, weights, tokens) -> dict:
    ids = torch.tensor(tokens[:N_FORWARD])
    plain, ours, ref = functional_llama(config, weights), TorchLlama(config, weights), NumpyLlama(config, weights)

    def measure():
        diff = float((ours.forward(ids) - plain(ids)).abs().max())
        t = min_times({"functional": lambda: plain(ids), "attnlib torch": lambda: ours.forward(ids)}, rounds=3)
        t.update(min_times({"attnlib numpy": lambda: ref.forward(tokens[:N_FORWARD])}, rounds=2))
        return t, diff

    t, diff = one_thread(measure)
    return {"s": t, "max |logit diff|": diff, "torch": t["attnlib torch"] / t["functional"],
            "numpy": t["attnlib numpy"] / t["functional"]}


def generation_case(config, weights, tokens) -> dict:
    prompt = tokens[:PROMPT]
    out = {}
    for name, model in (("torch", TorchLlama(config, weights)), ("numpy", NumpyLlama(config, weights))):
        def measure(model=model):
            times, runs = {}, {}
            for use_cache in (True, False, True):  # the cached run twice (the minimum), the slow one once
                start = time.perf_counter()
                runs[use_cache] = model.generate(prompt, NEW, use_cache=use_cache)
                times[use_cache] = min(times.get(use_cache, float("inf")), time.perf_counter() - start)
            return times[True], times[False], runs[True] == runs[False]

        t_cached, t_recompute, same = one_thread(measure)
        out[name] = {"cached s": t_cached, "recompute s": t_recompute, "speed-up": t_recompute / t_cached,
                     "same tokens": same}
    return out


def text_tokens() -> list[int]:
    """The English text of Python's own documentation topics (pydoc_data.topics, sorted by name), tokenized."""
    from pydoc_data.topics import topics

    return pretrained.Tokenizer().encode("\n\n".join(topics[name] for name in sorted(topics)))[:N_FORWARD]


def main() -> None:
    load = load_case()
    print("SmolLM2-135M-Instruct, loaded in a fresh process (imports of attnlib and torch not counted, "
          f"{load['imports s']:.1f} s):")
    print(f"  first load: read the GGUF file, dequantize, write the cache   {load['first s']:6.2f} s")
    print(f"  from the cache: load_smollm2, Tokenizer, both LlamaModels     {load['mapped s']:6.2f} s")
    verdict = "ok" if load["cached s"] <= TARGET_LOAD_S else "MISSED"
    print(f"  ... and every weight read once                              {load['cached s']:6.2f} s "
          f"(target <= {TARGET_LOAD_S:.0f} s)  {verdict}")

    config, weights = pretrained.load_smollm2()
    tokens = text_tokens()
    f = forward_case(config, weights, tokens)
    print(f"forward pass over {N_FORWARD} tokens of pydoc_data.topics, float32, one CPU thread "
          f"(logits differ by at most {f['max |logit diff|']:.1e}):")
    print(f"  torch.nn.functional, written directly                       {f['s']['functional']:6.2f} s")
    verdict = "ok" if f["torch"] <= TARGET_FORWARD else "MISSED"
    print(f"  attnlib.torch LlamaModel  {f['s']['attnlib torch']:6.2f} s  {f['torch']:5.2f}x "
          f"(target <= {TARGET_FORWARD})  {verdict}")
    print(f"  attnlib.numpy LlamaModel  {f['s']['attnlib numpy']:6.2f} s  {f['numpy']:5.2f}x (reported)")

    g = generation_case(config, weights, tokens)
    print(f"greedy generation of {NEW} tokens after a {PROMPT}-token prompt, one CPU thread:")
    for name, r in g.items():
        verdict = "ok" if r["speed-up"] >= TARGET_CACHE and r["same tokens"] else "MISSED"
        print(f"  {name:5s}  with the KV cache {r['cached s']:6.2f} s, recomputing {r['recompute s']:6.1f} s: "
              f"{r['speed-up']:5.1f}x (target >= {TARGET_CACHE:.0f}x), same tokens: {r['same tokens']}  {verdict}")


if __name__ == "__main__":
    main()
