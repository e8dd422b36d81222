"""Chapter 17's multi-head latent attention: the absorbed decoding step against the naive one, in one run.

Targets (DeepSeek-V2-like shapes scaled to this machine: h = 16, d_head = 64, d_latent = 256,
d_rope = 32, d_latent_q = 384, d_model = 1024; float32; one layer; about 4,096 cached tokens; one
CPU thread for torch and for NumPy's BLAS, as the other decoding benches):

* ``latent_attention_step`` (absorbed: ``W_uk`` folded into the query, ``W_uv`` applied after the
  weighted sum of latents) takes at most 1.0x the time of the naive step, which reconstructs every
  cached token's per-head keys and values from the latents at each step, in both backends;
* the latent cache's bytes are exactly ``(d_latent + d_rope) / (2 h d_head)`` of a ``KVCache`` of
  multi-head attention holding the same tokens (asserted, not timed).

Both steps project the new token, append its latent and rotated key, and attend over the whole
cache; they differ only in the attention (``attnlib.numpy.mla._step(..., absorb=...)``).  Times are
the minimum over rounds, the two steps interleaved (see bench_attention).  Each call appends a token,
so both caches grow by a few tokens past 4,096 during a run.  The FLOPs printed are counted from the
shapes (multiply-adds x 2) for the attention part of a step, the projections of the new token left out.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
from bench_attention import min_times
from threadpoolctl import threadpool_limits

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import mla as nmla
from attnlib.torch import mla as tmla

H, D_HEAD, D_LATENT, D_ROPE, D_LATENT_Q, D_MODEL = 16, 64, 256, 32, 384, 1024
TOKENS = 4096
TARGET = 1.0


def weights(rng) -> dict:
    shapes = {"w_dq": (D_MODEL, D_LATENT_Q), "w_uq": (D_LATENT_Q, H * D_HEAD), "w_qr": (D_LATENT_Q, H * D_ROPE),
              "w_dkv": (D_MODEL, D_LATENT), "w_uk": (D_LATENT, H * D_HEAD), "w_uv": (D_LATENT, H * D_HEAD),
              "w_kr": (D_MODEL, D_ROPE), "w_o": (H * D_HEAD, D_MODEL)}
    return {n: (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32) for n, s in shapes.items()}


def attention_flops(n: int) -> dict:
    """Counted FLOPs of one step's attention over ``n`` cached tokens (one new query)."""
    naive = (2 * 2 * n * D_LATENT * H * D_HEAD  # k_c and v_c of every cached token
             + 2 * H * n * (D_HEAD + D_ROPE) + 2 * H * n * D_HEAD)  # scores, weighted sum of values
    absorbed = (2 * H * D_HEAD * D_LATENT  # q_c,i W_uk,i^T
                + 2 * H * n * (D_LATENT + D_ROPE) + 2 * H * n * D_LATENT  # scores, weighted sum of latents
                + 2 * H * D_LATENT * D_HEAD)  # W_uv,i after the sum
    return {"naive": naive, "absorbed": absorbed}


def decode_case(mod, conv, rounds: int = 5) -> dict:
    """Seconds per decoding step, absorbed and naive, each on its own cache of TOKENS tokens."""
    rng = np.random.default_rng(0)
    w = {n: conv(a) for n, a in weights(rng).items()}
    prompt = conv(rng.normal(size=(TOKENS, D_MODEL)).astype(np.float32))
    x1 = conv(rng.normal(size=(1, D_MODEL)).astype(np.float32))
    steps = {}
    for absorb in (True, False):
        cache = mod.LatentKVCache(1, D_LATENT, D_ROPE, capacity=2 * TOKENS)
        cache.append(0, *mod._latents(prompt, w, None))  # the prompt's latents and rotated keys
        steps["absorbed" if absorb else "naive"] = (
            lambda absorb=absorb, cache=cache: mod._step(x1, w, H, cache, 0, absorb=absorb))
    same = np.allclose(_np(steps["absorbed"]()), _np(steps["naive"]()), rtol=1e-3, atol=1e-4)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):  # NumPy's BLAS on one thread too
            t = min_times(steps, rounds=rounds)
    finally:
        torch.set_num_threads(threads)
    return {"same": same, "absorbed s": t["absorbed"], "naive s": t["naive"], "ratio": t["absorbed"] / t["naive"]}


def _np(a):
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a


def cache_bytes() -> dict:
    """Bytes of TOKENS tokens of one layer: the latent cache against multi-head attention's KVCache."""
    out = {}
    for name, lib, mod, conv in (("numpy", anp, nmla, lambda a: a), ("torch", att, tmla, torch.from_numpy)):
        latent = mod.LatentKVCache(1, D_LATENT, D_ROPE)
        latent.append(0, conv(np.zeros((TOKENS, D_LATENT), np.float32)), conv(np.zeros((TOKENS, D_ROPE), np.float32)))
        kv = lib.KVCache(1, H, D_HEAD)
        keys = conv(np.zeros((H, TOKENS, D_HEAD), np.float32))
        kv.append(0, keys, keys)
        out[name] = (latent.nbytes, kv.nbytes)
    return out


def main() -> None:
    print(f"MLA decoding step at {TOKENS:,} cached tokens, h = {H}, d_head = {D_HEAD}, d_latent = {D_LATENT}, "
          f"d_rope = {D_ROPE}, d_model = {D_MODEL}, float32, one CPU thread:")
    flops = attention_flops(TOKENS)
    print(f"  attention FLOPs per step (counted): naive {flops['naive'] / 1e6:,.1f} M, "
          f"absorbed {flops['absorbed'] / 1e6:,.1f} M ({flops['naive'] / flops['absorbed']:.1f}x fewer)")
    missed = []
    for name, mod, conv in (("numpy", nmla, lambda a: a), ("torch", tmla, torch.from_numpy)):
        r = decode_case(mod, conv)
        ok = r["ratio"] <= TARGET and r["same"]
        print(f"  {name:5s} absorbed {r['absorbed s'] * 1e3:7.2f} ms, naive {r['naive s'] * 1e3:7.2f} ms, "
              f"ratio {r['ratio']:5.3f} (target <= {TARGET}), same output: {r['same']}  {'ok' if ok else 'MISSED'}")
        if not ok:
            missed.append(f"{name} decode step ratio {r['ratio']:.3f}")
    want = Fraction(D_LATENT + D_ROPE, 2 * H * D_HEAD)
    for name, (latent, kv) in cache_bytes().items():
        ok = Fraction(latent, kv) == want
        print(f"  {name:5s} cache of {TOKENS:,} tokens: latent {latent:,} bytes, MHA KVCache {kv:,} bytes, "
              f"ratio {latent / kv:.6f} = (d_latent + d_rope)/(2 h d_head) = {float(want):.6f}: {ok}  "
              f"{'ok' if ok else 'MISSED'}")
        if not ok:
            missed.append(f"{name} cache bytes {latent} / {kv}")
    assert not missed, "; ".join(missed)


if __name__ == "__main__":
    main()
